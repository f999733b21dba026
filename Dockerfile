# The external-secrets operator image: `python -m manager run` (and `gather`, the
# must-gather entry point) on Red Hat UBI 9 with Python 3.11, as the base image's
# unprivileged user (UID 1001, group 0, so OpenShift's arbitrary UIDs work too). Build it
# with `make image` (podman or docker):
#
#   podman build -t IMAGE --build-arg VERSION=0.1.0 .
#
# Release builds should pin BASE_IMAGE by digest.
ARG BASE_IMAGE=registry.access.redhat.com/ubi9/python-311:latest

# Stage 1: build the wheel, so no source tree or build tooling reaches the final image.
FROM ${BASE_IMAGE} AS wheel
WORKDIR /opt/app-root/src
COPY --chown=1001:0 pyproject.toml README.md ./
COPY --chown=1001:0 manager ./manager
# manager/render/operand links here: the operand templates travel as package data.
COPY --chown=1001:0 manifests/operand ./manifests/operand
RUN pip wheel --no-cache-dir --no-deps --wheel-dir /tmp/wheels .

FROM ${BASE_IMAGE}
ARG VERSION=0.1.0
LABEL name="external-secrets-operator" \
      version="${VERSION}" \
      summary="Installs and runs the external-secrets stack" \
      description="Operator that installs, configures and keeps running external-secrets" \
      io.k8s.display-name="External Secrets Operator" \
      io.openshift.tags="security,secrets,external-secrets"
COPY --from=wheel --chown=1001:0 /tmp/wheels /tmp/wheels
RUN pip install --no-cache-dir /tmp/wheels/*.whl && rm -rf /tmp/wheels
# The must-gather convention: `oc adm must-gather --image=IMAGE` runs /usr/bin/gather, which
# writes the support bundle to /must-gather (`python -m manager gather --dest-dir`).
COPY --chown=0:0 --chmod=0755 hack/gather /usr/bin/gather
# The root filesystem is read-only at run time: no bytecode files, unbuffered logs.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
USER 1001
# kopf's liveness endpoint (the Deployment's probes).
EXPOSE 8080
ENTRYPOINT ["python", "-m", "manager"]
CMD ["run", "--liveness=http://0.0.0.0:8080/healthz"]
