#!/usr/bin/env bash
# Validates the OLM bundle with the operator-framework's own validators: the default
# bundle suites (CSV, CRDs, bundle) that `operator-sdk bundle validate` runs, plus the
# OperatorHub, standard capabilities/categories, good-practices, deprecated-API and
# object suites, and a check of metadata/annotations.yaml.
#
#   hack/validate-bundle.sh [FLAGS...] [BUNDLE_DIR]     (default BUNDLE_DIR: bundle/)
#   hack/validate-bundle.sh --build                     only build (needs the Go module
#                                                       proxy the first time), print the binary
#
# FLAGS go to the validator (see hack/olm-validate/main.go): -strict, -suites=a,b,
# -k8s-version=1.34 (default: the minor of KUBE_VERSION). Warnings listed, with the reason,
# in hack/olm-validate/accepted-warnings.txt are reported but do not fail -strict. The validator is built once
# per machine from the published github.com/operator-framework/api module at
# OPERATOR_FRAMEWORK_API_VERSION (manager/versions.py), into a cache outside the
# repository (OLM_VALIDATE_CACHE), keyed by that version and the wrapper's source.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
API_VERSION=${OPERATOR_FRAMEWORK_API_VERSION:-$("$HERE/version.sh" OPERATOR_FRAMEWORK_API_VERSION)}
KUBE_VERSION=${KUBE_VERSION:-$("$HERE/version.sh" KUBE_VERSION)}
SOURCE="$HERE/olm-validate/main.go"
ACCEPTED="$HERE/olm-validate/accepted-warnings.txt"
source_hash=$(sha256sum "$SOURCE" | cut -c1-12)
CACHE_ROOT=${OLM_VALIDATE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/olm-validate}
BUILD_DIR="$CACHE_ROOT/$API_VERSION-$source_hash"
BIN="$BUILD_DIR/bin/olm-validate"

log() { echo "[validate-bundle] $*" >&2; }

build() {
  command -v go >/dev/null || { log "go is required to build the validator"; exit 1; }
  local work="$BUILD_DIR/module" gomod go_line
  rm -rf "$work"; mkdir -p "$work" "$BUILD_DIR/bin"
  cp "$SOURCE" "$work/main.go"
  log "building the validator from github.com/operator-framework/api@$API_VERSION"
  gomod=$(cd "$work" && go mod download -json "github.com/operator-framework/api@$API_VERSION" |
    python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error")))')
  # The wrapper needs the Go release the library itself declares.
  go_line=$(grep -m1 '^go ' "$gomod")
  printf 'module example.invalid/olm-validate\n\n%s\n\nrequire github.com/operator-framework/api %s\n' \
    "$go_line" "$API_VERSION" >"$work/go.mod"
  (cd "$work" && go mod tidy >&2 && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN" .)
  # Builds of earlier wrapper sources are of no further use.
  find "$CACHE_ROOT" -mindepth 1 -maxdepth 1 -type d ! -name "$(basename "$BUILD_DIR")" \
    -exec rm -rf {} +
}

mkdir -p "$CACHE_ROOT"
{
  flock 9
  [ -x "$BIN" ] || build
} 9>"$CACHE_ROOT/.lock"

if [ "${1:-}" = --build ]; then
  echo "$BIN"
  exit 0
fi

flags=() dir=""
for arg in "$@"; do
  case "$arg" in
    -*) flags+=("$arg") ;;
    *) dir=$arg ;;
  esac
done
dir=${dir:-$REPO/bundle}
k8s_minor=${KUBE_VERSION#v}; k8s_minor=${k8s_minor%.*}
exec "$BIN" -k8s-version="$k8s_minor" -accepted="$ACCEPTED" "${flags[@]}" "$dir"
