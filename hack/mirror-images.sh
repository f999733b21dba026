#!/usr/bin/env bash
# Mirrors a catalog image and everything it installs to another registry, for a disconnected
# cluster (docs/olm.md, "Mirroring for a disconnected cluster"):
#
#   hack/mirror-images.sh SOURCE_CATALOG@sha256:... MIRROR_REGISTRY[/PREFIX]
#
# prints the mirrored references, one `NAME REFERENCE` a line: each related image by its
# relatedImages name (external-secrets-operator, external-secrets, bitwarden-sdk-server),
# then `bundle` and `catalog`. Give the cluster's CatalogSource the `catalog` one.
#
#   1. what the catalog installs, as the pinned opm renders it: its bundles and each bundle's
#      relatedImages (the operator image and the operand's images). Every one must be named
#      by digest (hack/publish-images.sh builds such a catalog; a bundle that names a tag
#      cannot be mirrored faithfully, and the script refuses it);
#   2. the operator and operand images are copied by digest with skopeo (`copy --all
#      --preserve-digests`: every architecture of a manifest list, the same digests), each to
#      MIRROR/<its repository path without the registry>@<the same digest>;
#   3. each bundle image is unpacked, every reference in its manifests (the CSV's Deployment,
#      RELATED_IMAGE_* variables, containerImage, relatedImages) rewritten to the mirror's,
#      rebuilt with the same labels (FROM scratch, --network=none, reproducible) and pushed to
#      MIRROR/<its repository path>:mirror-<12 hex of its source digest>: a new digest;
#   4. the catalog is re-rendered with those bundles (opm render of each mirrored bundle, the
#      package and channel entries of the source), checked to name nothing outside the
#      mirror, validated, built with hack/catalog.Dockerfile on OPM_BASE and pushed like a
#      bundle.
#
# Registries on loopback (127.0.0.0/8, localhost, [::1]) are reached over plain HTTP, as
# devcluster/registry.py serves them; others over verified HTTPS (skopeo's and podman's
# credentials and certificates: `skopeo login`, /etc/containers/certs.d). Run where both
# registries are reachable; for the loopback registries of the tests, inside the test's
# network namespace (hack/netns-run.sh).
#
#   OPM_BASE   the catalog image's base: opm serving /configs (default: hack/opm-base-image.sh,
#              the stand-in for upstream's quay.io/operator-framework/opm, itself mirrored on
#              a real disconnected network)
#   PY         the Python with PyYAML (default: .venv/bin/python)
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
PY=${PY:-$REPO/.venv/bin/python}
log() { echo "[mirror] $*" >&2; }
die() { log "$*"; exit 1; }

[ "$#" -eq 2 ] || die "usage: $0 SOURCE_CATALOG@sha256:... MIRROR_REGISTRY[/PREFIX]"
CATALOG=$1 MIRROR=${2%/}
[[ "$CATALOG" == *@sha256:* ]] || die "name the catalog by digest, not $CATALOG"
for tool in skopeo podman; do
  command -v "$tool" >/dev/null || die "needs $tool (apt-get install $tool)"
done
OPM=$(bash hack/build-tool.sh opm)/opm
start=$SECONDS

on_loopback() {
  local host=${1%%/*}
  case "$host" in 127.*|localhost|localhost:*|\[::1\]*) return 0 ;; *) return 1 ;; esac
}
# skopeo's --src-tls-verify / --dest-tls-verify (`tls src REF`), podman's --tls-verify (`tls ""
# REF`), opm's --use-http (`http REF`).
tls() {
  local flag=--${1:+$1-}tls-verify
  if on_loopback "$2"; then echo "$flag=false"; else echo "$flag=true"; fi
}
http() { if on_loopback "$1"; then echo --use-http; fi; }

work=$(mktemp -d)
built=()
cleanup() {
  rm -rf "$work"
  for tag in "${built[@]}"; do podman rmi "$tag" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT

# The Python steps, one program: `plan`, `target`, `unpack`, `rewrite`, `catalog`.
cat >"$work/mirror.py" <<'EOF'
import base64, json, re, sys, tarfile
from pathlib import Path

DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")

def documents(text):
    """The JSON documents of `opm render -o json` (a stream, not an array)."""
    decoder, found, at = json.JSONDecoder(), [], 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return found
        document, at = decoder.raw_decode(text, at)
        found.append(document)

def mirrored(reference, mirror):
    """MIRROR/<path>@<digest>: the reference's repository path without its registry."""
    name, digest = reference.split("@", 1)
    first, _, rest = name.partition("/")
    registry = rest and ("." in first or ":" in first or first == "localhost")
    return f"{mirror}/{rest if registry else name}@{digest}"

def target(reference, mirror):
    print(mirrored(reference, mirror))

def rewrite_text(text, mapping):
    for old, new in mapping.items():
        text = text.replace(old, new)
    return text

def plan(rendered, mirror):
    """Lines `image NAME SOURCE TARGET` and `bundle NAME SOURCE TARGET_REPOSITORY:TAG`."""
    bundles = [d for d in documents(Path(rendered).read_text()) if d.get("schema") == "olm.bundle"]
    if not bundles:
        sys.exit("the catalog has no bundle")
    images = {}
    for bundle in bundles:
        for related in bundle.get("relatedImages") or []:
            if related["image"] != bundle["image"] and (related.get("name") or
                                                         related["image"] not in images):
                images[related["image"]] = related.get("name") or "image"
    for reference in [b["image"] for b in bundles] + list(images):
        if not DIGEST.search(reference):
            sys.exit(f"{reference} is not named by digest: it cannot be mirrored as it is "
                     "(build the bundle with its images by digest: hack/publish-images.sh)")
    for reference, name in images.items():
        print("image", name, reference, mirrored(reference, mirror))
    for bundle in bundles:
        target = mirrored(bundle["image"], mirror)
        repository, digest = target.split("@sha256:")
        print("bundle", bundle["name"], bundle["image"], f"{repository}:mirror-{digest[:12]}")

def unpack(image_dir, root):
    """The layers of an image copied with `skopeo copy dir:`, in order, into `root`; its labels
    as Containerfile `LABEL` lines."""
    image_dir, root = Path(image_dir), Path(root)
    manifest = json.loads((image_dir / "manifest.json").read_text())
    for layer in manifest["layers"]:
        blob = image_dir / layer["digest"].split(":", 1)[1]
        with tarfile.open(blob) as archive:  # gzip or plain tar; whiteouts: none in a bundle
            archive.extractall(root, filter="data")
    config = json.loads((image_dir / manifest["config"]["digest"].split(":", 1)[1]).read_text())
    for key, value in sorted(((config.get("config") or {}).get("Labels") or {}).items()):
        print(f"LABEL {key}={json.dumps(value)}")

def rewrite(root, mapping_file):
    """Every file under `root`, each source reference replaced by its mirror's."""
    mapping = json.loads(Path(mapping_file).read_text())
    for path in sorted(Path(root).rglob("*")):
        if path.is_file():
            text = path.read_text()
            if any(old in text for old in mapping):
                path.write_text(rewrite_text(text, mapping))
                print(f"rewrote {path.relative_to(root)}", file=sys.stderr)

def catalog(rendered, mapping_file, configs, mirror, *bundle_renders):
    """The source catalog with its bundles replaced by the mirrored bundles' renders, one
    `catalog.json` per package; fails on any image outside the mirror."""
    mapping = json.loads(Path(mapping_file).read_text())
    fresh = {d["name"]: d for path in bundle_renders
             for d in documents(Path(path).read_text()) if d.get("schema") == "olm.bundle"}
    packages = {}
    for document in documents(Path(rendered).read_text()):
        if document.get("schema") == "olm.bundle":
            document = fresh[document["name"]]
        package = document["name"] if document.get("schema") == "olm.package" else document["package"]
        packages.setdefault(package, []).append(document)
    text = {}
    for package, found in packages.items():
        text[package] = "".join(json.dumps(d) + "\n" for d in found)
        for property in (p for d in found for p in d.get("properties") or []):
            if property["type"] == "olm.bundle.object":  # base64 manifests: look inside too
                decoded = base64.b64decode(property["value"]["data"]).decode()
                if any(old in decoded for old in mapping):
                    sys.exit(f"package {package}: a bundle object still names a source image")
        left = [old for old in mapping if old in text[package]]
        if left:
            sys.exit(f"package {package} still names {left}")
        for d in found:
            if d.get("schema") != "olm.bundle":
                continue
            for reference in [d["image"]] + [r["image"] for r in d.get("relatedImages") or []]:
                if not reference.startswith(f"{mirror}/") or not DIGEST.search(reference):
                    sys.exit(f"bundle {d['name']} names {reference}, not the mirror's by digest")
    for package, content in text.items():
        (Path(configs) / package).mkdir(parents=True)
        (Path(configs) / package / "catalog.json").write_text(content)

globals()[sys.argv[1]](*sys.argv[2:])
EOF
py() { "$PY" "$work/mirror.py" "$@"; }

# 1. What the catalog installs.
log "rendering $CATALOG"
"$OPM" render "$CATALOG" $(http "$CATALOG") -o json >"$work/source.json"
py plan "$work/source.json" "$MIRROR" >"$work/plan"

# 2. The operator and operand images, by digest.
declare -A mapping=()
out=()
while read -r kind name source target <&3; do
  [ "$kind" = image ] || continue
  skopeo copy --quiet --all --preserve-digests --retry-times=2 $(tls src "$source") \
    $(tls dest "$target") "docker://$source" "docker://$target" >&2
  mapping[$source]=$target
  out+=("$name $target")
  log "$name: $source -> $target"
done 3<"$work/plan"

# 3. The bundles, rewritten to name the mirror.
mapping_json() {
  for source in "${!mapping[@]}"; do printf '%s\t%s\n' "$source" "${mapping[$source]}"; done |
    "$PY" -c 'import json, sys; print(json.dumps(dict(l.rstrip("\n").split("\t") for l in sys.stdin)))'
}
mapping_json >"$work/images.json"
renders=()
n=0
while read -r kind name source target <&3; do
  [ "$kind" = bundle ] || continue
  n=$((n + 1))
  dir=$work/bundle-$n
  mkdir -p "$dir/root"
  skopeo copy --quiet --retry-times=2 $(tls src "$source") "docker://$source" "dir:$dir/image" >&2
  { echo "FROM scratch"; py unpack "$dir/image" "$dir/root"
    printf '%s\n' "COPY manifests /manifests/" "COPY metadata /metadata/"; } >"$dir/Containerfile"
  [ -d "$dir/root/manifests" ] && [ -d "$dir/root/metadata" ] || die "$source: no bundle image"
  py rewrite "$dir/root" "$work/images.json"
  tag=localhost/eso-mirror-bundle:$n-$$
  built+=("$tag")
  podman build --quiet --network=none --layers=false --timestamp=315532800 \
    -f "$dir/Containerfile" -t "$tag" "$dir/root" >/dev/null
  podman push --quiet "$(tls "" "$target")" --digestfile "$dir/digest" "$tag" "$target" >&2
  mirrored=${target%:*}@$(cat "$dir/digest")
  mapping[$source]=$mirrored
  "$OPM" render "$mirrored" $(http "$mirrored") --migrate-level=bundle-object-to-csv-metadata \
    -o json >"$dir/render.json"
  renders+=("$dir/render.json")
  out+=("bundle $mirrored")
  log "bundle $name: $source -> $mirrored"
done 3<"$work/plan"

# 4. The catalog, naming the mirrored bundles.
mapping_json >"$work/images.json"
mkdir "$work/catalog"
py catalog "$work/source.json" "$work/images.json" "$work/catalog/configs" "$MIRROR" "${renders[@]}"
"$OPM" validate "$work/catalog/configs"
base=${OPM_BASE:-$(bash hack/opm-base-image.sh)}
tag=localhost/eso-mirror-catalog:$$
built+=("$tag")
podman build --quiet --network=none --layers=false --timestamp=315532800 \
  --build-arg "BASE_IMAGE=$base" -f hack/catalog.Dockerfile -t "$tag" "$work/catalog" >/dev/null
catalog_target=$(py target "$CATALOG" "$MIRROR")
catalog_repository=${catalog_target%@*}
digest=${CATALOG#*@sha256:}
podman push --quiet "$(tls "" "$catalog_repository")" --digestfile "$work/digest" \
  "$tag" "$catalog_repository:mirror-${digest:0:12}" >&2
out+=("catalog $catalog_repository@$(cat "$work/digest")")
log "catalog: $CATALOG -> $catalog_repository@$(cat "$work/digest") ($((SECONDS - start)) s)"

printf '%s\n' "${out[@]}"
