#!/usr/bin/env bash
# Unpacks one release tree of hack/upstream-sources.txt, once per machine, and prints its
# directory (read-only use: building copies it first):
#
#   hack/upstream-tree.sh external-secrets v2.9.0
#
# The tree is UPSTREAM_SRC/NAME-VERSION.tar.gz (default: ../shared/upstream-src from the
# project's root; a `git archive` of the tag), whose sha256 must be the one
# hack/upstream-sources.txt pins before anything is unpacked. hack/build-tool.sh builds from
# it; hack/fetch-crds.sh takes the operand's CRDs and `python -m manager generate
# --refresh-operand-flags` its flags from it, for the release lines the Go module proxy does
# not serve (external-secrets v2 has no /v2 module path). SOURCES_CACHE selects the cache
# root. A cached tree is complete or absent: unpacked beside it, renamed into place, under a
# lock; a mismatch or a missing tarball ends with one line naming it and leaves nothing.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${SOURCES_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/src}
log() { echo "[upstream-tree] $*" >&2; }
die() { log "$*"; exit 1; }

[ "$#" -eq 2 ] || die "usage: $0 NAME VERSION"
NAME=$1 VERSION=$2
sources=${UPSTREAM_SRC:-$HERE/../../shared/upstream-src}
archive="$sources/$NAME-$VERSION.tar.gz"
pinned() { awk -v n="$NAME" -v v="$VERSION" -v f="$1" '$1 == n && $2 == v {print $f}' \
  "$HERE/upstream-sources.txt"; }
expected=$(pinned 3) commit=$(pinned 4)
[ -n "$expected" ] || die "hack/upstream-sources.txt pins no digest for $NAME $VERSION"
OUT="$CACHE_ROOT/$NAME-$VERSION-${expected:0:12}"

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.lock-$NAME"
flock 9
if [ -f "$OUT/.complete" ]; then
  echo "$OUT"
  exit 0
fi

[ -f "$archive" ] || die "$archive is missing: export the release's tree with" \
  "'git -C <clone of the upstream repository> archive --prefix=$NAME-$VERSION/ -o $archive" \
  "$commit' or point UPSTREAM_SRC at the directory that holds it"
actual=$(sha256sum "$archive" | cut -d' ' -f1)
[ "$actual" = "$expected" ] || die "$archive has sha256 $actual, hack/upstream-sources.txt" \
  "pins $expected: replace the file with the release's tree (commit $commit)"
tmp=$(mktemp -d "$CACHE_ROOT/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
tar -xzf "$archive" -C "$tmp"
[ -f "$tmp/$NAME-$VERSION/go.mod" ] || die "$archive holds no $NAME-$VERSION/go.mod"
echo "$commit" >"$tmp/$NAME-$VERSION/.commit"
touch "$tmp/$NAME-$VERSION/.complete"
rm -rf "$OUT"
mv "$tmp/$NAME-$VERSION" "$OUT"
log "unpacked $archive (sha256 checked) into $OUT"
echo "$OUT"
