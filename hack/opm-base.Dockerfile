# The opm base image (hack/opm-base-image.sh): our stand-in for upstream's opm image, which
# catalog images are built FROM. The pinned opm (hack/build-tool.sh opm, linked against
# glibc: the Debian stand-in base has it) and grpc_health_probe, the command of the exec
# probes OLM gives its registry pods. Build context: `opm` and `grpc_health_probe`.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY --chmod=0755 opm grpc_health_probe /bin/
USER 1001
EXPOSE 50051
ENTRYPOINT ["/bin/opm"]
