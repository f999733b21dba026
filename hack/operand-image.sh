#!/usr/bin/env bash
# Builds one of the operand's images from the binary of the release the operator ships and
# prints its reference, localhost/eso-operand-NAME:<key> (`make operand-images` builds both):
#
#   hack/operand-image.sh external-secrets       /bin/external-secrets, USER 65534
#   hack/operand-image.sh bitwarden-sdk-server   /bitwarden-sdk-server serve, USER 65532,
#                                                /state, BW_SECRETS_MANAGER_STATE_PATH=/state
#
# The binaries are hack/build-tool.sh's (built from the release source trees, pinned in
# manager/versions.py); the recipe is hack/operand-image.Dockerfile: a distroless-like root
# made from the Debian stand-in base (hack/base-image.sh: the libraries the binary links and
# the CA bundle), built with `--network=none`. Upstream's images come from registries not
# reachable here; these stand in for them, laid out the same (entrypoint, user, state
# directory), and are what hack/publish-images.sh pushes and the bundle's CSV names by digest.
#
# Built once per change of its inputs: the key hashes this script, the Dockerfile, the binary
# and the base image's ID, and the build is skipped while the container store has the key's
# tag. Images are reproducible (`--timestamp`): the same inputs give the same image ID, so the
# same digest when pushed. An earlier key's image of the same NAME is removed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TOOL=${CONTAINER_TOOL:-$(command -v podman || command -v docker || true)}
NAME=${1:-}
log() { echo "[operand-image $NAME] $*" >&2; }
die() { log "$*"; exit 1; }

case "$NAME" in
  external-secrets)
    VERSION=$("$HERE/version.sh" EXTERNAL_SECRETS_VERSION)
    BINARY_PATH=/bin/external-secrets STATE_DIR= ;;
  bitwarden-sdk-server)
    VERSION=$("$HERE/version.sh" BITWARDEN_SDK_SERVER_VERSION)
    BINARY_PATH=/bitwarden-sdk-server STATE_DIR=/state ;;
  *) die "usage: $0 external-secrets|bitwarden-sdk-server" ;;
esac
[ -n "$TOOL" ] || die "needs podman or docker"
DOCKERFILE=$HERE/operand-image.Dockerfile
BINARY=$(bash "$HERE/build-tool.sh" "$NAME")/$NAME
[ -x "$BINARY" ] || die "no binary $BINARY"
BASE=$("$HERE/base-image.sh")
KEY=$({ echo "$NAME $VERSION"
        sha256sum "${BASH_SOURCE[0]}" "$DOCKERFILE" "$BINARY" | cut -c1-64
        "$TOOL" image inspect --format '{{.Id}}' "$BASE"; } | sha256sum | cut -c1-12)
REPOSITORY=localhost/eso-operand-$NAME
REF=$REPOSITORY:$KEY

if ! "$TOOL" image inspect "$REF" >/dev/null 2>&1; then
  start=$SECONDS
  context=$(mktemp -d)
  trap 'rm -rf "$context"' EXIT
  cp "$BINARY" "$context/binary"
  # No layer cache (--layers=false): nothing but the image is left behind, and a build
  # happens only when an input changed anyway.
  "$TOOL" build --quiet --network=none --layers=false --timestamp=315532800 --target "$NAME" \
    --build-arg "BASE_IMAGE=$BASE" --build-arg "BINARY_PATH=$BINARY_PATH" \
    --build-arg "STATE_DIR=$STATE_DIR" --build-arg "VERSION=$VERSION" \
    -f "$DOCKERFILE" -t "$REF" "$context" >/dev/null
  # Earlier keys' images of this NAME (kept if a container still uses one).
  for old in $("$TOOL" images --format '{{.Repository}}:{{.Tag}}' "$REPOSITORY"); do
    [ "$old" = "$REF" ] || "$TOOL" rmi "$old" >/dev/null 2>&1 || true
  done
  size=$("$TOOL" image inspect --format '{{.Size}}' "$REF")
  log "built $REF ($NAME $VERSION) in $((SECONDS - start)) s: $((size / 1000000)) MB"
fi
echo "$REF"
