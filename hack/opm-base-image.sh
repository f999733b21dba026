#!/usr/bin/env bash
# Makes the opm base image that catalog images are built FROM (hack/catalog.Dockerfile) and
# prints its reference, localhost/eso-opm-base:<key>: the stand-in base (hack/base-image.sh)
# plus the pinned opm and grpc_health_probe (hack/opm-base.Dockerfile). It stands in for
# upstream's quay.io/operator-framework/opm image, which no registry here serves.
#
# The key hashes every input (this script, the Dockerfile, the base image's ID, both
# binaries): the image is built only when the container store lacks that key's tag, and a
# changed input makes a new one. Needs no network once the base and the binaries are cached
# (make image, make prereqs).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=${CONTAINER_TOOL:-$(command -v podman || command -v docker || true)}
log() { echo "[opm-base-image] $*" >&2; }
die() { log "$*"; exit 1; }

[ -n "$TOOL" ] || die "needs podman or docker"
BASE=$("$HERE/base-image.sh")
OPM=$(bash "$HERE/build-tool.sh" opm)/opm
PROBE=$(bash "$HERE/build-tool.sh" grpc-health-probe)/grpc_health_probe
KEY=$({ sha256sum "${BASH_SOURCE[0]}" "$HERE/opm-base.Dockerfile" "$OPM" "$PROBE" | cut -c1-64
        "$TOOL" image inspect --format '{{.Id}}' "$BASE"; } | sha256sum | cut -c1-12)
REF=localhost/eso-opm-base:$KEY

if ! "$TOOL" image inspect "$REF" >/dev/null 2>&1; then
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  cp "$OPM" "$PROBE" "$context/"
  "$TOOL" build --quiet --network=none --build-arg "BASE_IMAGE=$BASE" \
    -f "$HERE/opm-base.Dockerfile" -t "$REF" "$context" >/dev/null
  log "built $REF from $BASE"
fi
echo "$REF"
