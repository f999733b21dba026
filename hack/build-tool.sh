#!/usr/bin/env bash
# Builds one development tool from its published Go module, once per machine and pinned
# version, into a cache outside the repository, and prints the directory of its binaries.
#
#   hack/build-tool.sh kwok               kwok (the simulated nodes and pods)
#   hack/build-tool.sh external-secrets   the operand's binary, at the version that ships
#   hack/build-tool.sh bitwarden-sdk-server  the bitwarden-sdk-server that ships (cgo)
#   hack/build-tool.sh cert-manager       cert-manager's controller, webhook and cainjector
#   hack/build-tool.sh olm                OLM's olm-operator, catalog-operator and the copy
#                                         tool of its unpack Job, plus OLM's CRDs (crds/)
#   hack/build-tool.sh opm                opm (catalogs: render, validate, serve; bundle extract)
#   hack/build-tool.sh promtool           Prometheus' promtool (check and test alerting rules)
#   hack/build-tool.sh grpc-health-probe  grpc_health_probe (the catalog image's exec probes)
#
# Pins come from manager/versions.py. Two ways to build:
# - from a published module: the wrapper module requires the tool's module and copies every
#   replace directive of the tool's own go.mod that points at a published module (local-path
#   replaces cannot be honoured outside the tool's repository); then `go build` builds the
#   unmodified upstream main packages from the module cache;
# - from a release's source tree (SOURCE=1: the releases whose go.mod replaces modules by
#   local path): UPSTREAM_SRC/NAME-VERSION.tar.gz (default: ../shared/upstream-src from the
#   project's root), checked against the digest pinned in hack/upstream-sources.txt before it
#   is unpacked; each main package is built in its own directory of the tree (cert-manager's
#   commands are nested modules), dependencies from the Go module proxy.
# TOOLS_CACHE selects the cache root. A cached directory is complete or absent.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE_ROOT=${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/tools}
pin() { "$HERE/version.sh" "$1"; }
log() { echo "[build-tool] $*" >&2; }
die() { log "$*"; exit 1; }

# Each recipe sets MODULE, VERSION, PACKAGES (main packages: "import-path[=binary-name]"),
# and optionally CGO (0/1), TAGS, LDFLAGS and DIRS (directories of the module copied next to
# bin/: "module-path=name").
recipe() {
  CGO=0 TAGS="" LDFLAGS="-s -w" DIRS=() SOURCE=0 EXTLDFLAGS=""
  case "$1" in
    kwok)
      MODULE=sigs.k8s.io/kwok VERSION=$(pin KWOK_VERSION)
      PACKAGES=(sigs.k8s.io/kwok/cmd/kwok) ;;
    external-secrets)
      # The providers the tests use (pkg/register/*.go: one build tag each).
      MODULE=github.com/external-secrets/external-secrets VERSION=$(pin EXTERNAL_SECRETS_VERSION)
      SOURCE=1 PACKAGES=(".=external-secrets") TAGS=fake,kubernetes,webhook,aws,bitwarden ;;
    bitwarden-sdk-server)
      # cgo: github.com/bitwarden/sdk-go ships libbitwarden_c.a, which needs libm at link time.
      MODULE=github.com/external-secrets/bitwarden-sdk-server
      VERSION=$(pin BITWARDEN_SDK_SERVER_VERSION)
      SOURCE=1 PACKAGES=(".=bitwarden-sdk-server") CGO=1 EXTLDFLAGS=-lm ;;
    cert-manager)
      # Its commands are nested modules that replace the root module by local path.
      MODULE=github.com/cert-manager/cert-manager VERSION=$(pin CERT_MANAGER_VERSION)
      SOURCE=1 PACKAGES=("cmd/controller=cert-manager-controller"
                         "cmd/webhook=cert-manager-webhook"
                         "cmd/cainjector=cert-manager-cainjector")
      LDFLAGS+=" -X $MODULE/pkg/util.AppVersion=$VERSION" ;;
    olm)
      # Tags as OLM's Makefile builds them; the CRDs are the chart's (the quickstart's set
      # lacks OLMConfig).
      MODULE=github.com/operator-framework/operator-lifecycle-manager VERSION=$(pin OLM_VERSION)
      PACKAGES=("$MODULE/cmd/olm=olm" "$MODULE/cmd/catalog=catalog" "$MODULE/util/cpb=cpb")
      TAGS=json1 DIRS=("deploy/chart/crds=crds")
      LDFLAGS+=" -X $MODULE/pkg/version.OLMVersion=${VERSION#v}" ;;
    opm)
      # sqlite needs cgo; the openpgp tag avoids gpgme (as operator-registry's Makefile).
      MODULE=github.com/operator-framework/operator-registry VERSION=$(pin OPM_VERSION)
      PACKAGES=("$MODULE/cmd/opm=opm") CGO=1 TAGS=json1,containers_image_openpgp ;;
    grpc-health-probe)
      # OLM's registry pods probe `grpc_health_probe -addr=:50051` (the opm base image has it).
      MODULE=github.com/grpc-ecosystem/grpc-health-probe VERSION=$(pin GRPC_HEALTH_PROBE_VERSION)
      PACKAGES=("$MODULE=grpc_health_probe") ;;
    promtool)
      # The root module of Prometheus holds cmd/promtool; its module version v0.X.Y is
      # Prometheus 3.X.Y.
      MODULE=github.com/prometheus/prometheus VERSION=$(pin PROMETHEUS_VERSION)
      PACKAGES=("$MODULE/cmd/promtool")
      LDFLAGS+=" -X github.com/prometheus/common/version.Version=$VERSION" ;;
    *) die "unknown tool $1 (kwok, external-secrets, bitwarden-sdk-server, cert-manager, olm,"\
         "opm, promtool, grpc-health-probe)" ;;
  esac
}

[ "$#" -eq 1 ] || die "usage: $0 TOOL"
NAME=$1
recipe "$NAME"
OUT="$CACHE_ROOT/$NAME/$VERSION"

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.lock-$NAME"
flock 9
if [ -f "$OUT/.complete" ]; then
  echo "$OUT/bin"
  exit 0
fi
command -v go >/dev/null || die "go is required to build $NAME"

work="$CACHE_ROOT/$NAME/.build-$VERSION"
rm -rf "$work" "$OUT"; mkdir -p "$work" "$OUT/bin"
# Whatever ends the build, a cache entry without .complete does not stay for a later run.
trap 'cd / && rm -rf "$work"; [ -f "$OUT/.complete" ] || rm -rf "$OUT"' EXIT
start=$(date +%s)
[ -n "$EXTLDFLAGS" ] && LDFLAGS+=" -extldflags=$EXTLDFLAGS"

if [ "$SOURCE" = 1 ]; then
  # The verified tree (hack/upstream-tree.sh), copied: `go build -mod=mod` may touch go.sum.
  source_tree=$(bash "$HERE/upstream-tree.sh" "$NAME" "$VERSION")
  commit=$(cat "$source_tree/.commit")
  tree="$work/$NAME-$VERSION"
  cp -R "$source_tree" "$tree"
  for package in "${PACKAGES[@]}"; do
    dir=${package%%=*} binary=${package#*=}
    log "building $binary from $NAME $VERSION's $dir (a cold build takes minutes)"
    (cd "$tree/$dir" && GOFLAGS=-mod=mod CGO_ENABLED=$CGO go build -trimpath \
      ${TAGS:+-tags "$TAGS"} -ldflags "$LDFLAGS" -o "$OUT/bin/$binary" .)
  done
  for dir in "${DIRS[@]}"; do cp -R "$tree/${dir%%=*}" "$OUT/${dir#*=}"; done
  echo "$commit" >"$OUT/commit"
  touch "$OUT/.complete"
  cd / && rm -rf "$work"
  log "built $NAME $VERSION in $(( $(date +%s) - start ))s"
  echo "$OUT/bin"
  exit 0
fi

log "resolving $MODULE@$VERSION"
gomod=$(cd "$work" && go mod download -json "$MODULE@$VERSION" |
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("GoMod") or sys.exit(d.get("Error")))')
{
  echo "module example.invalid/$NAME-build"
  echo
  grep -m1 '^go ' "$gomod"
  echo
  echo "require $MODULE $VERSION"
  echo
  # "replace a => b v" lines, single or inside a replace ( ... ) block; skip "=> ./local".
  awk '/^replace \($/ {block=1; next} block && /^\)/ {block=0; next}
       block {print "replace " $0; next} /^replace / {print}' "$gomod" |
    awk '{ for (i = 1; i <= NF; i++) if ($i == "=>") target = $(i + 1);
           if (target !~ /^\.\.?\//) print }' | sed -E 's/^replace[[:space:]]+/replace /'
} >"$work/go.mod"
{
  echo "//go:build tools"
  echo
  echo "package tools"
  echo
  echo "import ("
  for package in "${PACKAGES[@]}"; do echo "	_ \"${package%%=*}\""; done
  echo ")"
} >"$work/tools.go"
log "$(grep -c '^replace' "$work/go.mod" || true) replace directive(s) copied from $MODULE's go.mod"

cd "$work"
GOFLAGS=-mod=mod go mod tidy >&2
for package in "${PACKAGES[@]}"; do
  path=${package%%=*} binary=${package#*=}
  [ "$binary" = "$package" ] && binary=$(basename "$path")
  log "building $binary from $path (a cold build takes minutes)"
  CGO_ENABLED=$CGO go build -trimpath ${TAGS:+-tags "$TAGS"} -ldflags "$LDFLAGS" \
    -o "$OUT/bin/$binary" "$path"
done
for dir in "${DIRS[@]}"; do
  source_dir=$(go list -m -f '{{.Dir}}' "$MODULE")/${dir%%=*}
  [ -d "$source_dir" ] || die "$MODULE@$VERSION has no ${dir%%=*}"
  cp -R "$source_dir" "$OUT/${dir#*=}" && chmod -R u+w "$OUT/${dir#*=}"
done
touch "$OUT/.complete"
cd / && rm -rf "$work"
log "built $NAME $VERSION in $(( $(date +%s) - start ))s"
echo "$OUT/bin"
