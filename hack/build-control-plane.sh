#!/usr/bin/env bash
# Builds the Kubernetes binaries of the local cluster (kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl) and etcd from the published Go modules, once per machine and
# version, into a cache outside the repository.
#
#   hack/build-control-plane.sh          build (or reuse) and print the bin directory
#
# KUBE_VERSION selects the k8s.io/kubernetes release; KUBE_BINS_CACHE the cache root.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
KUBE_VERSION=${KUBE_VERSION:-$("$HERE/version.sh" KUBE_VERSION)}
CACHE_ROOT=${KUBE_BINS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/kube-bins}
BIN_DIR="$CACHE_ROOT/$KUBE_VERSION/bin"

log() { echo "[build-control-plane] $*" >&2; }

COMMANDS=(kube-apiserver kube-controller-manager kube-scheduler kubectl)

cached_version_ok() {
  local command
  for command in "${COMMANDS[@]}" etcd; do [ -x "$BIN_DIR/$command" ] || return 1; done
  "$BIN_DIR/kube-apiserver" --version 2>/dev/null | grep -qx "Kubernetes $KUBE_VERSION"
}

# One build at a time per machine: concurrent callers wait, then reuse the result.
mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.lock"
flock 9

if cached_version_ok; then
  log "reusing $BIN_DIR ($KUBE_VERSION)"
  echo "$BIN_DIR"
  exit 0
fi

command -v go >/dev/null || { log "go is required"; exit 1; }
minor=${KUBE_VERSION#v1.}; minor=${minor%%.*}
staging="v0.${KUBE_VERSION#v1.}"
work="$CACHE_ROOT/$KUBE_VERSION/module"
rm -rf "$work"; mkdir -p "$work/etcd" "$BIN_DIR"
cp "$HERE/kube-bins/etcd/main.go" "$work/etcd/main.go"
cp "$HERE/kube-bins/tools.go" "$work/tools.go"
start=$(date +%s)

log "resolving k8s.io/kubernetes@$KUBE_VERSION"
gomod=$(cd "$work" && GOFLAGS=-mod=mod go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')
# The go and godebug lines of the wrapper follow the kubernetes module's own.
go_line=$(grep -m1 '^go ' "$gomod")
godebug_line=$(grep -m1 '^godebug ' "$gomod" || true)

{
  echo "module example.invalid/kube-bins"
  echo
  echo "$go_line"
  [ -n "$godebug_line" ] && echo "$godebug_line"
  echo
  echo "require k8s.io/kubernetes $KUBE_VERSION"
  echo
  # Every staging module that kubernetes requires at the placeholder v0.0.0
  # is redirected to its published release of the same minor.
  grep -E '^\s*k8s\.io/[^ ]+ v0\.0\.0(\s|$)' "$gomod" | awk '{print $1}' | sort -u |
    while read -r mod; do echo "replace $mod => $mod $staging"; done
} >"$work/go.mod"
log "$(grep -c '^replace' "$work/go.mod") staging modules replaced at $staging"

cd "$work"
GOFLAGS=-mod=mod go mod tidy >&2
ldflags="-s -w -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
ldflags+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
log "building ${COMMANDS[*]} and etcd (a cold build takes many minutes)"
CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$BIN_DIR/" \
  "${COMMANDS[@]/#/k8s.io/kubernetes/cmd/}"
CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$BIN_DIR/etcd" ./etcd
log "built in $(( $(date +%s) - start ))s: $("$BIN_DIR/kube-apiserver" --version)"
cached_version_ok || { log "built binaries do not report $KUBE_VERSION"; exit 1; }
echo "$BIN_DIR"
