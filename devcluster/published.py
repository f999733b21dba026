"""The operator's images as hack/publish-images.sh publishes them, and OLM installing from
them on the simulated cluster (`python -m devcluster up --olm --images`).

`up --olm --images` starts the cluster without OLM, then a registry at REGISTRY inside the
cluster's network namespace (on the storage hack/publish-images.sh uses, so a later run
serves the same digests), as one of the cluster's processes: `down` stops it. The script
pushes the operator image of `make image` and the operand's images (hack/operand-image.sh),
builds and pushes the bundle and catalog images naming them by digest, and OLM's util and
opm images. OLM then starts with those util and opm images, the CatalogSource names the
catalog image, and the pod runner runs every one of them from the registry with podman: the
catalog's registry pod, the bundle's unpack Job, the operator's pod, as in
tests/olm/test_catalog_image.py, and the operand's pods, whose images the operator takes
from the CSV's RELATED_IMAGE_* variables. An administrator only subscribes.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from devcluster import catalog, olm
from devcluster import images as image_map
from devcluster.api import answers_ok
from devcluster.cluster import SimulatedCluster
from devcluster.controlplane import LocalControlPlane
from manager.paths import REPO_ROOT

# hack/publish-images.sh's default REGISTRY: where `make push-images` pushes too.
REGISTRY = "127.0.0.1:5000"
PUBLISH = REPO_ROOT / "hack" / "publish-images.sh"
REGISTRY_PROCESS = "registry"  # its name among the cluster's processes (registry.log)


class PublishError(RuntimeError):
    """The registry did not start, or hack/publish-images.sh failed (its reason)."""


@dataclass(frozen=True)
class Published:
    """The seven references hack/publish-images.sh prints, by digest, in its order."""

    operator: str
    external_secrets: str
    bitwarden_sdk_server: str
    bundle: str
    catalog: str
    util: str
    opm: str

    @classmethod
    def parse(cls, output: str) -> Published:
        references = output.split()
        if len(references) != len(fields(cls)) or not all("@sha256:" in r for r in references):
            raise PublishError(f"{PUBLISH.name} printed no {len(fields(cls))} digests: "
                               f"{output!r}")
        return cls(*references)

    def images(self) -> image_map.ImageMap:
        """The operator, operand and bundle images as the pod runner runs them: pulled by the
        digests that the bundle's CSV and the catalog name (OLM's own: olm.install), each
        with its image's USER (for the runAsNonRoot check)."""
        return {self.operator: image_map.pulled(image_map.OPERATOR_USER),
                self.external_secrets: image_map.pulled(image_map.NOBODY),
                self.bitwarden_sdk_server: image_map.pulled(image_map.BITWARDEN_USER),
                self.bundle: image_map.pulled(catalog.BUNDLE_USER)}

    def describe(self) -> str:
        """One `NAME image: REFERENCE` line each (what `up` prints)."""
        return "\n".join(f"{field.name} image: {reference}"
                         for field, reference in zip(fields(self), astuple(self), strict=True))


def registry_storage() -> Path:
    """Where the registry keeps its blobs: hack/publish-images.sh's STORAGE."""
    override = os.environ.get("REGISTRY_STORAGE")
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return Path(override) if override else cache / "eso-operator" / "registry"


def start_registry(plane: LocalControlPlane, address: str = REGISTRY,
                   timeout: float = 30.0) -> None:
    """A registry at `address` as one of the control plane's processes (`down` stops it);
    return once it answers."""
    url = f"http://{address}/v2/"
    if answers_ok(url):  # another's: its storage and lifetime are not the cluster's
        raise PublishError(f"something already answers at {url}")
    plane.spawn(REGISTRY_PROCESS, [sys.executable, "-m", "devcluster.registry",
                                   str(registry_storage()), address])
    deadline = time.monotonic() + timeout
    while not answers_ok(url):
        if not plane.alive(REGISTRY_PROCESS) or time.monotonic() > deadline:
            log = (plane.workdir / f"{REGISTRY_PROCESS}.log").read_text(errors="replace")
            raise PublishError(f"the registry did not start at {address}: {log[-2000:]}")
        time.sleep(0.1)


def publish(address: str = REGISTRY) -> Published:
    """Run hack/publish-images.sh against the registry at `address`; its references. Its
    progress goes to stderr as it comes; a failure raises with its last line (the reason)."""
    env = {**os.environ, "REGISTRY": address, "PY": sys.executable}
    with subprocess.Popen(["bash", str(PUBLISH)], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, env=env, cwd=REPO_ROOT) as script:
        assert script.stdout is not None
        assert script.stderr is not None
        last = ""
        for line in script.stderr:  # stdout (five lines) cannot fill its pipe meanwhile
            sys.stderr.write(line)
            last = line.strip() or last
        output = script.stdout.read()
    if script.returncode != 0:
        raise PublishError(f"{PUBLISH.name} failed (exit {script.returncode}): {last}")
    return Published.parse(output)


def install_from(cluster: SimulatedCluster, published: Published) -> None:
    """Start OLM with the published util and opm images and point the CatalogSource at the
    catalog image: OLM installs from the images what a Subscription asks for."""
    cluster.olm_images = (published.util, published.opm)
    cluster.start_olm()
    image_map.add(cluster.images_file, published.images())
    olm.publish_image(cluster.api, cluster.workdir, published.catalog)


def serve(cluster: SimulatedCluster) -> Published:
    """On `cluster`, started without OLM: the registry, the published images, OLM
    installing from them."""
    start_registry(cluster.plane)
    published = publish()
    install_from(cluster, published)
    return published
