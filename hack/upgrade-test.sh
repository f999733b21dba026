#!/usr/bin/env bash
# Upgrade from the previous release of this operator to the current code.
#
# The previous release is the newest git tag `v*` that does not point at HEAD; a clone
# without tags uses hack/releases.txt ("<tag> <commit>" lines) instead. It is checked out
# into a temporary git worktree outside the repository and run with a virtualenv of its own
# dependencies (`venv`: they differ between releases; the current code's environment must not
# hold the previous release's client library, which kopf would import). tests/upgrade and
# tests/olm use the building blocks below; `kind` runs the same test on a kind cluster, with
# both releases built as images.
#
#   hack/upgrade-test.sh previous           print "<tag> <commit>" of the previous release
#   hack/upgrade-test.sh checkout DIR       check it out into a new worktree DIR (outside the
#                                           repository); print "<tag> <commit>"
#   hack/upgrade-test.sh remove DIR         remove that worktree again
#   hack/upgrade-test.sh venv               print the path of the previous release's virtualenv,
#                                           created on first use (needs PyPI), then cached; and
#                                           fetch the CRDs at its pins (Go module proxy)
#   hack/upgrade-test.sh image              print the reference of the previous release's
#                                           operator image (podman or docker), built on first
#                                           use (needs PyPI), then kept in the image store
#   hack/upgrade-test.sh install-crds SRC   apply the operator CRDs of source tree SRC
#   hack/upgrade-test.sh deploy SRC IMAGE   install or replace the operator in a cluster from
#                                           SRC's manifests (CRDs too), with image IMAGE
#   hack/upgrade-test.sh local [ARGS]       the upgrade test on the local control plane
#                                           (pytest tests/upgrade in hack/netns-run.sh)
#   hack/upgrade-test.sh kind [ARGS]        the upgrade test on a kind cluster (needs Docker)
#
# Environment: KUBECTL (default: kubectl) and KUBECONFIG for install-crds and deploy;
# UPGRADE_FROM=<tag or commit> overrides the choice of the previous release;
# kind: KIND_CLUSTER_NAME (default eso-upgrade), KEEP_CLUSTER=1, PYTHON.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(cd "$HERE/.." && pwd)
RELEASES=$HERE/releases.txt
KUBECTL=${KUBECTL:-kubectl}
PYTHON=${PYTHON:-$REPO/.venv/bin/python}
OPERATOR_NAMESPACE=external-secrets-operator
DEPLOYMENT=external-secrets-operator-controller-manager

log() { echo "[upgrade-test] $*" >&2; }
die() { log "$*"; exit 1; }
git_() { git -C "$REPO" "$@"; }

# The lines of hack/releases.txt: "<tag> <commit>", comments and blank lines dropped.
listed_releases() {
  local tag commit rest
  [ -f "$RELEASES" ] || return 0
  while read -r tag commit rest; do
    case "$tag" in ''|'#'*) continue ;; esac
    [[ $tag == v* && $commit =~ ^[0-9a-f]{40}$ && -z $rest ]] \
      || die "hack/releases.txt: \"$tag $commit $rest\": each line must be \"<tag v...> <full commit sha>\""
    echo "$tag $commit"
  done <"$RELEASES"
}

# "<tag> <commit>" of every known release, newest first: the git tags, and the releases of
# hack/releases.txt whose tag this clone lacks.
releases() {
  local listed tag commit
  listed=$(listed_releases)
  {
    while read -r tag; do
      [ -n "$tag" ] && echo "$tag $(git_ rev-list -n 1 "$tag")"
    done < <(git_ tag --list 'v*')
    while read -r tag commit; do
      [ -n "$tag" ] || continue
      git_ rev-parse -q --verify "refs/tags/$tag" >/dev/null || echo "$tag $commit"
    done <<<"$listed"
  } | sort -k1,1 -V -r
}

previous() {
  local head tag commit
  if [ -n "${UPGRADE_FROM:-}" ]; then
    commit=$(git_ rev-parse -q --verify "$UPGRADE_FROM^{commit}") \
      || die "UPGRADE_FROM=$UPGRADE_FROM is not a commit of this repository"
    echo "$UPGRADE_FROM $commit"
    return
  fi
  head=$(git_ rev-parse HEAD)
  listed_releases >/dev/null  # fail here on a malformed hack/releases.txt
  while read -r tag commit; do
    [ "$commit" = "$head" ] && continue
    git_ cat-file -e "$commit^{commit}" 2>/dev/null \
      || die "release $tag is commit $commit, which this clone does not have; fetch it (git fetch origin $commit, or git fetch --tags) and run again"
    echo "$tag $commit"
    return
  done < <(releases)
  die "no previous release: no tag v* other than one on HEAD, and no other release in hack/releases.txt. Tag the first release (git tag v0.1.0 <commit>) and add the line \"v0.1.0 <commit>\" to hack/releases.txt"
}

checkout() {
  local dir=$1 release
  case "$(cd "$(dirname "$dir")" && pwd)/" in
    "$REPO"/*) die "$dir is inside the repository; choose a directory outside it" ;;
  esac
  [ ! -e "$dir" ] || [ -z "$(ls -A "$dir")" ] || die "$dir exists and is not empty"
  release=$(previous)
  log "checking out ${release% *} (${release#* }) into $dir"
  git_ worktree add --detach --force "$dir" "${release#* }" >&2
  echo "$release"
}

# The previous release's virtualenv, by commit, in the tools cache (as build-tool.sh keeps
# binaries): complete or absent.
venv() {
  local release commit root dir work
  release=$(previous)
  commit=${release#* }
  root=${TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/tools}/release-venv
  dir=$root/$commit
  if [ ! -x "$dir/bin/python" ]; then
    mkdir -p "$root"
    work=$(mktemp -d "$root/.building.XXXXXX")
    log "creating the virtualenv of ${release% *} ($commit) in $dir"
    git_ archive "$commit" pyproject.toml manager README.md | tar -x -C "$work"
    "${PYTHON_BASE:-python3.11}" -m venv "$work/venv" >&2
    "$work/venv/bin/python" -m pip install --quiet "$work" >&2
    # The source comes from the release's checkout on PYTHONPATH; the venv holds its
    # dependencies.
    "$work/venv/bin/python" -m pip uninstall --quiet --yes external-secrets-operator >&2
    rm -rf "$dir"
    mv "$work/venv" "$dir"
    rm -rf "$work"
  fi
  previous_crds "$commit"
  echo "$dir"
}

# The CRDs the previous release's own hack/fetch-crds.sh fetches at its pins (its bundle is
# generated from them in tests/olm): fetched here, where the Go module proxy is reachable,
# into the shared cache that the tests, in their network namespace, then find.
previous_crds() {
  local work
  work=$(mktemp -d)
  git_ archive "$1" hack manager/versions.py | tar -x -C "$work"
  bash "$work/hack/fetch-crds.sh" >/dev/null || { rm -rf "$work"; die "the previous" \
    "release's hack/fetch-crds.sh failed: its CRDs cannot be fetched"; }
  rm -rf "$work"
}

# The previous release's operator image: this tree's recipe (hack/build-image.sh SOURCE=...)
# applied to the release's source, its wheels at the versions of the release's virtualenv.
# Its own Dockerfile cannot build here: it runs pip inside the build, which needs PyPI, on a
# base with pip (UBI's). The tag is keyed by the commit and the recipe, so the image is built
# once per change of either; images of older keys are removed.
image() {
  local release tag commit tool key repository ref work
  release=$(previous)
  tag=${release% *}
  commit=${release#* }
  tool=${CONTAINER_TOOL:-$(command -v podman || command -v docker || true)}
  [ -n "$tool" ] || die "needs podman or docker"
  key=$({ echo "$commit"; cat "$REPO/Dockerfile" "$HERE/build-image.sh" "$HERE/base-image.sh"; } |
        sha256sum | cut -c1-12)
  repository=localhost/external-secrets-operator-previous
  ref=$repository:$tag-$key
  if ! "$tool" image inspect "$ref" >/dev/null 2>&1; then
    work=$(mktemp -d)
    # shellcheck disable=SC2064  # expand now: $work is local
    trap "rm -rf '$work'" EXIT
    git_ archive "$commit" | tar -x -C "$work"
    log "building the operator image of $tag ($commit) as $ref"
    SOURCE=$work VENV=$(venv) IMG=$ref CONTAINER_TOOL=$tool "$HERE/build-image.sh" >&2
    "$tool" images --format '{{.Repository}}:{{.Tag}}' "$repository" | grep -vxF "$ref" |
      xargs -r "$tool" rmi >/dev/null 2>&1 || true
  fi
  echo "$ref"
}

remove() {
  local dir=$1
  git_ worktree remove --force "$dir" 2>/dev/null || rm -rf "$dir"
  git_ worktree prune
}

install_crds() {
  local src=$1
  "$KUBECTL" apply --server-side --force-conflicts --field-manager=upgrade-test \
    -f "$src/manifests/crds/" >&2
  "$KUBECTL" wait --for=condition=Established --timeout=60s \
    customresourcedefinition/externalsecretsconfigs.operator.openshift.io \
    customresourcedefinition/externalsecretsmanagers.operator.openshift.io >&2
}

deploy() {
  local src=$1 image=$2 manifest
  install_crds "$src"
  for manifest in namespace serviceaccount rbac; do
    "$KUBECTL" apply --server-side --force-conflicts --field-manager=upgrade-test \
      -f "$src/manifests/operator/$manifest.yaml" >&2
  done
  "$PYTHON" - "$src/manifests/operator/deployment.yaml" "$image" <<'PY' \
    | "$KUBECTL" apply --server-side --force-conflicts --field-manager=upgrade-test -f - >&2
import json, sys, yaml
deployment = yaml.safe_load(open(sys.argv[1]))
deployment["spec"]["template"]["spec"]["containers"][0]["image"] = sys.argv[2]
print(json.dumps(deployment))
PY
  "$KUBECTL" -n "$OPERATOR_NAMESPACE" rollout status "deployment/$DEPLOYMENT" --timeout=300s >&2
}

run_local() {
  bash "$HERE/build-control-plane.sh" >/dev/null
  "$HERE/fetch-crds.sh" >/dev/null
  exec "$HERE/netns-run.sh" "$REPO/.venv/bin/pytest" "$REPO/tests/upgrade" "$@"
}

run_kind() {
  local cluster=${KIND_CLUSTER_NAME:-eso-upgrade} workdir worktree release kubeconfig crds
  command -v docker >/dev/null || die "docker is not installed; run \`hack/upgrade-test.sh local\` instead"
  docker info >/dev/null 2>&1 || die "docker is installed but its daemon is not reachable (docker info failed)"
  command -v kind >/dev/null || die "kind is not installed (https://kind.sigs.k8s.io)"
  command -v kubectl >/dev/null || die "kubectl is not installed"
  workdir=$(mktemp -d -t eso-upgrade.XXXXXX)
  worktree=$workdir/previous
  kubeconfig=$workdir/kubeconfig
  # shellcheck disable=SC2317  # called by the trap
  cleanup() {
    local status=$?
    remove "$worktree"
    if [ "${KEEP_CLUSTER:-0}" = 1 ]; then
      log "keeping cluster $cluster (kubeconfig: $kubeconfig)"
    else
      kind delete cluster --name "$cluster" >&2 || true
      rm -rf "$workdir"
    fi
    exit "$status"
  }
  trap cleanup EXIT
  release=$(checkout "$worktree")
  if ! kind get clusters 2>/dev/null | grep -qx "$cluster"; then
    kind create cluster --name "$cluster" --wait 120s >&2
  fi
  kind get kubeconfig --name "$cluster" >"$kubeconfig"
  export KUBECONFIG=$kubeconfig KUBECTL=kubectl
  log "building the images of ${release% *} and of the current code"
  docker build -t localhost/external-secrets-operator:previous "$worktree" >&2
  docker build -t localhost/external-secrets-operator:current "$REPO" >&2
  kind load docker-image localhost/external-secrets-operator:previous --name "$cluster" >&2
  kind load docker-image localhost/external-secrets-operator:current --name "$cluster" >&2
  crds=$("$HERE/fetch-crds.sh")
  kubectl apply --server-side -f "$crds/external-secrets/" >&2
  deploy "$worktree" localhost/external-secrets-operator:previous
  USE_EXISTING_CLUSTER=1 UPGRADE_PREVIOUS_SOURCE=$worktree \
    UPGRADE_PREVIOUS_RELEASE=${release% *} \
    UPGRADE_CURRENT_IMAGE=localhost/external-secrets-operator:current \
    "$PYTHON" -m pytest "$REPO/tests/upgrade" "$@"
}

command=${1:-}
shift || true
case "$command" in
  previous) previous ;;
  checkout) [ $# -eq 1 ] || die "usage: $0 checkout DIR"; checkout "$1" ;;
  remove) [ $# -eq 1 ] || die "usage: $0 remove DIR"; remove "$1" ;;
  venv) venv ;;
  image) image ;;
  install-crds) [ $# -eq 1 ] || die "usage: $0 install-crds SRC"; install_crds "$1" ;;
  deploy) [ $# -eq 2 ] || die "usage: $0 deploy SRC IMAGE"; deploy "$1" "$2" ;;
  local) run_local "$@" ;;
  kind) run_kind "$@" ;;
  *) sed -n '2,/^set -euo/p' "$0" | sed '$d' | sed 's/^# \{0,1\}//' >&2; exit 2 ;;
esac
