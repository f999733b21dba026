#!/usr/bin/env bash
# The simulated cluster for people, in a named loopback-only network namespace.
#
#   hack/local-cluster.sh up        build (once) and start it: control plane, controllers,
#                                   kwok nodes, the pod runner, and every CRD the operator needs
#   hack/local-cluster.sh up --olm  the same with OLM instead of the CRDs (OLM installs them
#                                   from the bundle; docs/olm.md)
#   hack/local-cluster.sh up --olm --images
#                                   the same, OLM installing from images as on a cluster: a
#                                   registry at 127.0.0.1:5000 in the namespace (storage
#                                   ~/.cache/eso-operator/registry; `down` stops it), the
#                                   images of hack/publish-images.sh pushed to it (the
#                                   operator image of `make image` first), OLM running its
#                                   util and opm images, the CatalogSource naming the catalog
#                                   image; the operator, bundle and catalog images run with
#                                   podman. Then apply only the Namespace, OperatorGroup and
#                                   Subscription (docs/olm.md)
#   hack/local-cluster.sh up --openshift
#                                   the same, serving OpenShift's config API too (APIServer
#                                   and Proxy, with their `cluster` objects); with --olm too,
#                                   before OLM starts, so that OLM injects the cluster proxy
#   hack/local-cluster.sh up --olm --olm-interval 15s
#                                   olm-operator's wake-up interval (default 5m): how soon
#                                   it applies a change of the cluster proxy
#   hack/local-cluster.sh catalog RELEASE...
#                                   (with --olm) serve OLM a catalog of these releases, oldest
#                                   first: `previous` (the previous release, checked out into
#                                   the state directory), `current` (this work tree), or the
#                                   path of a source tree; it replaces the catalog served
#   hack/local-cluster.sh env       print the KUBECONFIG export
#   hack/local-cluster.sh exec CMD  run CMD inside the namespace (kubectl, the operator, ...)
#   hack/local-cluster.sh down      stop it and remove the namespace
#
# ESO_NETNS names the namespace (default eso-local); each name has its own state.
# Only processes inside the namespace reach the API server; that is the point:
# nothing the API server dials can leave the machine.
set -euo pipefail
NETNS=${ESO_NETNS:-eso-local}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
BIN_DIR=$(bash "$ROOT/hack/build-control-plane.sh" 2>/dev/null)
# Everything that needs the Go module proxy happens here, before entering the namespace.
bash "$ROOT/hack/build-tool.sh" kwok >/dev/null
bash "$ROOT/hack/build-tool.sh" external-secrets >/dev/null
bash "$ROOT/hack/build-tool.sh" bitwarden-sdk-server >/dev/null
bash "$ROOT/hack/fetch-crds.sh" >/dev/null
if [ "${1:-}" = up ] && [[ " ${*:2} " == *" --olm "* ]]; then
  bash "$ROOT/hack/build-tool.sh" olm >/dev/null
  bash "$ROOT/hack/build-tool.sh" opm >/dev/null
fi
if [ "${1:-}" = up ] && [[ " ${*:2} " == *" --images "* ]]; then
  # The tool images hack/publish-images.sh pushes (built once per change of their inputs).
  bash "$ROOT/hack/opm-base-image.sh" >/dev/null
  bash "$ROOT/hack/olm-util-image.sh" >/dev/null
  bash "$ROOT/hack/operand-image.sh" external-secrets >/dev/null
  bash "$ROOT/hack/operand-image.sh" bitwarden-sdk-server >/dev/null
fi
STATE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/local-cluster/$NETNS
PREVIOUS=$STATE_DIR/previous  # the previous release's worktree, for `catalog previous`

# nsenter, not `ip netns exec`: that one mounts a fresh /sys, without the cgroup mounts the
# container runtime needs (podman: "runc create failed: no cgroup mount found in mountinfo").
in_ns() { nsenter --net="/run/netns/$NETNS" -- env PATH="$BIN_DIR:$PATH" PYTHONPATH="$ROOT" "$@"; }

case "${1:-}" in
  up)
    ip netns list | grep -qw "$NETNS" || ip netns add "$NETNS"
    ip netns exec "$NETNS" ip link set lo up
    KUBE_BINS_DIR=$BIN_DIR in_ns "$PY" -m devcluster up --dir "$STATE_DIR" "${@:2}"
    echo "use it with: $0 exec kubectl get ns   (kubectl: $BIN_DIR/kubectl)"
    ;;
  catalog)
    shift
    sources=()
    for release in "$@"; do
      case "$release" in
        previous)
          [ -d "$PREVIOUS" ] || bash "$ROOT/hack/upgrade-test.sh" checkout "$PREVIOUS" >/dev/null
          sources+=("$PREVIOUS") ;;
        current) sources+=("$ROOT") ;;
        *) sources+=("$(cd "$release" && pwd)") ;;
      esac
    done
    in_ns "$PY" -m devcluster catalog --dir "$STATE_DIR" "${sources[@]}"
    ;;
  env) PYTHONPATH="$ROOT" "$PY" -m devcluster env --dir "$STATE_DIR" ;;
  exec)
    shift
    # The operator's metrics on loopback only (the pods' relays hold <podIP>:8080 here), in
    # plain HTTP unless METRICS_SECURE=true.
    METRICS_ADDR=${METRICS_ADDR:-127.0.0.1:8080} METRICS_SECURE=${METRICS_SECURE:-false} \
    KUBECONFIG=$(PYTHONPATH="$ROOT" "$PY" -m devcluster env --dir "$STATE_DIR" | sed 's/^export KUBECONFIG=//') \
      in_ns "$@"
    ;;
  down)
    [ ! -d "$PREVIOUS" ] || bash "$ROOT/hack/upgrade-test.sh" remove "$PREVIOUS"
    if ip netns list | grep -qw "$NETNS"; then
      in_ns "$PY" -m devcluster down --dir "$STATE_DIR"
      ip netns del "$NETNS"
    else
      PYTHONPATH="$ROOT" "$PY" -m devcluster down --dir "$STATE_DIR"
    fi
    ;;
  *) echo "usage: $0 up [--olm [--images]] [--openshift] [--olm-interval D]|catalog RELEASE...|env|exec CMD...|down" >&2; exit 2 ;;
esac
