# The external-secrets operator image: `python -m manager run` (and /usr/bin/gather, the
# must-gather entry point) in a virtualenv at /opt/operator, as UID 1001 in group 0, so
# OpenShift's arbitrary UIDs (group 0 too) work as well. Build it with `make image`
# (hack/build-image.sh): the build context is not this repository but the wheels made outside
# the build, and hack/gather, so the build needs no network:
#
#   wheels/*.whl   the operator's wheel and its dependencies' (manylinux, CPython 3.11)
#   hack/gather
#
# BASE_IMAGE needs python3 (3.11) with its venv module, the CA bundle, and the openssl CLI
# (the self-signed metrics certificate is made with it; the build fails without one). The
# default is the production base; `make image` builds with a stand-in made from Debian
# packages (hack/base-image.sh) unless BASE_IMAGE names another. Release builds should pin
# BASE_IMAGE by digest.
ARG BASE_IMAGE=registry.access.redhat.com/ubi9/python-311:latest

# The virtualenv, installed offline from the context's wheels only; pip compiles the bytecode
# here (the root filesystem is read-only at run time), then leaves. A stage of its own, so
# the wheels stay out of the image and any changed wheel rebuilds the layer.
FROM ${BASE_IMAGE} AS install
ARG VERSION=0.2.0
LABEL io.external-secrets-operator.stage=install
USER 0
COPY wheels /tmp/wheels
RUN openssl version >/dev/null \
    && python3 -c 'import sys; assert sys.version_info[:2] == (3, 11), sys.version' \
    && python3 -m venv /opt/operator \
    && /opt/operator/bin/python -m pip install --quiet --no-index --no-cache-dir \
       --disable-pip-version-check --find-links /tmp/wheels "external-secrets-operator==${VERSION}" \
    && /opt/operator/bin/python -m pip uninstall --quiet --yes pip setuptools \
    && /opt/operator/bin/python -c 'import manager.cli, manager.render'

FROM ${BASE_IMAGE}
ARG VERSION=0.2.0
LABEL name="external-secrets-operator" \
      version="${VERSION}" \
      summary="Installs and runs the external-secrets stack" \
      description="Operator that installs, configures and keeps running external-secrets" \
      io.k8s.display-name="External Secrets Operator" \
      io.openshift.tags="security,secrets,external-secrets"
USER 0
COPY --from=install /opt/operator /opt/operator
# The must-gather convention: `oc adm must-gather --image=IMAGE` runs /usr/bin/gather, which
# writes the support bundle to /must-gather (`python -m manager gather --dest-dir`).
COPY --chown=0:0 --chmod=0755 hack/gather /usr/bin/gather
# The root filesystem is read-only at run time: no bytecode files, unbuffered logs.
ENV PATH=/opt/operator/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 1001
# The Deployment's ports: metrics (HTTPS by default) and kopf's liveness endpoint.
EXPOSE 8080 8081
ENTRYPOINT ["/opt/operator/bin/python", "-m", "manager"]
CMD ["run", "--liveness=http://0.0.0.0:8081/healthz"]
