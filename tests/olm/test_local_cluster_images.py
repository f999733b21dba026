"""`python -m devcluster up --olm --images` (hack/local-cluster.sh up --olm --images): the
path of tests/olm/test_catalog_image.py for people at the shell.

`up` starts the cluster, a registry in its network namespace, runs hack/publish-images.sh
against it (the operator image of `make image` and the operand's images of `make
operand-images`, the bundle and catalog images naming them by digest, OLM's util and opm
images), starts OLM with those util and opm images and points the CatalogSource at the
catalog image, then returns. The test is the administrator afterwards: it applies only the
Namespace, OperatorGroup and Subscription of docs/olm.md ("With OLM"), and OLM installs the
operator from its image. It checks the unpack Job ran the published util, bundle and opm
images, the CatalogSource names the catalog digest and its registry pod runs it, the
operator's container runs the pushed operator image by digest. Then the administrator
creates the ExternalSecretsConfig (bitwarden-sdk-server on, with a key pair made by openssl):
the CSV's RELATED_IMAGE_* variables are its relatedImages, the published digests; once Ready,
every operand pod (controller, webhook, cert-controller, bitwarden-sdk-server) runs its image
by that digest, pulled from the registry with podman, with its restricted securityContext
(read-only root, no capabilities), and the ESC's status reports the images in use. Last,
`down` leaves no process in the network namespace: no registry, no container.

Without podman, the image or docker-registry it skips, or fails under IMAGE_TESTS=require.
Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from devcluster import containers, controlplane, published
from devcluster import images as image_map
from devcluster.api import answers_ok
from devcluster.cluster import SimulatedCluster
from devcluster.registry import BINARY
from manager.client.kube import Kube
from manager.names import DEFAULT_OPERAND_NAMESPACE
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.certificates import self_signed_ca, signed_key_pair
from tests.e2e.operator_process import assert_log_clean
from tests.images.test_operator_image import podman, root_is_read_only
from tests.olm.conftest import CSVS, FIELD_MANAGER, POD_CIDR, OlmCluster
from tests.olm.test_catalog_image import (
    CATALOG_SOURCE,
    registry_container,
    registry_pod,
    required,
    unpacked,
)
from tests.olm.test_install_image import (
    assert_restricted,
    operator_container,
    operator_process,
    podman_json,
)
from tests.upgrade.test_upgrade import ESC_PATH
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
    assert list(images) == ["operator", "external_secrets", "bitwarden_sdk_server", "bundle",
                            "catalog", "util", "opm"], result.stderr
    simulated = SimulatedCluster.attached(directory)
    cluster = OlmCluster(simulated, Kube.connect(simulated.kubeconfig), workdir,
                         {"`up --olm --images` started": started})
    cluster.mark("`up` returned: registry, images published, OLM, CatalogSource")
    return cluster, images


async def subscribed_and_installed(cluster: OlmCluster, images: dict[str, str]) -> str:
    """The administrator's part, then OLM's: the bundle unpacked from its image, the CSV
    Succeeded, the operator's container running the operator image by digest; the CSV's
    name."""
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
    return release.name


# --- the operand from its images (test_mirror.py checks the same on a mirror) -----------------

OPERAND_NAMESPACE = DEFAULT_OPERAND_NAMESPACE  # the ESC's default
BITWARDEN_SECRET = "bitwarden-tls"  # the administrator's key pair (secretRef)
ESC_SPEC: dict[str, Any] = {"appConfig": {"bitwardenSecretManagerProvider": {
    "enabled": "true", "secretRef": {"name": BITWARDEN_SECRET}}}}
# The operand's Deployments and their containers, each running one of the two images.
OPERAND_CONTAINERS = {"external-secrets": "external_secrets",
                      "webhook": "external_secrets",
                      "cert-controller": "external_secrets",
                      "bitwarden-sdk-server": "bitwarden_sdk_server"}
RELATED_VARIABLES = {"RELATED_IMAGE_EXTERNAL_SECRETS": "external-secrets",
                     "RELATED_IMAGE_BITWARDEN_SDK_SERVER": "bitwarden-sdk-server"}


def related_images(csv: dict[str, Any]) -> dict[str, str]:
    """The CSV's operand images where the operator reads them, its Deployment's
    RELATED_IMAGE_* variables, checked to be its relatedImages: name -> reference."""
    related = {entry["name"]: entry["image"] for entry in csv["spec"]["relatedImages"]}
    [deployment] = csv["spec"]["install"]["spec"]["deployments"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    variables = {variable["name"]: variable.get("value") for variable in container["env"]
                 if variable["name"].startswith("RELATED_IMAGE_")}
    assert variables.keys() == RELATED_VARIABLES.keys(), variables
    for variable, name in RELATED_VARIABLES.items():
        assert variables[variable] == related[name], (variable, variables[variable], related)
    assert related[identity.PACKAGE] == container["image"], related
    assert csv["metadata"]["annotations"]["containerImage"] == container["image"]
    return related


async def configure_operand(cluster: OlmCluster, scratch: Path) -> dict[str, Any]:
    """The administrator's ExternalSecretsConfig with bitwarden-sdk-server on and a key pair
    of theirs (openssl) in its Secret, until Ready for its generation; the ESC."""
    kube = cluster.kube
    scratch.mkdir(parents=True, exist_ok=True)
    ca = base64.b64decode(self_signed_ca(scratch, "bitwarden-ca"))
    service = f"bitwarden-sdk-server.{OPERAND_NAMESPACE}.svc"
    cert, key = signed_key_pair(scratch, "bitwarden-ca", "bitwarden",
                                (f"{service}.cluster.local", service))
    await kube.apply(f"/api/v1/namespaces/{OPERAND_NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": OPERAND_NAMESPACE}},
        field_manager=FIELD_MANAGER)
    encoded = {k: base64.b64encode(v).decode() for k, v in (("tls.crt", cert), ("tls.key", key),
                                                           ("ca.crt", ca))}
    await kube.apply(f"/api/v1/namespaces/{OPERAND_NAMESPACE}/secrets/{BITWARDEN_SECRET}", {
        "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
        "metadata": {"name": BITWARDEN_SECRET, "namespace": OPERAND_NAMESPACE},
        "data": encoded}, field_manager=FIELD_MANAGER)
    await kube.create(ESC_PATH.rsplit("/", 1)[0], {
        "apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
        "metadata": {"name": "cluster"}, "spec": ESC_SPEC}, field_manager=FIELD_MANAGER)
    cluster.mark("ExternalSecretsConfig created (bitwarden-sdk-server on)")

    async def ready() -> dict[str, Any]:
        esc = await kube.request("GET", ESC_PATH)
        status = esc.get("status") or {}
        conditions = {c["type"]: c for c in status.get("conditions") or []}
        condition = conditions.get("Ready") or {}
        assert condition.get("observedGeneration") == esc["metadata"]["generation"], status
        assert condition.get("status") == "True", (condition, status.get("awaited"))
        return esc

    esc = await eventually(ready, 240, interval=0.5, what="ExternalSecretsConfig Ready=True")
    cluster.mark("ExternalSecretsConfig Ready=True")
    return esc


def pod_images(spec: dict[str, Any]) -> dict[str, str]:
    """Every container of a pod spec (init and ephemeral ones too): name -> image."""
    return {c["name"]: c["image"] for kind in ("initContainers", "containers",
                                                "ephemeralContainers")
            for c in spec.get(kind) or []}


async def assert_operand_runs_its_images(cluster: OlmCluster, images: dict[str, str],
                                         esc: dict[str, Any]) -> int:
    """Each operand Deployment's pods run the image by the digest the CSV names, pulled into
    the cluster's store with podman (not a host binary), restricted: its user (the image's:
    the pods set none), a read-only root, no capabilities. `images`: external_secrets and
    bitwarden_sdk_server references. The ESC's status reports them. The number of pods."""
    status = esc["status"]
    assert status["externalSecretsImage"] == images["external_secrets"], status
    assert status["bitwardenSDKServerImage"] == images["bitwarden_sdk_server"], status
    pods = (await cluster.kube.list(f"/api/v1/namespaces/{OPERAND_NAMESPACE}/pods"))["items"]
    running = [pod for pod in pods if not pod["metadata"].get("deletionTimestamp")]
    seen = set()
    for pod in running:
        name = pod["metadata"]["name"]
        containers = pod_images(pod["spec"])
        for container, image in containers.items():
            expected = images[OPERAND_CONTAINERS[container]]
            assert image == expected, (name, container, image, expected)
            inspected = running_operand_container(cluster, container, name)
            assert inspected["ImageName"] == image, inspected["ImageName"]
            [pulled] = podman_json(cluster, "image", "inspect", image)
            assert pulled["Digest"] == image.split("@", 1)[1]
            assert inspected["Image"] == pulled["Id"]
            pid = inspected["State"]["Pid"]
            user = (image_map.NOBODY if OPERAND_CONTAINERS[container] == "external_secrets"
                    else image_map.BITWARDEN_USER)
            assert_restricted(pid, user)
            assert inspected["HostConfig"]["ReadonlyRootfs"] is True
            assert root_is_read_only(pid)
            seen.add(container)
    assert seen == OPERAND_CONTAINERS.keys(), (seen, [p["metadata"]["name"] for p in running])
    return len(running)


def running_operand_container(cluster: OlmCluster, container: str, pod: str,
                              ) -> dict[str, Any]:
    """`podman inspect` of the running container `container` of the operand pod `pod`."""
    prefix = f"k8s_{container}_{pod}_{OPERAND_NAMESPACE}_"
    listed = podman_json(cluster, "ps", "--format=json")
    names = [c["Names"][0] for c in listed if c["Names"][0].startswith(prefix)]
    assert len(names) == 1, (prefix, [c["Names"] for c in listed])
    [inspected] = podman_json(cluster, "container", "inspect", names[0])
    found: dict[str, Any] = inspected
    return found


async def operand_from_images(cluster: OlmCluster, images: dict[str, str],
                              csv_name: str) -> None:
    """The CSV names the published operand images (RELATED_IMAGE_* = relatedImages); the
    administrator's ESC brings the operand up from them."""
    csv = await cluster.kube.request("GET", f"{CSVS}/{csv_name}")
    related = related_images(csv)
    assert related == {"external-secrets": images["external_secrets"],
                       "bitwarden-sdk-server": images["bitwarden_sdk_server"],
                       identity.PACKAGE: images["operator"]}, related
    esc = await configure_operand(cluster, cluster.workdir / "bitwarden-tls")
    pods = await assert_operand_runs_its_images(cluster, images, esc)
    cluster.mark("checked: the operand's pods run the published images")
    print(f"  checked: RELATED_IMAGE_* = relatedImages = the published operand digests; "
          f"{pods} operand pods (controller, webhook, cert-controller, bitwarden-sdk-server) "
          "run them from the registry with podman, read-only root, no capabilities; the ESC "
          "reports them")


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
        csv_name = await subscribed_and_installed(cluster, images)
        await operand_from_images(cluster, images, csv_name)
        await down_leaves_nothing(cluster, directory, before)
        print(f"\n`up --olm --images`, subscribe, install, `down`:\n{cluster.timeline()}")
    finally:  # `down` again is harmless; after a failure it stops what `up` started
        await asyncio.to_thread(devcluster, "down", "--dir", str(directory))
