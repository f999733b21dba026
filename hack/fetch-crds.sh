#!/usr/bin/env bash
# Fetches the CRDs this project does not own, from the published Go modules of the
# pinned releases (the operand's from its release tree, hack/upstream-tree.sh: the Go module
# proxy does not serve the v2 line), into a cache outside the repository, and prints that
# directory:
#
#   <dir>/external-secrets/*.yaml   the operand's CRDs (external-secrets.io and
#                                   generators.external-secrets.io; the test-only
#                                   `fakes` generator is left out)
#   <dir>/cert-manager/*.yaml       cert-manager's CRDs (Certificate, Issuer, ...)
#   <dir>/prometheus-operator/*.yaml  ServiceMonitor and PrometheusRule (monitoring.coreos.com)
#   <dir>/openshift-config/*.yaml  OpenShift's APIServer and Proxy (config.openshift.io/v1,
#                                   the Default feature set), for the simulated cluster's
#                                   OpenShift mode
#
#   hack/fetch-crds.sh              fetch (or reuse) and print the directory
#
# Versions come from manager/versions.py (EXTERNAL_SECRETS_VERSION, CERT_MANAGER_VERSION,
# PROMETHEUS_OPERATOR_VERSION and OPENSHIFT_API_VERSION; each can be overridden from the
# environment); CRDS_CACHE
# selects the cache root. A cached directory is complete or absent: it is built in
# a temporary directory and renamed into place, under a lock.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
EXTERNAL_SECRETS_VERSION=${EXTERNAL_SECRETS_VERSION:-$("$HERE/version.sh" EXTERNAL_SECRETS_VERSION)}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-$("$HERE/version.sh" CERT_MANAGER_VERSION)}
PROMETHEUS_OPERATOR_VERSION=${PROMETHEUS_OPERATOR_VERSION:-$("$HERE/version.sh" PROMETHEUS_OPERATOR_VERSION)}
OPENSHIFT_API_VERSION=${OPENSHIFT_API_VERSION:-$("$HERE/version.sh" OPENSHIFT_API_VERSION)}
CACHE_ROOT=${CRDS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/crds}
OUT="$CACHE_ROOT/external-secrets-$EXTERNAL_SECRETS_VERSION.cert-manager-$CERT_MANAGER_VERSION"
OUT+=".prometheus-operator-$PROMETHEUS_OPERATOR_VERSION.openshift-api-$OPENSHIFT_API_VERSION"

CM_MODULE=github.com/cert-manager/cert-manager
PO_MODULE=github.com/prometheus-operator/prometheus-operator
OS_MODULE=github.com/openshift/api
# Where each module keeps its plain (not Helm-templated) controller-gen CRDs.
ES_CRD_DIR=config/crds/bases
CM_CRD_DIR=deploy/crds
PO_CRD_DIR=example/prometheus-operator-crd
OS_CRD_DIR=config/v1/zz_generated.crd-manifests
# The two kinds the operator renders; the others (Prometheus, Alertmanager, ...) are not needed.
PO_KEPT=(monitoring.coreos.com_servicemonitors.yaml monitoring.coreos.com_prometheusrules.yaml)
# OpenShift's config API as a cluster of the Default feature set serves it (APIServer has one
# file per feature set; Proxy one for all).
OS_KEPT=(0000_10_config-operator_01_apiservers-Default.crd.yaml 0000_03_config-operator_01_proxies.crd.yaml)
# Generators that exist only for the operand's own tests.
ES_DROPPED=(generators.external-secrets.io_fakes.yaml)

log() { echo "[fetch-crds] $*" >&2; }
die() { log "$*"; exit 1; }

mkdir -p "$CACHE_ROOT"
exec 9>"$CACHE_ROOT/.lock"
flock 9

if [ -f "$OUT/.complete" ]; then
  echo "$OUT"
  exit 0
fi

command -v go >/dev/null || die "go is required to fetch the CRDs from the Go module proxy"

# Prints the extracted directory of MODULE@VERSION in the Go module cache.
module_dir() {
  local json
  # Run outside any go.mod so the download is independent of the caller's directory.
  if ! json=$(cd "$tmp" && go mod download -json "$1@$2"); then
    die "cannot download $1@$2 from the Go module proxy (offline? the first run needs the proxy)"
  fi
  python3 -c 'import json,sys; d=json.load(sys.stdin); print(d.get("Dir") or sys.exit(d.get("Error","no Dir")))' <<<"$json"
}

# Copies every CRD file of SRC into DEST (writable copies; the module cache is read-only),
# skipping kustomization files and the names given after DEST.
copy_crds() {
  local src=$1 dest=$2; shift 2
  local file name skip
  mkdir -p "$dest"
  for file in "$src"/*.yaml; do
    name=$(basename "$file")
    [ "$name" = kustomization.yaml ] && continue
    for skip in "$@"; do [ "$name" = "$skip" ] && continue 2; done
    grep -q '^kind: CustomResourceDefinition$' "$file" || die "$file is not a CustomResourceDefinition"
    if grep -q '{{' "$file"; then die "$file is Helm-templated; expected plain CRDs"; fi
    install -m 0644 "$file" "$dest/$name"
  done
}

tmp=$(mktemp -d "$CACHE_ROOT/.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

log "external-secrets $EXTERNAL_SECRETS_VERSION, cert-manager $CERT_MANAGER_VERSION," \
  "prometheus-operator $PROMETHEUS_OPERATOR_VERSION, openshift/api $OPENSHIFT_API_VERSION"
# The release tree hack/upstream-sources.txt pins (the one hack/build-tool.sh builds).
es_dir=$(bash "$HERE/upstream-tree.sh" external-secrets "$EXTERNAL_SECRETS_VERSION") ||
  die "no release tree of external-secrets $EXTERNAL_SECRETS_VERSION (hack/upstream-tree.sh)"
cm_dir=$(module_dir "$CM_MODULE" "$CERT_MANAGER_VERSION")
po_dir=$(module_dir "$PO_MODULE" "$PROMETHEUS_OPERATOR_VERSION")
os_dir=$(module_dir "$OS_MODULE" "$OPENSHIFT_API_VERSION")
[ -d "$es_dir/$ES_CRD_DIR" ] || die "external-secrets $EXTERNAL_SECRETS_VERSION has no $ES_CRD_DIR"
[ -d "$cm_dir/$CM_CRD_DIR" ] || die "$CM_MODULE@$CERT_MANAGER_VERSION has no $CM_CRD_DIR"

copy_crds "$es_dir/$ES_CRD_DIR" "$tmp/crds/external-secrets" "${ES_DROPPED[@]}"
copy_crds "$cm_dir/$CM_CRD_DIR" "$tmp/crds/cert-manager"
# Copies the files named after DEST (one CRD each) from SRC into DEST; WHAT names the module.
copy_kept() {
  local src=$1 dest=$2 what=$3 name file; shift 3
  mkdir -p "$dest"
  for name in "$@"; do
    file="$src/$name"
    [ -f "$file" ] || die "$what has no $name in $src"
    grep -q '^kind: CustomResourceDefinition$' "$file" || die "$file is not a CustomResourceDefinition"
    install -m 0644 "$file" "$dest/$name"
  done
}
copy_kept "$po_dir/$PO_CRD_DIR" "$tmp/crds/prometheus-operator" \
  "prometheus-operator $PROMETHEUS_OPERATOR_VERSION" "${PO_KEPT[@]}"
copy_kept "$os_dir/$OS_CRD_DIR" "$tmp/crds/openshift-config" "openshift/api $OPENSHIFT_API_VERSION" \
  "${OS_KEPT[@]}"
for kind in certificates issuers clusterissuers; do
  [ -f "$tmp/crds/cert-manager/cert-manager.io_$kind.yaml" ] ||
    die "cert-manager $CERT_MANAGER_VERSION has no $kind CRD in $CM_CRD_DIR"
done

if grep -q '^ *dataTo:$' "$tmp/crds/external-secrets/external-secrets.io_pushsecrets.yaml"; then
  log "PushSecret CRD has spec.dataTo"
else
  log "note: the PushSecret CRD of external-secrets $EXTERNAL_SECRETS_VERSION has no spec.dataTo"
fi
count() { find "$1" -name '*.yaml' | wc -l; }
log "$(count "$tmp/crds/external-secrets") external-secrets CRDs, $(count "$tmp/crds/cert-manager") cert-manager CRDs"

touch "$tmp/crds/.complete"
rm -rf "$OUT"
mv "$tmp/crds" "$OUT"
echo "$OUT"
