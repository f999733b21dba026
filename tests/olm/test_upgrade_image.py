"""Upgrade through OLM from the previous release to the current code, everything OLM pulls
coming from images in a registry, as on a cluster; then uninstall.

The previous release (hack/upgrade-test.sh previous) ships its operator image built from its
tag's source: v0.1.0's own Dockerfile cannot build here (it runs pip inside the build, which
needs PyPI, on a base with pip: UBI's; the Debian stand-in, hack/base-image.sh, has none), so
the image is this tree's recipe applied to its source (`hack/upgrade-test.sh image`:
hack/build-image.sh with SOURCE= its tree, its wheels at the versions of its own virtualenv,
`hack/upgrade-test.sh venv`). `make test` and `make test-olm` build it before pytest, outside
the network namespace (`make previous-image`), once per commit and recipe; without it the
test skips, or fails under IMAGE_TESTS=require. v0.1.0 has no must-gather: that image's
/usr/bin/gather says so.

On this module's cluster (test_catalog_image.py's: the unpack Job runs OLM's util and opm
images from the registry), the previous release's operator image, its bundle image and a
catalog image holding only it are pushed by digest; the CatalogSource names that catalog
image (`spec.image`), a Subscription installs the previous CSV, whose pod runs the previous
image (podman inspect, the process's own root holding the previous package), and the
operand is configured and syncs a user's secret. Then the current bundle image (naming the
current operator image, test_install_image.py's `pushed_image`) and a catalog image holding
both releases are pushed, and the CatalogSource's spec.image is switched to the new digest,
as an administrator or a catalog update would. OLM upgrades in place: judged as in
test_upgrade.py (the current CSV `replaces` the previous one, which is deleted, the operator
Deployment updated in place, the operand verdict, the synced Secret never emptied, the ESC
Ready for its generation, 0 Forbidden in the operator log), and the operator's container
is the current image by digest. Last, the uninstall through OLM of test_install.py.

Run with `-s` to see the timeline.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from devcluster import containers
from devcluster.registry import Registry
from manager import __version__
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.olm.conftest import OlmCluster, uninstall_through_olm
from tests.olm.test_catalog_image import (
    CATALOG_SOURCE,
    HACK,
    bundle_image_pushed,
    catalog_image_pushed,
    catalog_image_served,
    olm_cluster,  # noqa: F401 (a fixture)
    olm_images,  # noqa: F401 (a fixture)
    opm_base,  # noqa: F401 (a fixture)
    registry_pod,
    required,
)
from tests.olm.test_install_image import (
    IMAGE_USER,
    assert_own_root,
    assert_restricted,
    operator_container,
    operator_process,
    push,
    pushed_image,  # noqa: F401 (a fixture)
    registry,  # noqa: F401 (a fixture)
)
from tests.olm.test_upgrade import configured, installed, upgraded_and_judged
from tests.waiting import eventually

# The upgrade samples admissions (upgraded_and_judged), and the uninstall needs its release.
pytestmark = pytest.mark.timing
PACKAGE_INIT = "opt/operator/lib/python3.11/site-packages/manager/__init__.py"


@pytest.fixture(scope="module")
def previous_image() -> str:
    """The previous release's operator image, local (hack/upgrade-test.sh image: built by
    `make previous-image`, outside the network namespace; here only found)."""
    made = subprocess.run(["bash", str(HACK / "upgrade-test.sh"), "image"], capture_output=True,
                          text=True, check=False, timeout=900)
    if made.returncode != 0:
        required(f"no image of the previous release (`make previous-image`): "
                 f"{made.stderr.strip()[-2000:]}")
    return made.stdout.strip()


async def operator_runs(cluster: OlmCluster, image: str, version: str) -> None:
    """Until the one operator container runs `image`, pulled by digest into the cluster's
    store, its own root holding the package at `version`, restricted as the pod asks."""
    async def check() -> dict[str, Any]:
        container = operator_container(cluster)
        assert container["ImageName"] == image, container["ImageName"]
        return container

    container = await eventually(check, 30, interval=0.5, what=f"the operator to run {image}")
    pid = operator_process(cluster, container, image).pid
    assert_own_root(pid)
    package = Path(f"/proc/{pid}/root/{PACKAGE_INIT}").read_text()
    assert f'__version__ = "{version}"' in package, package
    assert_restricted(pid, IMAGE_USER)
    print(f"  checked: the operator's container runs {image} (pid {pid}), pulled by digest, "
          f"its root holding manager {version}")


async def test_olm_upgrades_the_previous_release_from_images(
        olm_cluster: OlmCluster, previous_release: tuple[str, Path], *,  # noqa: F811
        registry: Registry, opm_base: str, pushed_image: str,  # noqa: F811
        previous_image: str) -> None:
    cluster = olm_cluster
    tag, previous_source = previous_release
    print(f"\nupgrade through OLM from {tag} ({previous_image}) to the current code, from "
          "images")
    previous_pushed = push(registry, previous_image, "external-secrets-operator", tag)
    cluster.mark("previous operator image pushed")
    cluster.pull_operator_image(previous_source, previous_pushed)
    cluster.pull_operator_image(REPO_ROOT, pushed_image)

    # The previous release, from a catalog image that holds only it.
    await bundle_image_pushed(cluster, registry, previous_source)
    first = await cluster.build_catalog(previous_source)
    first_image = await catalog_image_pushed(cluster, registry, opm_base, first)
    await catalog_image_served(cluster, first, first_image)
    [previous] = first.releases
    assert previous.operator_images == [previous_pushed], previous.operator_images
    await cluster.subscribe(previous)
    cluster.mark("Subscription created")
    await configured(cluster, previous)
    await operator_runs(cluster, previous_pushed, previous.csv["spec"]["version"])

    # A catalog image that adds the current release; the CatalogSource switched to it.
    await bundle_image_pushed(cluster, registry, REPO_ROOT)
    upgrade = await cluster.build_catalog(previous_source, REPO_ROOT)
    upgrade_image = await catalog_image_pushed(cluster, registry, opm_base, upgrade)
    current = await upgraded_and_judged(cluster, previous_release, previous, upgrade,
                                        image=upgrade_image)
    assert current.operator_images == [pushed_image], current.operator_images
    source = await cluster.kube.request("GET", CATALOG_SOURCE)
    assert source["spec"]["image"] == upgrade_image, source["spec"]
    await registry_pod(cluster, upgrade_image)
    await operator_runs(cluster, pushed_image, __version__)
    print(f"  checked: the registry pod runs the new catalog image {upgrade_image}")


async def test_uninstall_through_olm_after_the_upgrade(olm_cluster: OlmCluster) -> None:  # noqa: F811
    cluster = olm_cluster
    current = await installed(cluster, REPO_ROOT)
    await uninstall_through_olm(cluster, current)
    left = [name for name in containers.running(cluster.simulated.workdir)
            if name.startswith(f"k8s_{identity.CONTAINER}_")]
    assert not left, left
    print(f"  checked: no operator container left in the cluster's store\n{cluster.timeline()}")
