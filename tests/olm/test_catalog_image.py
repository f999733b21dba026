"""OLM serves the catalog from the catalog image, as on a cluster: `spec.image` by digest.

The catalog of the current tree (its bundle naming the operator image by digest, as in
test_install_image.py) is built into a catalog image (hack/catalog.Dockerfile FROM the opm
base of hack/opm-base-image.sh: the pinned opm and grpc_health_probe) and pushed to a
registry on loopback. The CatalogSource names that image by digest (`sourceType: grpc`,
`spec.image`, restricted pod security), so the catalog operator creates the registry pod
and its Service itself; the pod runner runs the pod from the image with podman (`opm serve`
inside it, the exec probes `grpc_health_probe -addr=:50051` run in the container); the
catalog operator dials `<service>.olm.svc:50051`, which devcluster/services.py resolves and
relays (the stand-ins for cluster DNS and kube-proxy in OLM's network namespace); then OLM
resolves the package and installs the operator, whose pod runs the operator image.

The bundle is unpacked from its image too: the bundle image is built from the bundle
directory (bundle/bundle.Dockerfile, as hack/publish-images.sh does) and pushed, the catalog
names it by digest, and the catalog operator's unpack Job runs OLM's util image (the pinned
cpb, hack/olm-util-image.sh), the bundle image (`/util/cpb /bundle`) and the opm image (the
opm base: `opm alpha bundle extract`), each pulled from the registry and run with podman,
sharing the pod's emptyDir volumes. This module's cluster starts its catalog operator with
those util and opm images (SimulatedCluster.olm_images).

Still local stand-ins here: the operand's images (devcluster/images.py).

Without podman or the images the test skips, or fails under IMAGE_TESTS=require (.ci/run).
Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from devcluster import olm
from devcluster.registry import Registry
from manager import versions
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.e2e.operator_process import assert_log_clean
from tests.images.test_operator_image import podman
from tests.olm.conftest import SUBSCRIPTION, Catalog, OlmCluster, started_cluster
from tests.olm.test_install_image import (
    assert_own_root,
    assert_restricted,
    operator_container,
    operator_running,
    podman_json,
    push,
    pushed_image,  # noqa: F401 (a fixture)
    registry,  # noqa: F401 (a fixture)
    running_container,
)
from tests.waiting import eventually

HACK = REPO_ROOT / "hack"
CATALOG_USER = 1001  # the catalog image's USER (hack/catalog.Dockerfile)
SERVICE_ADDRESS = f"{olm.CATALOG_SOURCE}.{olm.NAMESPACE}.svc:{olm.CATALOG_PORT}"
CATALOG_SOURCE = (f"{olm.OPERATORS}/v1alpha1/namespaces/{olm.NAMESPACE}/catalogsources/"
                  f"{olm.CATALOG_SOURCE}")
REGISTRY_PODS = f"/api/v1/namespaces/{olm.NAMESPACE}/pods"


def required(problem: str) -> None:
    if os.environ.get("IMAGE_TESTS") == "require":
        pytest.fail(problem)
    pytest.skip(problem)


@pytest.fixture(scope="module")
def opm_base() -> str:
    """The opm base image (hack/opm-base-image.sh: cached by its inputs)."""
    podman()
    made = subprocess.run(["bash", str(HACK / "opm-base-image.sh")], capture_output=True,
                          text=True, check=False, timeout=600)
    if made.returncode != 0:
        required(f"no opm base image: {made.stderr.strip()[-2000:]}")
    return made.stdout.strip()


@pytest.fixture(scope="module")
def olm_images(registry: Registry, opm_base: str) -> tuple[str, str]:  # noqa: F811
    """OLM's util image (hack/olm-util-image.sh) and opm image (the opm base) in the
    registry, by digest, as the catalog operator of this module's cluster names them."""
    made = subprocess.run(["bash", str(HACK / "olm-util-image.sh")], capture_output=True,
                          text=True, check=False, timeout=600)
    if made.returncode != 0:
        required(f"no OLM util image: {made.stderr.strip()[-2000:]}")
    return (push(registry, made.stdout.strip(), "operator-framework/olm",
                 versions.OLM_VERSION),
            push(registry, opm_base, "operator-framework/opm", versions.OPM_VERSION))


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def olm_cluster(olm_workdir: Path, olm_images: tuple[str, str],
                      ) -> AsyncIterator[OlmCluster]:
    """This module's cluster: its catalog operator unpacks bundles with `olm_images`."""
    async for cluster in started_cluster(olm_workdir, olm_images=olm_images):
        yield cluster


def build_bundle_image(bundle: Path, tag: str) -> None:
    """The bundle image of the bundle directory `bundle` (manifests/, metadata/), built from
    bundle/bundle.Dockerfile as hack/publish-images.sh builds it."""
    subprocess.run([podman(), "build", "--quiet", "--network=none",
                    "-f", str(REPO_ROOT / "bundle" / "bundle.Dockerfile"), "-t", tag,
                    str(bundle)], check=True, capture_output=True, timeout=600)


async def unpacked(cluster: OlmCluster, bundle: str) -> dict[str, Any]:
    """The unpack Job of the bundle image `bundle`, Complete; failed: why, with the log of
    its `pull` container (the bundle image running cpb)."""
    jobs = (await cluster.kube.list(f"/apis/batch/v1/namespaces/{olm.NAMESPACE}/jobs"))["items"]
    mine = [job for job in jobs if any(
        c["image"] == bundle for c in job["spec"]["template"]["spec"].get("initContainers") or [])]
    assert mine, f"no unpack Job for {bundle} yet: {[j['metadata']['name'] for j in jobs]}"
    [job] = mine
    conditions = {c["type"]: c["status"] for c in (job.get("status") or {}).get("conditions")
                  or []}
    if conditions.get("Failed") == "True" or (job.get("status") or {}).get("failed"):
        pulls = {pod: log[-400:] for pod, log in
                 cluster.simulated.logs(olm.NAMESPACE, "pull").items()}
        pytest.fail(f"the unpack Job {job['metadata']['name']} of {bundle} failed: "
                    f"{job.get('status')}; its pull containers' logs end: {pulls}")
    assert conditions.get("Complete") == "True", job.get("status")
    return job


def build_catalog_image(catalog: Path, base: str, tag: str, scratch: Path) -> None:
    """The catalog image of the file-based catalog in `catalog`, as hack/publish-images.sh
    builds it (context: `configs/`)."""
    shutil.copytree(catalog, scratch / "configs")
    subprocess.run([podman(), "build", "--quiet", "--network=none",
                    f"--build-arg=BASE_IMAGE={base}", "-f", str(HACK / "catalog.Dockerfile"),
                    "-t", tag, str(scratch)], check=True, capture_output=True, timeout=600)


@dataclass
class Installed:
    olm: OlmCluster
    catalog_image: str
    operator_image: str
    bundle_image: str
    unpack_job: dict[str, Any]
    csv: dict[str, Any]


async def registry_pod(cluster: OlmCluster, image: str | None = None) -> dict[str, Any]:
    """The catalog's registry pod (of the catalog image `image`, if given), alone and Ready
    (its exec probes passed in the container)."""
    pods = (await cluster.kube.list(REGISTRY_PODS, label_selector=(
        f"olm.catalogSource={olm.CATALOG_SOURCE}")))["items"]
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    [pod] = pods
    assert image in (None, pod["spec"]["containers"][0]["image"]), pod["spec"]["containers"]
    ready = [c["status"] for c in pod["status"].get("conditions") or [] if c["type"] == "Ready"]
    if ready != ["True"]:
        name = pod["metadata"]["name"]
        states = [(s.get("state"), s.get("lastState")) for s in
                  pod["status"].get("containerStatuses") or []]
        log = cluster.simulated.logs(olm.NAMESPACE, "registry-server").get(name, "")
        raise AssertionError(f"registry pod {name} ({pod['spec']['containers'][0]['image']}) "
                             f"not Ready: {states}; its log ends: {log[-800:]}")
    return pod


async def catalog_connected(cluster: OlmCluster) -> dict[str, Any]:
    """The CatalogSource, once the catalog operator holds a READY connection to its pod."""
    source = await cluster.kube.request("GET", CATALOG_SOURCE)
    state = (source.get("status") or {}).get("connectionState") or {}
    assert state.get("lastObservedState") == "READY", source.get("status")
    return source


async def bundle_image_pushed(cluster: OlmCluster, registry: Registry,  # noqa: F811
                              source: Path) -> str:
    """The bundle image of the release in `source`, built and pushed by digest (tagged with
    its version): catalogs built from now on name it."""
    release = await cluster.prepared(source)
    tag = f"localhost/eso-test-bundle:{cluster.workdir.name}"
    await asyncio.to_thread(build_bundle_image, release.bundle, tag)
    try:
        bundle = push(registry, tag, "external-secrets-operator-bundle",
                      f"v{release.csv['spec']['version']}")
    finally:
        subprocess.run([podman(), "rmi", tag], capture_output=True, check=False, timeout=120)
    cluster.push_bundle_image(source, bundle)
    cluster.mark(f"bundle image of {release.name} built and pushed")
    return bundle


async def catalog_image_pushed(cluster: OlmCluster, registry: Registry,  # noqa: F811
                               opm_base: str, built: Catalog) -> str:
    """The catalog image of `built`, built and pushed by digest (tagged with its newest
    release's version)."""
    scratch = cluster.workdir / "catalog-image" / built.directory.name
    scratch.mkdir(parents=True)
    tag = f"localhost/eso-test-catalog:{cluster.workdir.name}"
    await asyncio.to_thread(build_catalog_image, built.directory, opm_base, tag, scratch)
    try:
        image = push(registry, tag, "external-secrets-operator-catalog",
                     f"v{built.releases[-1].csv['spec']['version']}")
    finally:
        subprocess.run([podman(), "rmi", tag], capture_output=True, check=False, timeout=120)
    cluster.mark(f"catalog image of {', '.join(r.name for r in built.releases)} built and "
                 "pushed")
    return image


async def catalog_image_served(cluster: OlmCluster, built: Catalog, image: str) -> None:
    """The CatalogSource names `image` (the catalog image of `built`), until its registry
    pod runs it, Ready, and the catalog operator is connected."""
    await cluster.serve_image(built, image)
    cluster.mark("CatalogSource names the catalog image by digest")
    await eventually(lambda: registry_pod(cluster, image), 180, interval=0.5,
                     what="the registry pod of the catalog image Ready")
    cluster.mark("registry pod Ready (grpc_health_probe in its container)")
    await eventually(lambda: catalog_connected(cluster), 120, interval=0.5,
                     what="the catalog operator connected to the registry pod")
    cluster.mark("CatalogSource READY through its Service")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def installed(registry: Registry, pushed_image: str, opm_base: str,  # noqa: F811
                    olm_cluster: OlmCluster) -> AsyncIterator[Installed]:
    cluster = olm_cluster
    cluster.mark("operator image pushed")
    cluster.pull_operator_image(REPO_ROOT, pushed_image)
    bundle = await bundle_image_pushed(cluster, registry, REPO_ROOT)
    built = await cluster.build_catalog(REPO_ROOT)
    image = await catalog_image_pushed(cluster, registry, opm_base, built)
    await catalog_image_served(cluster, built, image)
    [release] = built.releases
    assert release.bundle_image == bundle
    await cluster.subscribe(release)
    job = await eventually(lambda: unpacked(cluster, bundle), 180, interval=0.5,
                           what="the unpack Job of the bundle image Complete")
    cluster.mark("bundle unpacked from its image (util, pull, extract with podman)")
    csv = await operator_running(cluster, release)
    yield Installed(cluster, image, pushed_image, bundle, job, csv)


def registry_container(cluster: OlmCluster, pod: dict[str, Any]) -> dict[str, Any]:
    """`podman inspect` of the registry pod's one container."""
    return running_container(
        cluster, f"k8s_registry-server_{pod['metadata']['name']}_{olm.NAMESPACE}_")


async def test_olm_serves_the_catalog_from_its_image(installed: Installed) -> None:
    cluster, image = installed.olm, installed.catalog_image
    print(f"\nserved {image} through OLM:\n{cluster.timeline()}")
    source = await cluster.kube.request("GET", CATALOG_SOURCE)
    assert source["spec"]["image"] == image, source["spec"]
    assert "address" not in source["spec"], source["spec"]
    assert source["status"]["connectionState"]["address"] == SERVICE_ADDRESS, source["status"]

    # The registry pod runs the catalog image, pulled by digest, opm serving inside it.
    pod = await registry_pod(cluster)
    [spec] = pod["spec"]["containers"]
    assert spec["image"] == image
    assert spec["readinessProbe"]["exec"]["command"][0] == "grpc_health_probe", spec
    container = registry_container(cluster, pod)
    assert container["ImageName"] == image, container["ImageName"]
    [pulled] = podman_json(cluster, "image", "inspect", image)
    assert pulled["Digest"] == image.split("@", 1)[1], pulled["Digest"]
    assert container["Image"] == pulled["Id"]
    pid = container["State"]["Pid"]
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    assert argv[:3] == [b"/bin/opm", b"serve", b"/configs"], argv
    opm_bin = olm.binaries()[1] / "opm"
    inside = Path(f"/proc/{pid}/root/bin/opm").read_bytes()
    assert hashlib.sha256(inside).digest() == hashlib.sha256(opm_bin.read_bytes()).digest()
    assert_own_root(pid)
    # Its probes ran in the container: grpc_health_probe, from the image, answered.
    runner_log = (cluster.simulated.workdir / "pod-runner.log").read_text()
    passed = (f"pod {olm.NAMESPACE}/{pod['metadata']['name']}: registry-server passed its "
              "startup probe (exec grpc_health_probe -addr=:50051")
    assert passed in runner_log, runner_log[-3000:]
    print(f"  checked: pod {pod['metadata']['name']} runs {image} (pid {pid}): the pinned "
          "opm serving /configs in the image's root; its exec probes passed in it")

    # The restricted securityContext OLM gave the pod, as podman applies it.
    assert_restricted(pid, CATALOG_USER)

    # OLM reached it by the Service's name and ClusterIP (services.py).
    service = await cluster.kube.request(
        "GET", f"/api/v1/namespaces/{olm.NAMESPACE}/services/{olm.CATALOG_SOURCE}")
    hosts = (cluster.simulated.workdir / olm.HOSTS_FILE).read_text()
    name = SERVICE_ADDRESS.rsplit(":", 1)[0]
    assert f"{service['spec']['clusterIP']} {name} " in hosts, hosts
    print(f"  checked: the catalog operator connected to {SERVICE_ADDRESS} "
          f"({service['spec']['clusterIP']}), READY")

    # Resolved and installed from it: the operator runs its image and works.
    deployment = installed.csv["spec"]["install"]["spec"]["deployments"][0]
    assert deployment["spec"]["template"]["spec"]["containers"][0]["image"] == \
        installed.operator_image
    assert operator_container(cluster)["ImageName"] == installed.operator_image
    release = cluster.release(REPO_ROOT)
    log = cluster.operator_log(release)
    assert "action=create result=created kind=ExternalSecretsManager" in log, log[-3000:]
    assert_log_clean(log, f"{release.name}'s operator", forbidden=True)
    print(f"  checked: {installed.csv['metadata']['name']} Succeeded from the catalog image; "
          f"the operator ({identity.CONTAINER}) runs its image; the ESC is Ready")


async def test_the_unpack_job_runs_the_bundle_image(installed: Installed,
                                                    olm_images: tuple[str, str]) -> None:
    cluster, bundle = installed.olm, installed.bundle_image
    util, opm = olm_images
    job = installed.unpack_job
    template = job["spec"]["template"]["spec"]
    assert [(c["name"], c["image"]) for c in template["initContainers"]] == \
        [("util", util), ("pull", bundle)], template["initContainers"]
    assert [(c["name"], c["image"]) for c in template["containers"]] == [("extract", opm)]
    # Each of its containers ran with podman from its image, and exited 0: cpb from the util
    # image, then the bundle image's own /manifests and /metadata, then opm's extract.
    runner_log = (cluster.simulated.workdir / "pod-runner.log").read_text()
    started = re.search(rf"pod {olm.NAMESPACE}/(\S+): started pull \(pid \d+, podman run "
                        rf"{re.escape(bundle)}\)", runner_log)
    assert started, f"no pull container run from {bundle}: {runner_log[-3000:]}"
    pod = started.group(1)
    for name, image in (("util", util), ("pull", bundle), ("extract", opm)):
        assert f"pod {olm.NAMESPACE}/{pod}: started {name} (pid" in runner_log, name
        assert re.search(rf"pod {olm.NAMESPACE}/{pod}: started {name} \(pid \d+, podman run "
                         rf"{re.escape(image)}\)", runner_log), (name, image)
        assert f"pod {olm.NAMESPACE}/{pod}: {name} exited with 0" in runner_log, name
    # Pulled by the digest the catalog names, into the cluster's own store.
    for image in (bundle, util, opm):
        [pulled] = podman_json(cluster, "image", "inspect", image)
        assert pulled["Digest"] == image.split("@", 1)[1], (image, pulled["Digest"])
    # What extract wrote: the bundle's ConfigMap, from the image's files.
    configmaps = (await cluster.kube.list(f"/api/v1/namespaces/{olm.NAMESPACE}/configmaps"))
    written = [c for c in configmaps["items"]
               if (c["metadata"].get("annotations") or {}).get(
                   "operatorframework.io/bundle-unpack-ref") or
               c["metadata"]["name"] == job["metadata"]["name"]]
    assert written, [c["metadata"]["name"] for c in configmaps["items"]]
    # The InstallPlan, made from those manifests, completed.
    subscription = await cluster.kube.request("GET", SUBSCRIPTION)
    ref = subscription["status"]["installPlanRef"]
    plan = await cluster.kube.request("GET", f"{olm.OPERATORS}/v1alpha1/namespaces/"
                                      f"{ref['namespace']}/installplans/{ref['name']}")
    assert plan["status"]["phase"] == "Complete", plan["status"].get("conditions")
    print(f"\n  checked: unpack pod {pod}: util ({util}), pull ({bundle}) and extract ({opm}) "
          "ran with podman and exited 0; the InstallPlan completed")
