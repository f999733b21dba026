# The catalog image (hack/publish-images.sh, tests/olm/test_catalog_image.py): the file-based
# catalog in /configs served by the opm of its base, as OLM's registry pod runs it. BASE_IMAGE
# is the opm base (hack/opm-base-image.sh: the pinned opm and grpc_health_probe, our
# stand-in for upstream's opm image). Build context: `configs/`.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
LABEL operators.operatorframework.io.index.configs.v1=/configs
COPY configs /configs
# The serving cache, made at build time, so the pod starts serving at once. opm serve takes a
# lock file in it: writable by group 0, the group of OpenShift's arbitrary UIDs (the root
# filesystem of OLM's registry pod is writable). No profiling endpoint: its default,
# localhost:6060, needs a resolvable localhost.
USER 0
RUN /bin/opm serve /configs --cache-dir=/tmp/cache --cache-only --pprof-addr= \
    && chmod -R g+rwX /tmp/cache
USER 1001
EXPOSE 50051
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache", "--pprof-addr="]
