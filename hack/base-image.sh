#!/usr/bin/env bash
# Makes the stand-in base image of local and CI builds from Debian packages (no image registry
# is reachable here) and prints its reference, localhost/eso-operator-base:<key>.
#
# The production base is the Dockerfile's default (UBI 9 with Python 3.11); this one holds
# what the Dockerfile needs of a base: python3 (3.11 on bookworm) with venv, the CA bundle and
# the openssl CLI (manager/metrics_endpoint/tls.py makes the self-signed metrics certificate
# with it).
# The root filesystem tarball is cached under ~/.cache/eso-operator/images, keyed by this
# script (suite, packages, options): a changed input makes a new one; `podman import` runs
# only when the container store lacks the key's tag.
set -euo pipefail

SUITE=bookworm
PACKAGES=python3,python3-venv,ca-certificates,openssl
CACHE=${IMAGES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/images}
TOOL=${CONTAINER_TOOL:-$(command -v podman || command -v docker || true)}
log() { echo "[base-image] $*" >&2; }
die() { log "$*"; exit 1; }

[ -n "$TOOL" ] || die "needs podman or docker"
KEY=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
REF=localhost/eso-operator-base:$KEY
TARBALL=$CACHE/base-$KEY.tar

if ! "$TOOL" image inspect "$REF" >/dev/null 2>&1; then
  if [ ! -s "$TARBALL" ]; then
    command -v mmdebstrap >/dev/null || die "needs mmdebstrap (apt-get install mmdebstrap)"
    mkdir -p "$CACHE"
    log "building $TARBALL from Debian $SUITE packages: $PACKAGES"
    start=$SECONDS
    # minbase: essential packages and apt only. No apt lists or docs: the image needs neither.
    mmdebstrap --quiet --format=tar --variant=minbase --include="$PACKAGES" \
      --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/locale/*' \
      --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*' \
      "$SUITE" "$TARBALL.partial" >&2
    mv "$TARBALL.partial" "$TARBALL"  # complete or absent
    log "built in $((SECONDS - start)) s: $(du -h "$TARBALL" | cut -f1)"
  fi
  "$TOOL" import --change 'CMD ["/bin/bash"]' "$TARBALL" "$REF" >/dev/null
fi
echo "$REF"
