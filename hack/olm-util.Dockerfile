# The stand-in for OLM's util image (hack/olm-util-image.sh): the pinned, statically linked
# cpb at /bin/cpb, where OLM's unpack Job copies it from (`/bin/cp -Rv /bin/cpb /util/cpb`).
# Build context: `cpb`.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
COPY --chmod=0755 cpb /bin/
USER 1001
