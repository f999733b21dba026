"""`python -m devcluster up --olm --images` (hack/local-cluster.sh up --olm --images): the
path of tests/olm/test_catalog_image.py for people at the shell.

`up` starts the cluster, a registry in its network namespace, runs hack/publish-images.sh
against it (the operator image of `make image`, the bundle and catalog images naming it by
digest, OLM's util and opm images), starts OLM with those util and opm images and points the
CatalogSource at the catalog image, then returns. The test is the administrator afterwards:
it applies only the Namespace, OperatorGroup and Subscription of docs/olm.md ("With OLM"),
and OLM installs the operator from its image. It checks the unpack Job ran the published
util, bundle and opm images, the CatalogSource names the catalog digest and its registry pod
runs it, the operator's container runs the pushed operator image by digest, and that `down`
leaves no process in the network namespace: no registry, no container.

Without podman, the image or docker-registry it skips, or fails under IMAGE_TESTS=require.
Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from devcluster import containers, controlplane, published
from devcluster.api import answers_ok
from devcluster.cluster import SimulatedCluster
from devcluster.registry import BINARY
from manager.kube import Kube
from manager.paths import REPO_ROOT
from tests.e2e.operator_process import assert_log_clean
from tests.images.test_operator_image import podman
from tests.olm.conftest import POD_CIDR, OlmCluster
from tests.olm.test_catalog_image import (
    CATALOG_SOURCE,
    registry_container,
    registry_pod,
    required,
    unpacked,
)
from tests.olm.test_install_image import operator_container, operator_process
from tests.waiting import eventually

UP_TIMEOUT = 900  # seconds: the cluster, hack/publish-images.sh, OLM
# `up` prints each published image as `NAME image: REFERENCE` (published.Published.describe).
REFERENCE = re.compile(r"^(\w+) image: (\S+@sha256:[0-9a-f]{64})$", re.M)


def devcluster(*args: str) -> subprocess.CompletedProcess[str]:
    """`python -m devcluster ARGS...` as a person runs it, in this network namespace."""
    return subprocess.run([sys.executable, "-m", "devcluster", *args], cwd=REPO_ROOT,
                          capture_output=True, text=True, check=False, timeout=UP_TIMEOUT)


def others_in_this_network_namespace() -> dict[int, str]:
    """Every other process in this network namespace (hack/netns-run.sh's own), by pid: its
    command line. In a whole test run that includes the session's own cluster, which the
    test leaves out by what ran before `up`."""
    mine, found = os.stat("/proc/self/ns/net").st_ino, {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        with contextlib.suppress(OSError):  # gone meanwhile, or a zombie
            if os.stat(entry / "ns" / "net").st_ino == mine:
                found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(
                    b"\0", b" ").decode(errors="replace")
    return found


async def up(directory: Path, workdir: Path) -> tuple[OlmCluster, dict[str, str]]:
    """`up --olm --images`; the cluster as the administrator sees it, and the published
    images by name."""
    started = time.monotonic()
    # The pods' addresses of this module's clusters: the session's cluster may be running.
    result = await asyncio.to_thread(devcluster, "up", "--olm", "--images", "--dir",
                                     str(directory), "--pod-cidr", POD_CIDR)
    assert result.returncode == 0, result.stderr[-4000:]
    assert result.stdout.strip() == f"export KUBECONFIG={directory / 'kubeconfig'}"
    images = dict(REFERENCE.findall(result.stderr))
    assert list(images) == ["operator", "bundle", "catalog", "util", "opm"], result.stderr
    simulated = SimulatedCluster.attached(directory)
    cluster = OlmCluster(simulated, Kube.connect(simulated.kubeconfig), workdir,
                         {"`up --olm --images` started": started})
    cluster.mark("`up` returned: registry, images published, OLM, CatalogSource")
    return cluster, images


async def subscribed_and_installed(cluster: OlmCluster, images: dict[str, str]) -> None:
    """The administrator's part, then OLM's: the bundle unpacked from its image, the CSV
    Succeeded, the operator's container running the operator image by digest."""
    cluster.pull_operator_image(REPO_ROOT, images["operator"])
    release = await cluster.prepared(REPO_ROOT)  # its package, channel and CSV name
    await cluster.subscribe(release)
    cluster.mark("Namespace, OperatorGroup and Subscription applied")
    job = await eventually(lambda: unpacked(cluster, images["bundle"]), 180, interval=0.5,
                           what="the unpack Job of the bundle image Complete")
    template = job["spec"]["template"]["spec"]
    assert [c["image"] for c in template["initContainers"]] == [images["util"],
                                                               images["bundle"]]
    assert [c["image"] for c in template["containers"]] == [images["opm"]]
    cluster.mark("bundle unpacked from its image")
    csv = await cluster.succeeded(release, timeout=300)
    cluster.mark(f"CSV {release.name} Succeeded")
    deployment = csv["spec"]["install"]["spec"]["deployments"][0]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == \
        images["operator"]
    process = operator_process(cluster, operator_container(cluster), images["operator"])
    # This cluster is no fixture, so no hook reads its operator's log: checked here, after
    # a pass.
    await cluster.operator_passed(release)
    assert_log_clean(cluster.operator_log(release), f"{release.name}'s operator",
                     forbidden=True)
    source = await cluster.kube.request("GET", CATALOG_SOURCE)
    assert source["spec"]["image"] == images["catalog"], source["spec"]
    pod = await registry_pod(cluster, images["catalog"])
    assert registry_container(cluster, pod)["ImageName"] == images["catalog"]
    cluster.mark("checked: operator, catalog and unpack images")
    print(f"\n  checked: the operator (pid {process.pid}) runs {images['operator']}, passed, "
          "and logged no Forbidden, crash or traceback; the CatalogSource and its registry "
          f"pod {images['catalog']}; the unpack Job util, bundle and opm from their images")


async def down_leaves_nothing(cluster: OlmCluster, directory: Path,
                              before: dict[int, str]) -> None:
    """`down` stops the registry with the rest: nothing answers at its address, no process
    of the cluster or container is left in this network namespace (of those that were not
    there `before` it), no container state."""
    assert published.REGISTRY_PROCESS in cluster.simulated.plane.pids
    assert others_in_this_network_namespace().keys() - before.keys(), \
        "the cluster runs nothing here?"
    run_root = containers.run_root(directory)
    assert run_root.exists()
    await cluster.kube.close()
    stopped = await asyncio.to_thread(devcluster, "down", "--dir", str(directory))
    assert stopped.returncode == 0, stopped.stderr
    assert "simulated cluster stopped" in stopped.stderr, stopped.stderr
    cluster.mark("`down` returned")
    assert not answers_ok(f"http://{published.REGISTRY}/v2/")

    async def nothing_left() -> None:
        left = {pid: command for pid, command in others_in_this_network_namespace().items()
                if before.get(pid) != command}
        assert not left, left

    await eventually(nothing_left, 10, what="no process left in the network namespace")
    assert not directory.exists()
    assert not run_root.exists()
    print(f"  checked: after `down` nothing answers at {published.REGISTRY} and no process "
          "(registry, container, cluster) is left in the network namespace")


async def test_administrator_subscribes_and_olm_installs_from_images(olm_workdir: Path,
                                                                      ) -> None:
    podman()  # skips, or fails under IMAGE_TESTS=require, without podman or the image
    if shutil.which(BINARY) is None:
        required(f"{BINARY} is not installed (apt-get install docker-registry)")
    controlplane.require_loopback_only_network()
    directory = olm_workdir / "local-cluster"
    before = others_in_this_network_namespace()
    try:
        cluster, images = await up(directory, olm_workdir)
        await subscribed_and_installed(cluster, images)
        await down_leaves_nothing(cluster, directory, before)
        print(f"\n`up --olm --images`, subscribe, install, `down`:\n{cluster.timeline()}")
    finally:  # `down` again is harmless; after a failure it stops what `up` started
        await asyncio.to_thread(devcluster, "down", "--dir", str(directory))
