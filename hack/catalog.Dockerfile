# The catalog image (hack/publish-images.sh): the file-based catalog in /configs served by the
# pinned opm (built by hack/build-tool.sh opm, linked against glibc), as OLM's registry pod
# runs it. Build context: `opm` and `configs/`.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
LABEL operators.operatorframework.io.index.configs.v1=/configs
COPY --chmod=0755 opm /bin/opm
COPY configs /configs
# The serving cache, made at build time, so the pod starts serving at once. opm serve takes a
# lock file in it: writable by group 0, the group of OpenShift's arbitrary UIDs (the root
# filesystem of OLM's registry pod is writable). No profiling endpoint: its default,
# localhost:6060, needs a resolvable localhost.
RUN /bin/opm serve /configs --cache-dir=/tmp/cache --cache-only --pprof-addr= \
    && chmod -R g+rwX /tmp/cache
USER 1001
EXPOSE 50051
ENTRYPOINT ["/bin/opm"]
CMD ["serve", "/configs", "--cache-dir=/tmp/cache", "--pprof-addr="]
