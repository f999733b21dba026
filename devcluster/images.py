"""Which images the simulated cluster can run, and how: the image itself, or a local command.

An image is found by its full reference first (`repository:tag` or `@digest`: two versions
of one image can run different code), else by its repository (registry and path, without
tag or digest). The map is a JSON file that the runner reads again whenever it changes.

What runs from a real image (`pulled()`: podman pulls the pod's reference from a registry
and runs it, devcluster/containers.py):
- the operator image, when a test publishes it to a registry on loopback and its catalog's
  bundle names it by digest (tests/olm/test_install_image.py, test_catalog_image.py,
  catalog.Release.pulled);
- the catalog image, when a test pushes it there and the CatalogSource names it by digest
  (`spec.image`): OLM's registry pod, opm serving inside it, its exec probes run in the
  container (tests/olm/test_catalog_image.py, olm.publish_image);
- in that test, the unpack Job's images too: the bundle image, pushed and named by digest
  in the catalog (catalog.Release.pushed_bundle), and OLM's util (cpb) and opm images that
  the catalog operator is started with (cluster.SimulatedCluster.olm_images).
- all seven (operator, external-secrets, bitwarden-sdk-server, bundle, catalog, OLM's util
  and opm), as hack/publish-images.sh pushes them, on a cluster started with `python -m
  devcluster up --olm --images` (published.py), and in tests/olm/test_mirror.py from a
  mirror: the operand's pods then run from its images, by digest.

What runs as a local command standing in for an image the cluster cannot have:
- the operand's images (ghcr.io/external-secrets/external-secrets and bitwarden-sdk-server):
  the binaries of the releases the operator ships, built from their source trees
  (hack/build-tool.sh), run as their images' entrypoints and users would;
- in the other OLM tests, OLM's util and opm images (olm.py): OLM's cpb and opm binaries;
  the catalog is no image at all but a local `opm serve` at the CatalogSource's address;
- each bundle image there (catalog.py): a copy of the bundle's directory, not unpacked from
  the image;
- the operator image in every other OLM test (catalog.py, `operator_image()`): `python -m
  manager` from the release's source tree, with the release's virtualenv.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from devcluster.pods import ImageEntry
from manager.paths import REPO_ROOT

OPERAND_REPOSITORY = "ghcr.io/external-secrets/external-secrets"
# The operand image: ENTRYPOINT ["/bin/external-secrets"], USER 65534 (its Dockerfile).
OPERAND_ENTRYPOINT = ("/bin/external-secrets",)
NOBODY = 65534
BITWARDEN_REPOSITORY = "ghcr.io/external-secrets/bitwarden-sdk-server"
# bitwarden-sdk-server's image (distroless nonroot): ENTRYPOINT ["/bitwarden-sdk-server",
# "serve"], user 65532, its SDK state in /state (BW_SECRETS_MANAGER_STATE_PATH).
BITWARDEN_ENTRYPOINT = ("/bitwarden-sdk-server", "serve")
BITWARDEN_USER = 65532
BITWARDEN_ENV = (("BW_SECRETS_MANAGER_STATE_PATH", "/state"),)
# The operator image (Dockerfile): ENTRYPOINT ["/opt/operator/bin/python", "-m", "manager"],
# USER 1001, and the package installed in that virtualenv. Here the package is a source tree,
# mounted at /opt/app-root/src, and the Python environment is the one running this code
# (tests/images runs the real image).
OPERATOR_ENTRYPOINT = ("/opt/operator/bin/python", "-m", "manager")
OPERATOR_USER = 1001
OPERATOR_SOURCE = "/opt/app-root/src"
OPERATOR_PYTHON = "/opt/app-root/venv"

ImageMap = dict[str, ImageEntry]
FILE = "images.json"  # the map, in the cluster's directory


def path(state_dir: Path) -> Path:
    """The map of the cluster whose directory is `state_dir`."""
    return state_dir / FILE


def repository(image: str) -> str:
    """`registry/path` of an image reference, without `@digest` and `:tag`."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)[-1]
    return name[: len(name) - len(last)] + last.split(":", 1)[0]


def find(images: ImageMap, image: str) -> ImageEntry | None:
    """The entry for `image`: by its full reference, else by its repository."""
    return images.get(image) or images.get(repository(image))


def default_images(operand_binary: Path, bitwarden_binary: Path) -> ImageMap:
    return {OPERAND_REPOSITORY: ImageEntry(OPERAND_ENTRYPOINT, (str(operand_binary),), NOBODY),
            BITWARDEN_REPOSITORY: ImageEntry(BITWARDEN_ENTRYPOINT,
                                             (str(bitwarden_binary), "serve"),
                                             BITWARDEN_USER, BITWARDEN_ENV)}


def release_venv(source: Path) -> Path:
    """The virtualenv that the release in `source` runs with: this environment for the
    current tree, the previous release's own for any other (hack/upgrade-test.sh venv:
    created when `make prereqs` runs, where PyPI is reachable)."""
    if source.resolve() == REPO_ROOT.resolve():
        return Path(sys.prefix)
    found = subprocess.run(["bash", str(REPO_ROOT / "hack" / "upgrade-test.sh"), "venv"],
                           capture_output=True, text=True, check=False, timeout=600)
    if found.returncode != 0:
        raise RuntimeError(f"the previous release's virtualenv: {found.stderr.strip()}")
    return Path(found.stdout.strip())


def operator_image(source: Path, venv: Path | None = None) -> ImageEntry:
    """The operator image of the release whose source tree is `source`, run with `venv`
    (default: `release_venv(source)`)."""
    # The release's virtualenv, and the interpreter it links to, at its own path (it may
    # live where /tmp hides it).
    venv, interpreter = venv or release_venv(source), sys.base_prefix
    return ImageEntry(OPERATOR_ENTRYPOINT, (f"{OPERATOR_PYTHON}/bin/python", "-m", "manager"),
                      OPERATOR_USER,
                      env=(("PYTHONPATH", OPERATOR_SOURCE), ("PYTHONDONTWRITEBYTECODE", "1"),
                           ("PYTHONUNBUFFERED", "1")),
                      files=((str(venv), OPERATOR_PYTHON), (str(source), OPERATOR_SOURCE),
                             (interpreter, interpreter)))


def pulled(user: int = OPERATOR_USER) -> ImageEntry:
    """An image that runs as itself: pulled by the pod's reference and run with podman
    (containers.py); `user` is its USER, for the runAsNonRoot check."""
    return ImageEntry((), (), user, runtime="podman")


def save(images: ImageMap, path: Path) -> None:
    document = {name: {"entrypoint": list(e.entrypoint), "local": list(e.local),
                       "user": e.user, "env": dict(e.env), "files": dict(e.files),
                       "runtime": e.runtime}
                for name, e in images.items()}
    partial = path.with_name(f".{path.name}.tmp")
    partial.write_text(json.dumps(document, indent=1))
    partial.replace(path)  # the runner never reads half a map


def load(path: Path) -> ImageMap:
    return {name: ImageEntry(tuple(e["entrypoint"]), tuple(e["local"]), int(e["user"]),
                             tuple((e.get("env") or {}).items()),
                             tuple((e.get("files") or {}).items()),
                             e.get("runtime", "local"))
            for name, e in json.loads(path.read_text()).items()}


def add(path: Path, images: ImageMap) -> None:
    """Add entries to the map of a running cluster (its runner picks them up)."""
    save({**load(path), **images}, path)
