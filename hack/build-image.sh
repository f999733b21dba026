#!/usr/bin/env bash
# Builds the operator image (`make image`) with podman or docker and prints its reference,
# ID and size. The build itself needs no network (`--network=none`): the wheels are made here,
# outside it, and only they and hack/gather are the build context.
#
#   IMG=ref            the tag (default: the Makefile's IMG)
#   BASE_IMAGE=local   the stand-in base from Debian packages (hack/base-image.sh), the default
#   BASE_IMAGE=ref     any other base, e.g. the Dockerfile's production default
#                      registry.access.redhat.com/ubi9/python-311 (pulled by the tool)
#   CONTAINER_TOOL     podman or docker (default: whichever is installed, podman first)
#   SOURCE=dir         the source tree whose package the image holds (default: this one), e.g.
#                      an earlier release's (hack/upgrade-test.sh image): this tree's recipe
#                      (Dockerfile, this script, the base) applied to that tree's package; a
#                      tree without hack/gather gets a /usr/bin/gather that says so and fails
#   VENV=dir           the virtualenv whose versions the wheels take (default: .venv)
#
# Wheels: the dependencies as manylinux wheels for CPython 3.11 (any glibc base from 2.17 to
# 2.34 runs them: UBI 9 has 2.34, Debian 12 2.36), at the versions installed in VENV, the
# ones the tests ran with (pip freeze as constraints); without it, the newest that
# pyproject.toml allows. They are cached under ~/.cache/eso-operator/wheels, keyed by those
# inputs, with the build backend, so a rebuild with the same inputs needs no network.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
SOURCE=$(cd "${SOURCE:-$REPO}" && pwd)
VENV=${VENV:-$REPO/.venv}
cd "$SOURCE"
CACHE=${WHEELS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/wheels}
TOOL=${CONTAINER_TOOL:-$(command -v podman || command -v docker || true)}
VERSION=$(sed -nE 's/^__version__ = "(.*)"/\1/p' manager/__init__.py)
IMG=${IMG:-quay.io/external-secrets-operator/external-secrets-operator:v$VERSION}
BASE_IMAGE=${BASE_IMAGE:-local}
PY=${PY:-$REPO/.venv/bin/python}
[ -x "$PY" ] || PY=python3
log() { echo "[image] $*" >&2; }
die() { log "$*"; exit 1; }

[ -n "$TOOL" ] || die "needs podman or docker"
export CONTAINER_TOOL=$TOOL
start=$SECONDS

# The runtime dependencies as pyproject.toml lists them, and the build backend's.
requirements=$("$PY" - <<'EOF'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))
print("\n".join(project["project"]["dependencies"] + project["build-system"]["requires"]))
EOF
)
constraints=""
if [ -x "$VENV/bin/python" ]; then
  constraints=$("$VENV/bin/python" -m pip freeze --exclude-editable 2>/dev/null |
                grep -E '^[A-Za-z0-9_.-]+==' || true)
fi
arch=$(uname -m)
platforms=(--platform "manylinux_2_34_$arch" --platform "manylinux_2_28_$arch"
           --platform "manylinux2014_$arch")
key=$(printf '%s\n--\n%s\n--\n%s\n' "$requirements" "$constraints" "${platforms[*]}" |
      sha256sum | cut -c1-12)
wheels=$CACHE/$key
if [ ! -d "$wheels" ]; then
  log "downloading wheels into $wheels"
  mkdir -p "$CACHE"
  rm -rf "$wheels.partial" && mkdir "$wheels.partial"
  printf '%s\n' "$requirements" >"$wheels.partial/requirements.txt"
  printf '%s\n' "$constraints" >"$wheels.partial/constraints.txt"
  "$PY" -m pip download --quiet --only-binary=:all: --python-version 3.11 \
    --implementation cp --abi cp311 "${platforms[@]}" --dest "$wheels.partial" \
    -r "$wheels.partial/requirements.txt" -c "$wheels.partial/constraints.txt"
  mv "$wheels.partial" "$wheels"  # complete or absent
fi

# The build context: the wheels (the operator's own one built from this tree, offline, its
# build backend from the cache) and hack/gather.
context=$(mktemp -d)
trap 'rm -rf "$context"' EXIT
mkdir "$context/wheels" "$context/hack"
cp "$wheels"/*.whl "$context/wheels/"
# Fixed zip timestamps: the same tree gives the same wheel, so an unchanged tree reuses
# every cached layer.
SOURCE_DATE_EPOCH=315532800 "$PY" -m pip wheel --quiet --no-deps --no-index --find-links "$wheels" \
  --wheel-dir "$context/wheels" "$SOURCE" >&2
rm -rf "$SOURCE/build"  # setuptools' scratch directory
if [ -f hack/gather ]; then
  cp hack/gather "$context/hack/gather"
else
  printf '#!/bin/sh\necho "this release (%s) has no must-gather" >&2\nexit 1\n' "$VERSION" \
    >"$context/hack/gather"
fi
find "$context" -exec touch -h -d @315532800 {} +  # the layer cache compares times too

if [ "$BASE_IMAGE" = local ]; then
  BASE_IMAGE=$("$REPO/hack/base-image.sh")
fi
log "building $IMG from $BASE_IMAGE with $(basename "$TOOL")"
build_start=$SECONDS
previous=$("$TOOL" image inspect --format '{{.Id}}' "$IMG" 2>/dev/null || true)
build=("$TOOL" build --network=none --build-arg "BASE_IMAGE=$BASE_IMAGE"
       --build-arg "VERSION=$VERSION" -f "$REPO/Dockerfile")
# The install stage under a tag of its own: the layer cache of the next build (one per
# source tree's version, so building another release keeps this tree's).
cache_tag=cache
[ "$SOURCE" = "$REPO" ] || cache_tag=cache-v$VERSION
"${build[@]}" --target install -t "localhost/eso-operator-install:$cache_tag" "$context" >&2
"${build[@]}" -t "$IMG" "$context" >&2
# What earlier builds left behind: the image the tag named before, and install stages no
# tag names any more (only ours carry the stage label).
current=$("$TOOL" image inspect --format '{{.Id}}' "$IMG")
if [ -n "$previous" ] && [ "$previous" != "$current" ]; then
  "$TOOL" rmi "$previous" >/dev/null 2>&1 || true  # still tagged or used elsewhere: kept
fi
"$TOOL" image prune --force --filter label=io.external-secrets-operator.stage=install \
  >/dev/null 2>&1 || true
"$TOOL" image inspect --format "{{.Id}} {{.Size}}" "$IMG" | {
  read -r id size
  log "built in $((SECONDS - build_start)) s ($((SECONDS - start)) s in all)"
  echo "$IMG id=$id size=$((size / 1000000))MB"
}
