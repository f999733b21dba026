#!/usr/bin/env bash
# Pushes the operator image and the operand's images, then builds and pushes the bundle and
# catalog images that name them, each by digest, to a registry on loopback (`make
# push-images`), then OLM's util and opm images its catalog operator unpacks bundles with, and
# prints the seven references (one a line, in that order; sizes on stderr).
#
#   1. the operator image (`make image`, built before: it needs the package index) is pushed
#      to REGISTRY/external-secrets-operator:vVERSION; its digest is D1;
#   2. the operand's images (hack/operand-image.sh: external-secrets and bitwarden-sdk-server
#      from the binaries of the pinned releases, cached by their inputs) are pushed to
#      REGISTRY/external-secrets/external-secrets:VERSION and
#      REGISTRY/external-secrets/bitwarden-sdk-server:VERSION: D2, D3;
#   3. the bundle is regenerated in a copy of this tree (manager/olm's generator, as `python
#      -m manager bundle --image` runs it) with the operator image
#      REGISTRY/external-secrets-operator@D1 and the operand images by D2 and D3: the CSV's
#      Deployment, its RELATED_IMAGE_EXTERNAL_SECRETS and RELATED_IMAGE_BITWARDEN_SDK_SERVER,
#      containerImage and relatedImages name those digests; built from
#      bundle/bundle.Dockerfile and pushed: D4;
#   4. the catalog (one package, one channel, this bundle) is rendered by the pinned opm from
#      REGISTRY/external-secrets-operator-bundle@D4, validated, built with
#      hack/catalog.Dockerfile on the opm base (hack/opm-base-image.sh) and pushed: D5;
#   5. the stand-ins for OLM's util image (hack/olm-util-image.sh: the pinned cpb) and opm
#      image (the opm base) are pushed as operator-framework/olm and operator-framework/opm,
#      tagged with the pinned versions: `python -m devcluster olm --olm-util-image D6
#      --olm-opm-image D7` unpacks bundle images with them, as tests/olm does.
#
# The registry is the one answering at REGISTRY (default 127.0.0.1:5000), else Debian's
# docker-registry (devcluster/registry.py) started for this run only; its storage stays in
# ~/.cache/eso-operator/registry, so a registry started later on it serves the same
# digests. Runs only in a network namespace whose only interface is lo (hack/netns-run.sh
# provides one): no packet leaves loopback. hack/mirror-images.sh copies what a catalog
# names to another registry (docs/olm.md, "Mirroring for a disconnected cluster").
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
REGISTRY=${REGISTRY:-127.0.0.1:5000}
STORAGE=${REGISTRY_STORAGE:-${XDG_CACHE_HOME:-$HOME/.cache}/eso-operator/registry}
VERSION=$(sed -nE 's/^__version__ = "(.*)"/\1/p' manager/__init__.py)
IMG=${IMG:-quay.io/external-secrets-operator/external-secrets-operator:v$VERSION}
PY=${PY:-$REPO/.venv/bin/python}
log() { echo "[publish] $*" >&2; }
die() { log "$*"; exit 1; }

links=$(tail -n +3 /proc/self/net/dev | cut -d: -f1 | tr -d ' ' | tr '\n' ' ')
[ "$links" = "lo " ] || die "run me where lo is the only interface: hack/netns-run.sh $0"
command -v podman >/dev/null || die "needs podman"
command -v docker-registry >/dev/null || die "needs docker-registry (apt-get install docker-registry)"
podman image exists "$IMG" || die "no image $IMG: run \`make image\` first"
OPM=$(bash hack/build-tool.sh opm)/opm

work=$(mktemp -d)
registry_pid=""
cleanup() {
  [ -z "$registry_pid" ] || kill "$registry_pid" 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

# The registry at REGISTRY if one answers there (a test's), else one of our own, on STORAGE.
answers() {
  python3 -c "import urllib.request; urllib.request.urlopen('http://$REGISTRY/v2/', timeout=1)" \
    2>/dev/null
}
if ! answers; then
  PYTHONPATH=$REPO "$PY" -m devcluster.registry "$STORAGE" "$REGISTRY" >"$work/registry.log" 2>&1 &
  registry_pid=$!
  for _ in $(seq 100); do
    answers && break
    kill -0 "$registry_pid" 2>/dev/null || die "the registry exited: $(cat "$work/registry.log")"
    sleep 0.2
  done
fi

# push IMAGE REPOSITORY:TAG: prints REGISTRY/REPOSITORY@DIGEST.
push() {
  podman push --quiet --tls-verify=false --digestfile "$work/digest" "$1" "$REGISTRY/$2" >&2
  echo "$REGISTRY/${2%%:*}@$(cat "$work/digest")"
}
# build TAG ARGS...: podman build, then the image the tag named before is removed if unused.
build() {
  local tag=$1 previous
  shift
  previous=$(podman image inspect --format '{{.Id}}' "$tag" 2>/dev/null || true)
  podman build --quiet --network=none -t "$tag" "$@" >/dev/null
  if [ -n "$previous" ] && [ "$previous" != "$(podman image inspect --format '{{.Id}}' "$tag")" ]; then
    podman rmi "$previous" >/dev/null 2>&1 || true
  fi
}
size() { podman image inspect --format '{{.Size}}' "$1" | awk '{printf "%.1f MB", $1 / 1e6}'; }

operator=$(push "$IMG" "external-secrets-operator:v$VERSION")
log "operator image: $operator ($(size "$IMG"))"

# The operand's images (built once per change of their inputs).
pinned() { PYTHONPATH=$REPO "$PY" -c "from manager import versions; print(versions.$1)"; }
es_tag=$(bash hack/operand-image.sh external-secrets)
external_secrets=$(push "$es_tag" \
  "external-secrets/external-secrets:$(pinned EXTERNAL_SECRETS_VERSION)")
log "external-secrets image: $external_secrets ($(size "$es_tag"))"
bw_tag=$(bash hack/operand-image.sh bitwarden-sdk-server)
bitwarden=$(push "$bw_tag" \
  "external-secrets/bitwarden-sdk-server:$(pinned BITWARDEN_SDK_SERVER_VERSION)")
log "bitwarden-sdk-server image: $bitwarden ($(size "$bw_tag"))"

# The bundle, regenerated in a copy of the tree (uncommitted changes included), naming the
# three images by digest.
mkdir "$work/tree"
git ls-files -z | xargs -0 cp -P --parents -t "$work/tree"
(cd "$work/tree" && PYTHONPATH=$work/tree "$PY" - "$operator" "$external_secrets" \
  "$bitwarden" <<'EOF'
import sys
from pathlib import Path
from manager.olm import bundle, crds
operator, external_secrets, bitwarden = sys.argv[1:]
root = Path.cwd()
files = bundle.generate(bundle.BundleSources(
    root, crds.fetch_operand_crds(root), operator,
    (("external-secrets", external_secrets), ("bitwarden-sdk-server", bitwarden))))
for relative, content in files.all().items():
    (root / relative).parent.mkdir(parents=True, exist_ok=True)
    (root / relative).write_text(content)
EOF
)
bundle_tag=localhost/external-secrets-operator-bundle:v$VERSION
build "$bundle_tag" -f "$work/tree/bundle/bundle.Dockerfile" "$work/tree/bundle"
bundle=$(push "$bundle_tag" "external-secrets-operator-bundle:v$VERSION")
log "bundle image: $bundle ($(size "$bundle_tag"))"

# The catalog: the bundle as opm renders it from the registry, in one channel.
annotations=$work/tree/bundle/metadata/annotations.yaml
package=$(sed -nE 's/.*bundle\.package\.v1: *(.*)/\1/p' "$annotations")
channel=$(sed -nE 's/.*bundle\.channel\.default\.v1: *(.*)/\1/p' "$annotations")
mkdir -p "$work/catalog/configs/$package"
rendered=$("$OPM" render "$bundle" --use-http --migrate-level=bundle-object-to-csv-metadata \
           -o json | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)))')
csv_name=$(printf '%s' "$rendered" | python3 -c 'import json, sys; print(json.load(sys.stdin)["name"])')
{
  printf '{"schema":"olm.package","name":"%s","defaultChannel":"%s"}\n' "$package" "$channel"
  printf '{"schema":"olm.channel","package":"%s","name":"%s","entries":[{"name":"%s"}]}\n' \
    "$package" "$channel" "$csv_name"
  printf '%s\n' "$rendered"
} >"$work/catalog/configs/$package/catalog.json"
"$OPM" validate "$work/catalog/configs"
catalog_tag=localhost/external-secrets-operator-catalog:v$VERSION
opm_base=$(bash hack/opm-base-image.sh)  # the catalog's base, and OLM's opm image below
build "$catalog_tag" --build-arg "BASE_IMAGE=$opm_base" -f hack/catalog.Dockerfile \
  "$work/catalog"
catalog=$(push "$catalog_tag" "external-secrets-operator-catalog:v$VERSION")
log "catalog image: $catalog ($(size "$catalog_tag"))"

# OLM's own images, as the catalog operator of the simulated cluster pulls them.
util_tag=$(bash hack/olm-util-image.sh)
util=$(push "$util_tag" "operator-framework/olm:$(pinned OLM_VERSION)")
log "OLM util image: $util ($(size "$util_tag"))"
opm=$(push "$opm_base" "operator-framework/opm:$(pinned OPM_VERSION)")
log "opm image: $opm ($(size "$opm_base"))"

printf '%s\n' "$operator" "$external_secrets" "$bitwarden" "$bundle" "$catalog" "$util" "$opm"
