"""A disconnected install: everything from a mirror registry, nothing from where it was
published (hack/mirror-images.sh; docs/olm.md, "Mirroring for a disconnected cluster").

hack/publish-images.sh pushes the operator, operand, bundle and catalog images to a source
registry (on the storage `make push-images` uses: unchanged images are not pushed again);
hack/mirror-images.sh, given only the source catalog's digest, copies the operator and
operand images by digest into a second registry (skopeo), rebuilds the bundle and catalog
images with every reference rewritten to the mirror, and pushes them there. OLM's own util
and opm images are copied too, as a disconnected cluster's platform mirror has OLM's. Then
the source registry stops: whatever the cluster runs afterwards can only come from the
mirror.

A fresh simulated cluster installs from the mirror as `up --olm --images` does from the
source (devcluster/published.py `install_from`): OLM runs the mirrored util and opm images,
the CatalogSource names the mirrored catalog, the administrator subscribes and creates the
ExternalSecretsConfig (bitwarden-sdk-server on). Then the scan: the CSV (its Deployment,
RELATED_IMAGE_* variables, containerImage, relatedImages), every Deployment and every Pod in
the operator's and the operand's namespaces, the ESC's status, and every container and image
of the node's container store name an image of the mirror by digest: none by tag, none from
another registry.

Without podman, the images, docker-registry or skopeo the test skips, or fails under
IMAGE_TESTS=require. Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import astuple, dataclass, fields
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from devcluster import controlplane, published
from devcluster.cluster import SimulatedCluster
from devcluster.registry import BINARY, Registry
from manager.client.kube import Kube
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.e2e.operator_process import assert_log_clean, free_port
from tests.images.test_operator_image import podman
from tests.olm.conftest import CSVS, NAMESPACE, POD_CIDR, OlmCluster
from tests.olm.test_catalog_image import CATALOG_SOURCE, required
from tests.olm.test_install_image import podman_json
from tests.olm.test_local_cluster_images import (
    OPERAND_NAMESPACE,
    assert_operand_runs_its_images,
    configure_operand,
    pod_images,
    related_images,
)
from tests.upgrade.test_upgrade import ESC_PATH

MIRROR_SCRIPT = REPO_ROOT / "hack" / "mirror-images.sh"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
# hack/mirror-images.sh's output: `NAME REFERENCE` a line.
MIRRORED_NAMES = {identity.PACKAGE: "operator", "external-secrets": "external_secrets",
                  "bitwarden-sdk-server": "bitwarden_sdk_server", "bundle": "bundle",
                  "catalog": "catalog"}


@dataclass(frozen=True)
class Registries:
    source: Registry
    mirror: Registry


@pytest.fixture(scope="module")
def registries(olm_workdir: Path) -> Iterator[Registries]:
    """The source registry, on the storage of `make push-images`, and an empty mirror."""
    podman()  # skips, or fails under IMAGE_TESTS=require, without podman or the image
    for tool, package in ((BINARY, "docker-registry"), ("skopeo", "skopeo")):
        if shutil.which(tool) is None:
            required(f"{tool} is not installed (apt-get install {package})")
    controlplane.require_loopback_only_network()
    directory = olm_workdir / "registries"
    directory.mkdir()
    with Registry(published.registry_storage(), f"127.0.0.1:{free_port()}",
                  directory / "source.log") as source, \
            Registry(directory / "mirror", f"127.0.0.1:{free_port()}",
                     directory / "mirror.log") as mirror:
        yield Registries(source, mirror)


def mirror(catalog: str, to: str) -> dict[str, str]:
    """hack/mirror-images.sh CATALOG TO: the mirrored references by Published field."""
    result = subprocess.run(["bash", str(MIRROR_SCRIPT), catalog, to], capture_output=True,
                            text=True, check=False, timeout=900, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr[-4000:]
    lines = [line.split() for line in result.stdout.splitlines()]
    assert sorted(name for name, _ in lines) == sorted(MIRRORED_NAMES), result.stdout
    return {MIRRORED_NAMES[name]: reference for name, reference in lines}


def copy(reference: str, to: str) -> str:
    """skopeo copy by digest (OLM's own images, as the platform mirrors them)."""
    path = reference.split("/", 1)[1]
    target = f"{to}/{path}"
    subprocess.run(["skopeo", "copy", "--quiet", "--all", "--preserve-digests",
                    "--src-tls-verify=false", "--dest-tls-verify=false",
                    f"docker://{reference}", f"docker://{target}"],
                   check=True, capture_output=True, timeout=600)
    return target


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def mirrored(registries: Registries, olm_workdir: Path,
                   ) -> AsyncIterator[tuple[OlmCluster, published.Published]]:
    """Published to the source, mirrored, the source stopped; a cluster with OLM installing
    from the mirror."""
    marks = {"start": time.monotonic()}
    source = await asyncio.to_thread(published.publish, registries.source.address)
    marks["published to the source registry"] = time.monotonic()
    found = await asyncio.to_thread(mirror, source.catalog, registries.mirror.address)
    util, opm = (await asyncio.gather(*(asyncio.to_thread(copy, reference,
                                                          registries.mirror.address)
                                        for reference in (source.util, source.opm))))
    images = published.Published(**found, util=util, opm=opm)
    marks["mirrored (hack/mirror-images.sh), OLM's images copied"] = time.monotonic()
    # The digests of what was not rebuilt are the source's.
    for name in ("operator", "external_secrets", "bitwarden_sdk_server", "util", "opm"):
        assert getattr(images, name).split("@")[1] == getattr(source, name).split("@")[1]
    for name in ("bundle", "catalog"):  # rewritten: new images
        assert getattr(images, name).split("@")[1] != getattr(source, name).split("@")[1]
    registries.source.stop()
    assert not registries.source.answers()
    marks["source registry stopped"] = time.monotonic()

    simulated = SimulatedCluster(olm_workdir / "cluster", pod_cidr=POD_CIDR)
    try:
        await asyncio.to_thread(simulated.start)
        cluster = OlmCluster(simulated, Kube.connect(simulated.kubeconfig), olm_workdir, marks)
        await asyncio.to_thread(published.install_from, simulated, images)
        cluster.mark("cluster, OLM from the mirror's util and opm images, CatalogSource")
        try:
            yield cluster, images
        finally:
            await cluster.kube.close()
    finally:
        await asyncio.to_thread(simulated.stop)
        print(f"\nmirror test cluster logs: {simulated.workdir}")


def assert_mirrored(where: str, image: str, mirror: str) -> None:
    assert DIGEST.search(image), f"{where}: {image} is not by digest"
    assert image.startswith(f"{mirror}/"), f"{where}: {image} is not from the mirror {mirror}"


def scan_object(kind: str, obj: dict[str, Any], mirror: str) -> list[str]:
    """Every image reference of a Deployment's or Pod's spec, and RELATED_IMAGE_* values,
    checked; what was checked."""
    spec = obj["spec"]["template"]["spec"] if kind == "Deployment" else obj["spec"]
    where = f"{kind} {obj['metadata']['namespace']}/{obj['metadata']['name']}"
    checked = []
    for container, image in pod_images(spec).items():
        assert_mirrored(f"{where} container {container}", image, mirror)
        checked.append(image)
    for container in (spec.get("initContainers") or []) + spec["containers"]:
        for variable in container.get("env") or []:
            if variable["name"].startswith("RELATED_IMAGE_"):
                assert_mirrored(f"{where} {variable['name']}", variable["value"], mirror)
                checked.append(variable["value"])
    return checked


async def test_olm_installs_from_the_mirror_only(
        mirrored: tuple[OlmCluster, published.Published], registries: Registries) -> None:
    cluster, images = mirrored
    mirror = registries.mirror.address
    for field, reference in zip(fields(images), astuple(images), strict=True):
        assert_mirrored(field.name, reference, mirror)
    cluster.pull_operator_image(REPO_ROOT, images.operator)
    release = await cluster.prepared(REPO_ROOT)  # its package, channel and CSV name
    await cluster.subscribe(release)
    cluster.mark("Namespace, OperatorGroup and Subscription applied")
    csv = await cluster.succeeded(release, timeout=300)
    cluster.mark(f"CSV {release.name} Succeeded")
    source = await cluster.kube.request("GET", CATALOG_SOURCE)
    assert source["spec"]["image"] == images.catalog, source["spec"]

    # The CSV as installed: the mirrored bundle's, every image the mirror's by digest.
    related = related_images(csv)
    assert related == {"external-secrets": images.external_secrets,
                       "bitwarden-sdk-server": images.bitwarden_sdk_server,
                       identity.PACKAGE: images.operator}, related
    [deployment] = csv["spec"]["install"]["spec"]["deployments"]
    scanned = scan_object("Deployment", {**deployment, "metadata": {
        "namespace": NAMESPACE, "name": deployment["name"]}}, mirror)
    annotations = csv["metadata"]["annotations"]
    assert_mirrored("containerImage", annotations["containerImage"], mirror)
    # `oc adm must-gather --all-images` must find the gather on the mirror too.
    assert annotations["operators.openshift.io/must-gather-image"] == annotations["containerImage"]
    assert annotations["features.operators.openshift.io/disconnected"] == "true"

    esc = await configure_operand(cluster, cluster.workdir / "bitwarden-tls")
    pods = await assert_operand_runs_its_images(cluster, {
        "external_secrets": images.external_secrets,
        "bitwarden_sdk_server": images.bitwarden_sdk_server}, esc)
    await cluster.operator_passed(release)
    assert_log_clean(cluster.operator_log(release), f"{release.name}'s operator",
                     forbidden=True)
    cluster.mark(f"the operand's {pods} pods run the mirror's images")

    # The scan: the CSV, every Deployment and Pod of both namespaces, the ESC's status.
    kube = cluster.kube
    csvs = (await kube.list(CSVS))["items"]
    assert [c["metadata"]["name"] for c in csvs] == [release.name]
    objects = 0
    for namespace in (NAMESPACE, OPERAND_NAMESPACE):
        for kind, path in (("Deployment", f"/apis/apps/v1/namespaces/{namespace}/deployments"),
                           ("Pod", f"/api/v1/namespaces/{namespace}/pods")):
            items = (await kube.list(path))["items"]
            assert items, f"no {kind} in {namespace}"
            for item in items:
                scanned += scan_object(kind, item, mirror)
                objects += 1
    status = (await kube.request("GET", ESC_PATH))["status"]
    for key in ("externalSecretsImage", "bitwardenSDKServerImage"):
        assert_mirrored(f"ESC status.{key}", status[key], mirror)
    # What the node ran and holds: every container of the cluster's store (the catalog's
    # registry pod and the unpack Job's too), every image pulled.
    ran = podman_json(cluster, "ps", "--all", "--format=json")
    assert ran
    for container in ran:
        assert_mirrored(f"container {container['Names'][0]}", container["Image"], mirror)
    held = podman_json(cluster, "images", "--format=json")
    for image in held:
        for name in (image.get("Names") or []) + (image.get("RepoDigests") or []):
            assert name.startswith(f"{mirror}/"), name
    # Exactly the seven mirrored images: the bundle, util and opm ones the unpack Job ran.
    assert {digest for image in held for digest in image["RepoDigests"]} == set(
        astuple(images)), held
    cluster.mark("scanned")
    print(f"\ninstalled from the mirror {mirror} only:\n{cluster.timeline()}\n"
          f"  checked: {len(scanned)} image references in the CSV and {objects} Deployments "
          f"and Pods of {NAMESPACE} and {OPERAND_NAMESPACE}, the ESC's status, "
          f"{len(ran)} containers the node ran, {len(held)} images it pulled: all by digest "
          f"from {mirror}")
