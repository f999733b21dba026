# The operand's images (hack/operand-image.sh), built here from the binaries of the releases
# the operator ships (hack/build-tool.sh) in place of upstream's, which no registry here
# serves. Each is laid out as upstream's: a distroless-like root (the binary, the shared
# libraries it links, the CA bundle, passwd entries for root, nobody and nonroot, /tmp) on
# no base at all, so nothing in it runs but the binary; non-root; fine with a read-only root
# filesystem and any UID (group 0, as OpenShift's restricted SCC runs it).
#
#   --target external-secrets      upstream's Dockerfile: /bin/external-secrets, USER 65534
#   --target bitwarden-sdk-server  upstream's: /bitwarden-sdk-server serve, USER 65532,
#                                  BW_SECRETS_MANAGER_STATE_PATH=/state, EXPOSE 9998
#                                  (STATE_DIR=/state)
#
# BASE_IMAGE is the Debian stand-in base (hack/base-image.sh): the libraries and the CA bundle
# come from its packages, the same bookworm glibc the binaries were linked against here.
# Build args BINARY_PATH (where the binary goes), VERSION, STATE_DIR. Build context: `binary`
# (the executable). Needs no network.
ARG BASE_IMAGE

FROM ${BASE_IMAGE} AS rootfs
ARG BINARY_PATH
ARG STATE_DIR=
COPY binary /staging/binary
# The binary and what `ldd` says it loads (nothing for a static one), at the same paths; the
# CA bundle; users and groups as distroless has them; /tmp; STATE_DIR (if any) owned by the
# image's user (nonroot), group 0 and group-writable (OpenShift's arbitrary UIDs run in group
# 0). With a read-only root filesystem only a volume mounted there is writable.
RUN set -eu; \
    install -D -m 0755 /staging/binary "/rootfs${BINARY_PATH}"; \
    libraries=$(ldd "/rootfs${BINARY_PATH}" 2>/dev/null | grep -o '/[^ ]*' || true); \
    for library in $libraries; do cp -L --parents "$library" /rootfs/; done; \
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ca-certificates.crt; \
    printf '%s\n' 'root:x:0:0:root:/root:/sbin/nologin' \
      'nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin' \
      'nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin' >/rootfs/etc/passwd; \
    printf '%s\n' 'root:x:0:' 'nobody:x:65534:' 'nonroot:x:65532:' >/rootfs/etc/group; \
    install -d -m 1777 /rootfs/tmp; \
    if [ -n "$STATE_DIR" ]; then install -d -m 0770 -o 65532 -g 0 "/rootfs${STATE_DIR}"; fi

FROM scratch AS external-secrets
ARG VERSION
LABEL org.opencontainers.image.title="external-secrets" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/external-secrets/external-secrets" \
      description="external-secrets ${VERSION}, built from its release source"
COPY --from=rootfs /rootfs/ /
# Run as UID for nobody (upstream's words)
USER 65534
ENTRYPOINT ["/bin/external-secrets"]

FROM scratch AS bitwarden-sdk-server
ARG VERSION
LABEL org.opencontainers.image.title="bitwarden-sdk-server" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.source="https://github.com/external-secrets/bitwarden-sdk-server" \
      description="bitwarden-sdk-server ${VERSION}, built from its release source"
COPY --from=rootfs /rootfs/ /
ENV BW_SECRETS_MANAGER_STATE_PATH=/state
USER 65532
EXPOSE 9998
ENTRYPOINT ["/bitwarden-sdk-server", "serve"]
