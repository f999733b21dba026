#!/usr/bin/env bash
# End-to-end on a real cluster, for machines with Docker: creates a kind cluster,
# optionally installs cert-manager, builds the operator image and loads it into the
# cluster, installs the operator the way the bundle does (CRDs, Namespace, RBAC,
# Deployment), and runs tests/e2e against it with USE_EXISTING_CLUSTER=1.
#
#   hack/kind-e2e.sh                   everything, then delete the cluster
#
# Environment:
#   KIND_CLUSTER_NAME      cluster name (default eso-e2e); an existing one is reused
#   KEEP_CLUSTER=1         keep the cluster afterwards (for debugging)
#   INSTALL_CERT_MANAGER=1 install cert-manager (CERT_MANAGER_VERSION from manager/versions.py)
#   CERT_MANAGER_MANIFEST  where its release manifest is (default: the project's release page)
#   IMG                    image tag to build and load (default localhost/external-secrets-operator:e2e)
#   PYTEST_ARGS            extra pytest arguments
#
# Exits 1 with a message saying what is missing when Docker, kind or kubectl is absent.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
CLUSTER=${KIND_CLUSTER_NAME:-eso-e2e}
IMG=${IMG:-localhost/external-secrets-operator:e2e}
CERT_MANAGER_VERSION=${CERT_MANAGER_VERSION:-$("$HERE/version.sh" CERT_MANAGER_VERSION)}
CERT_MANAGER_MANIFEST=${CERT_MANAGER_MANIFEST:-https://github.com/cert-manager/cert-manager/releases/download/$CERT_MANAGER_VERSION/cert-manager.yaml}
OPERATOR_NAMESPACE=external-secrets-operator
DEPLOYMENT=external-secrets-operator-controller-manager
PYTHON=${PYTHON:-$REPO/.venv/bin/python}

log() { echo "[kind-e2e] $*" >&2; }
missing() { log "$1"; log "hack/kind-e2e.sh needs Docker, kind and kubectl; without Docker, run tests/e2e against the local control plane instead (see docs/olm.md)."; exit 1; }

command -v docker >/dev/null || missing "docker is not installed"
docker info >/dev/null 2>&1 || missing "docker is installed but its daemon is not reachable (docker info failed)"
command -v kind >/dev/null || missing "kind is not installed (https://kind.sigs.k8s.io)"
command -v kubectl >/dev/null || missing "kubectl is not installed"

KUBECONFIG_FILE=$(mktemp -t kind-e2e-kubeconfig.XXXXXX)
export KUBECONFIG=$KUBECONFIG_FILE

cleanup() {
  local status=$?
  if [ "$status" -ne 0 ]; then
    log "failed; operator state:"
    kubectl -n "$OPERATOR_NAMESPACE" get pods -o wide >&2 || true
    kubectl -n "$OPERATOR_NAMESPACE" logs "deployment/$DEPLOYMENT" --tail=100 >&2 || true
  fi
  if [ "${KEEP_CLUSTER:-0}" = 1 ]; then
    log "keeping cluster $CLUSTER (kubeconfig: $KUBECONFIG_FILE)"
  else
    kind delete cluster --name "$CLUSTER" >&2 || true
    rm -f "$KUBECONFIG_FILE"
  fi
  exit "$status"
}
trap cleanup EXIT

if kind get clusters 2>/dev/null | grep -qx "$CLUSTER"; then
  log "reusing kind cluster $CLUSTER"
else
  log "creating kind cluster $CLUSTER"
  kind create cluster --name "$CLUSTER" --wait 120s >&2
fi
kind get kubeconfig --name "$CLUSTER" >"$KUBECONFIG_FILE"

if [ "${INSTALL_CERT_MANAGER:-0}" = 1 ]; then
  log "installing cert-manager $CERT_MANAGER_VERSION"
  kubectl apply --server-side -f "$CERT_MANAGER_MANIFEST" >&2
  kubectl -n cert-manager wait --for=condition=Available --timeout=300s deployment --all >&2
fi

log "building $IMG"
docker build -t "$IMG" "$REPO" >&2
kind load docker-image "$IMG" --name "$CLUSTER" >&2

log "installing the CRDs (ours and the operand's, as the bundle ships them)"
crd_cache=$("$HERE/fetch-crds.sh")
kubectl apply --server-side -f "$REPO/manifests/crds/" >&2
kubectl apply --server-side -f "$crd_cache/external-secrets/" >&2
kubectl wait --for=condition=Established --timeout=120s customresourcedefinitions --all >&2

log "installing the operator"
for manifest in namespace serviceaccount rbac; do
  kubectl apply --server-side -f "$REPO/manifests/operator/$manifest.yaml" >&2
done
# The Deployment as committed, with the image just built.
"$PYTHON" - "$REPO/manifests/operator/deployment.yaml" "$IMG" <<'PY' | kubectl apply --server-side -f - >&2
import json, sys, yaml
deployment = yaml.safe_load(open(sys.argv[1]))
deployment["spec"]["template"]["spec"]["containers"][0]["image"] = sys.argv[2]
print(json.dumps(deployment))
PY
kubectl -n "$OPERATOR_NAMESPACE" rollout status "deployment/$DEPLOYMENT" --timeout=180s >&2

log "running tests/e2e"
# shellcheck disable=SC2086  # PYTEST_ARGS is a list of words on purpose
USE_EXISTING_CLUSTER=1 KUBECTL=$(command -v kubectl) "$PYTHON" -m pytest "$REPO/tests/e2e" ${PYTEST_ARGS:-}
