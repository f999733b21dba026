#!/usr/bin/env bash
# Builds a small image of pinned binaries on the stand-in base (hack/base-image.sh) and
# prints its reference, localhost/eso-NAME:<key>:
#
#   hack/tool-image.sh NAME DOCKERFILE FILE...
#
# The build context holds the FILEs; DOCKERFILE gets BASE_IMAGE. The key hashes every input
# (this script, DOCKERFILE, the FILEs, the base image's ID): the image is built
# only when the container store lacks that key's tag, and a changed input makes a new one.
# Used by hack/opm-base-image.sh and hack/olm-util-image.sh; offline once the base and the
# binaries are cached.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=${CONTAINER_TOOL:-$(command -v podman || command -v docker || true)}
NAME=$1 DOCKERFILE=$2
shift 2
log() { echo "[tool-image $NAME] $*" >&2; }
die() { log "$*"; exit 1; }

[ -n "$TOOL" ] || die "needs podman or docker"
BASE=$("$HERE/base-image.sh")
KEY=$({ sha256sum "${BASH_SOURCE[0]}" "$DOCKERFILE" "$@" | cut -c1-64
        "$TOOL" image inspect --format '{{.Id}}' "$BASE"; } | sha256sum | cut -c1-12)
REF=localhost/eso-$NAME:$KEY

if ! "$TOOL" image inspect "$REF" >/dev/null 2>&1; then
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  cp "$@" "$context/"
  "$TOOL" build --quiet --network=none --build-arg "BASE_IMAGE=$BASE" \
    -f "$DOCKERFILE" -t "$REF" "$context" >/dev/null
  log "built $REF from $BASE"
fi
echo "$REF"
