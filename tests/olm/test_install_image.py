"""OLM installs the operator image itself, pulled from a registry by digest, as on a cluster.

The operator image (`make image`) is pushed to a registry on loopback (devcluster/registry.py,
as hack/publish-images.sh does); the bundle is generated to name it by digest (`python -m
manager bundle --image REGISTRY/external-secrets-operator@sha256:...`), served in the catalog
as usual, and installed by the real OLM. The operator's pod runs that image with podman
(devcluster/containers.py), pulled into the cluster's own empty container store, in the
pod's network namespace, with the pod's token, volumes and securityContext: the image's
files, a read-only root, the image's non-root user (the pod sets none), no capabilities, no
privilege escalation. The operator then works as from the source tree: it creates the ESM
and the administrator's ESC becomes Ready with the operand running. Deleting the pod stops
its container (SIGTERM: it releases the Lease); stopping the cluster leaves no container.

What still runs from local stand-ins here: the bundle image (a copy of the bundle's
directory), OLM's images, the operand's (devcluster/images.py); the catalog is served by `opm
serve` from its directory, not from the catalog image.

Without podman or the image the test skips, or fails under IMAGE_TESTS=require (.ci/run),
as tests/images does. Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from devcluster import catalog, containers, controlplane
from devcluster.cluster import RunningProcess
from devcluster.registry import Registry
from manager import __version__
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.e2e.operator_process import assert_log_clean, free_port
from tests.images.test_operator_image import IMAGE, podman, root_is_read_only
from tests.olm.conftest import NAMESPACE, OlmCluster
from tests.upgrade.test_upgrade import ESM_PATH
from tests.waiting import eventually

IMAGE_USER = 1001  # the image's USER (Dockerfile); the CSV's pod sets no runAsUser


@pytest.fixture(scope="module")
def registry(olm_workdir: Path) -> Iterator[Registry]:
    """A registry on loopback for the module. It stays up until the cluster has stopped (set
    up first, torn down last)."""
    podman()  # skips, or fails under IMAGE_TESTS=require, without podman or the image
    controlplane.require_loopback_only_network()
    directory = olm_workdir / "registry"
    directory.mkdir()
    with Registry(directory / "storage", f"127.0.0.1:{free_port()}",
                  directory / "registry.log") as started:
        yield started


def push(registry: Registry, image: str, repository: str, tag: str) -> str:
    """Push the local `image` as REGISTRY/repository:tag; its reference by digest."""
    digest_file = registry.storage.parent / f"{repository.replace('/', '_')}.digest"
    subprocess.run([podman(), "push", "--quiet", "--tls-verify=false",
                    f"--digestfile={digest_file}", image,
                    f"{registry.address}/{repository}:{tag}"],
                   check=True, capture_output=True, timeout=300)
    return f"{registry.address}/{repository}@{digest_file.read_text().strip()}"


@pytest.fixture(scope="module")
def pushed_image(registry: Registry) -> str:
    """The operator image in the registry: REGISTRY/external-secrets-operator@D1."""
    return push(registry, IMAGE, "external-secrets-operator", f"v{__version__}")


@dataclass
class Installed:
    olm: OlmCluster
    image: str
    csv: dict[str, Any]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def installed(pushed_image: str, olm_cluster: OlmCluster) -> AsyncIterator[Installed]:
    cluster = olm_cluster
    cluster.mark("operator image pushed")
    cluster.pull_operator_image(REPO_ROOT, pushed_image)
    [release] = await cluster.publish(REPO_ROOT)
    assert release.operator_images == [pushed_image], release.operator_images
    cluster.mark("catalog served (its bundle names the image by digest)")
    await cluster.subscribe(release)
    csv = await operator_running(cluster, release)
    yield Installed(cluster, pushed_image, csv)


def podman_json(cluster: OlmCluster, *args: str) -> Any:
    """A podman command's JSON output, on the cluster's container store."""
    found = subprocess.run([*containers.podman(cluster.simulated.workdir), *args],
                           capture_output=True, text=True, check=True, timeout=60)
    return json.loads(found.stdout)


async def operator_running(cluster: OlmCluster, release: catalog.Release) -> dict[str, Any]:
    """Once subscribed: the CSV Succeeded, the operator created its ESM, and the cluster is
    configured for the operand; the CSV."""
    csv: dict[str, Any] = await cluster.succeeded(release)
    cluster.mark(f"CSV {release.name} Succeeded")
    await eventually(lambda: cluster.kube.request("GET", ESM_PATH), 120,
                     what="the operator to create the ESM")
    cluster.mark("ExternalSecretsManager created by the operator")
    await cluster.configure()
    return csv


def assert_own_root(pid: int) -> None:
    """The process sees its image's files: another root than the host's."""
    root, host = os.stat(f"/proc/{pid}/root/"), os.stat("/")
    assert (root.st_dev, root.st_ino) != (host.st_dev, host.st_ino)


def assert_restricted(pid: int, uid: int | str) -> None:
    """A restricted pod's securityContext as the runtime applied it: the user, no
    capabilities, no new privileges, a seccomp filter (podman's default profile)."""
    status = Path(f"/proc/{pid}/status").read_text()
    assert re.search(rf"^Uid:\s+{uid}\s", status, re.M), status
    assert re.search(r"^CapEff:\s+0+$", status, re.M), status
    assert re.search(r"^NoNewPrivs:\s+1$", status, re.M), status
    assert re.search(r"^Seccomp:\s+2$", status, re.M), status


def running_container(cluster: OlmCluster, prefix: str) -> dict[str, Any]:
    """`podman inspect` of the one running container whose name starts with `prefix` (the
    runner names them `k8s_<container>_<pod>_<namespace>_...`, as a kubelet does)."""
    listed = podman_json(cluster, "ps", "--format=json")
    names = [c["Names"][0] for c in listed if c["Names"][0].startswith(prefix)]
    assert len(names) == 1, [c["Names"] for c in listed]
    try:
        [inspected] = podman_json(cluster, "container", "inspect", names[0])
    except subprocess.CalledProcessError as error:  # removed since `ps`: a pod being replaced
        raise AssertionError(f"{names[0]} is gone: {error.stderr.strip()}") from error
    result: dict[str, Any] = inspected
    return result


def operator_container(cluster: OlmCluster) -> dict[str, Any]:
    """`podman inspect` of the one container running the operator."""
    return running_container(cluster, f"k8s_{identity.CONTAINER}_")


def operator_process(cluster: OlmCluster, container: dict[str, Any], image: str) -> RunningProcess:
    """The operator's one process: `container`'s, running `image` as pulled into the
    cluster's store by its digest, started as the Deployment starts it."""
    assert container["ImageName"] == image, container["ImageName"]
    [pulled] = podman_json(cluster, "image", "inspect", image)
    assert pulled["Digest"] == image.split("@", 1)[1], pulled["Digest"]
    assert container["Image"] == pulled["Id"]
    [process] = cluster.simulated.processes(NAMESPACE, identity.CONTAINER)
    assert process.pid == container["State"]["Pid"], (process.pid, container["State"]["Pid"])
    assert process.argv[:4] == ("/opt/operator/bin/python", "-m", "manager", "run"), process.argv
    return process


async def test_olm_runs_the_operator_image_pulled_by_digest(installed: Installed) -> None:
    cluster, image = installed.olm, installed.image
    print(f"\ninstalled {image} through OLM:\n{cluster.timeline()}")
    deployment = installed.csv["spec"]["install"]["spec"]["deployments"][0]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == image
    assert image in {entry["image"] for entry in installed.csv["spec"]["relatedImages"]}

    # The pod's container is the image, pulled into the cluster's store by its digest.
    container = operator_container(cluster)
    [pod] = (await cluster.kube.list(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
    assert container["Name"].startswith(f"k8s_{identity.CONTAINER}_{pod['metadata']['name']}_")
    process = operator_process(cluster, container, image)
    pid = process.pid
    assert process.env["OPERATOR_CONDITION_NAME"] == installed.csv["metadata"]["name"]
    # Its files are the image's: another root than the host's, holding the image's venv.
    assert_own_root(pid)
    assert Path(f"/proc/{pid}/root/opt/operator/bin/python").exists()
    print(f"  checked: pod {pod['metadata']['name']} runs {image} (pid {pid}), pulled by digest "
          "into the cluster's own store, in its own root")

    # The pod's securityContext, as a kubelet's runtime applies it.
    assert_restricted(pid, IMAGE_USER)
    assert container["HostConfig"]["ReadonlyRootfs"] is True
    assert root_is_read_only(pid)
    touched = subprocess.run([*containers.podman(cluster.simulated.workdir), "exec",
                              container["Name"], "touch", "/probe"],
                             capture_output=True, text=True, check=False, timeout=60)
    assert touched.returncode != 0, touched
    assert "Read-only file system" in touched.stderr, touched
    print(f"  checked: UID {IMAGE_USER}, no capabilities, no new privileges, seccomp filter, "
          "read-only root (`touch /` refused)")

    # The operator works from the image: the CSV's permissions, through its token.
    release = cluster.release(REPO_ROOT)
    log = cluster.operator_log(release)
    assert "action=create result=created kind=ExternalSecretsManager" in log, log[-3000:]
    assert "action=leader result=gained" in log, log[:3000]
    assert_log_clean(log, f"{release.name}'s operator", forbidden=True)
    print("  checked: the image's operator created the ESM and led; the ESC is Ready; no "
          f"Forbidden, crashed pass or traceback in {len(log.splitlines())} log lines")


async def test_deleting_the_pod_stops_its_container(installed: Installed) -> None:
    cluster = installed.olm
    old = operator_container(cluster)
    [pod] = (await cluster.kube.list(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]
    name = pod["metadata"]["name"]
    await cluster.kube.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")

    async def replaced() -> dict[str, Any]:
        current = operator_container(cluster)
        assert current["Name"] != old["Name"]
        assert old["Name"] not in [c["Names"][0] for c in podman_json(
            cluster, "ps", "--all", "--format=json")]
        return current

    new = await eventually(replaced, 120, interval=0.5, what="the pod's replacement")
    assert not Path(f"/proc/{old['State']['Pid']}").exists()
    # SIGTERM reached the operator in its container: it stopped cleanly, freeing the Lease.
    old_log = cluster.simulated.logs(NAMESPACE, identity.CONTAINER)[name]
    assert "action=leader result=released" in old_log, old_log[-2000:]
    print(f"\n  checked: deleting {name} stopped its container (Lease released) and "
          f"removed it; {new['Name']} runs")


async def test_stopping_the_cluster_leaves_no_container(installed: Installed) -> None:
    cluster = installed.olm
    pid = operator_container(cluster)["State"]["Pid"]
    await asyncio.to_thread(cluster.simulated.stop)
    assert containers.running(cluster.simulated.workdir) == []
    assert not (cluster.simulated.workdir / containers.STORE).exists()
    assert not Path(f"/proc/{pid}").exists()
    print("\n  checked: the stopped cluster left no container and no store")
