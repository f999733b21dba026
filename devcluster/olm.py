"""OLM on the simulated cluster: olm-operator, catalog-operator and a catalog served by opm.

The binaries come from OLM's and operator-registry's Go modules (hack/build-tool.sh olm,
opm; pinned in manager/versions.py), and OLM's CRDs from its module's chart. OLM's two
operators and `opm serve` run as processes of one host process (`python -m devcluster olm`,
started like the pod runner), in a network namespace of their own that reaches nothing but
the API server and the cluster's Services (services.py): both operators bind their health
port :8080 on every address, which in the cluster's namespace would take port 8080 from
every pod (the operand's and the operator's pods all declare it). The catalog operator
reaches the catalog at CATALOG_ADDRESS in that namespace, the address of the CatalogSource
this module applies (or, for a catalog image, the address of its Service).

Everything else is OLM's production path: the catalog names each bundle's image, the catalog
operator unpacks it with a Job whose pod the pod runner runs (OLM's util and opm images map
to the local cpb and opm; the bundle image to a copy of the bundle's directory, see
catalog.py), and olm-operator installs the CSV's Deployment, whose pod the runner runs too.
A new catalog (publish) restarts `opm serve` at the same address, as a new catalog image
would replace the registry pod; OLM resolves the change within seconds.

A catalog can also come from a real catalog image (publish_image): the CatalogSource then
names the image, the catalog operator creates its registry pod and Service, the pod runner
runs that pod from the image with podman, and OLM's processes reach it by the Service's name
and ClusterIP through services.py, which stands in for cluster DNS and kube-proxy in OLM's
network namespace (and its private /etc/hosts).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

from devcluster import crds
from devcluster import images as image_map
from devcluster.api import Api, JsonObject
from devcluster.controlplane import ControlPlaneError, ensure_tool
from devcluster.netns import PodNetwork, inside
from devcluster.pods import ImageEntry
from devcluster.services import Services
from manager import versions

logger = logging.getLogger("devcluster.olm")

NAMESPACE = "olm"
# Where OLM's deployment manifests and its catalog operator's defaults put its images.
UTIL_IMAGE = f"quay.io/operator-framework/olm:{versions.OLM_VERSION}"
OPM_IMAGE = f"quay.io/operator-framework/opm:{versions.OPM_VERSION}"
OLM_USER = 1001  # the USER of both images
CATALOG_PORT = 50051
CATALOG_ADDRESS = f"127.0.0.1:{CATALOG_PORT}"
CATALOG_SOURCE = "external-secrets-operator-catalog"
CATALOG_LINK = "olm-catalog"  # in the cluster's directory: the catalog to serve
SERVING_FILE = "olm-catalog.serving"  # what is served now (the link's target)
OPERATORS = "/apis/operators.coreos.com"
HOSTS_FILE = "olm-hosts"  # in the cluster's directory: OLM's /etc/hosts (services.py)
SERVICES_PERIOD = 1.0  # seconds between two looks at the Services


def binaries() -> tuple[Path, Path]:
    """The directories of OLM's binaries (olm, catalog, cpb; crds/ next to it) and of opm."""
    return ensure_tool("olm"), ensure_tool("opm")


def images(olm_bin: Path, opm_bin: Path) -> image_map.ImageMap:
    """OLM's images as its unpack Job runs them: the util image copies cpb (`/bin/cp -Rv
    /bin/cpb /util/cpb`), the opm image runs `opm alpha bundle extract`."""
    return {
        image_map.repository(UTIL_IMAGE): ImageEntry(
            ("/bin/cp", "-Rv", "/bin/cpb"), ("cp", "-Rv", str(olm_bin / "cpb")), OLM_USER),
        image_map.repository(OPM_IMAGE): ImageEntry(("opm",), (str(opm_bin / "opm"),), OLM_USER),
    }


def install(api: Api, images_file: Path, pulled: tuple[str, str] | None = None) -> None:
    """What OLM needs before it starts: its CRDs, its namespace, its images (or, `pulled`,
    its util and opm images as references in a registry: run with podman)."""
    olm_bin, opm_bin = binaries()
    crds.install(api, crds.load(olm_bin.parent / "crds"))
    api.apply(f"/api/v1/namespaces/{NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}, "devcluster")
    # No copy of every CSV in every namespace: the cluster has many, the tests need none.
    api.apply(f"{OPERATORS}/v1/olmconfigs/cluster", {
        "apiVersion": "operators.coreos.com/v1", "kind": "OLMConfig",
        "metadata": {"name": "cluster"}, "spec": {"features": {"disableCopiedCSVs": True}}},
        "devcluster")
    image_map.add(images_file, images(olm_bin, opm_bin))
    if pulled:  # by repository, as a node has them: the pod's reference is pulled
        image_map.add(images_file, {image_map.repository(image): image_map.pulled(OLM_USER)
                                    for image in pulled})


def wait_working(api: Api, check_processes: Callable[[], None], deadline: float) -> None:
    """Until olm-operator has reconciled the OLMConfig, while both operators keep running
    (the catalog operator's first work comes with a CatalogSource: publish)."""
    while True:
        config = api.get(f"{OPERATORS}/v1/olmconfigs/cluster") or {}
        if (config.get("status") or {}).get("conditions"):
            return
        check_processes()
        if time.monotonic() > deadline:
            raise ControlPlaneError("OLM is not working; see olm-operator.log, "
                                    "catalog-operator.log and olm.log")
        time.sleep(0.2)


def publish(api: Api, state_dir: Path, catalog: Path, timeout: float = 60.0) -> None:
    """Serve the file-based catalog in directory `catalog` (replacing the one served) at
    CATALOG_ADDRESS, and point the CatalogSource at it; return once it is served."""
    link = state_dir / CATALOG_LINK
    partial = link.with_name(f".{link.name}.tmp")
    partial.unlink(missing_ok=True)
    partial.symlink_to(catalog.resolve())
    partial.replace(link)  # the host process restarts `opm serve` on it
    deadline = time.monotonic() + timeout
    while _read(state_dir / SERVING_FILE) != str(catalog.resolve()):
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"OLM's catalog {catalog} not served after {timeout}s; "
                                    f"see {state_dir / 'opm-serve.log'} and "
                                    f"{state_dir / 'olm.log'}")
        time.sleep(0.1)
    api.apply(f"{OPERATORS}/v1alpha1/namespaces/{NAMESPACE}/catalogsources/{CATALOG_SOURCE}",
              catalog_source(), "devcluster")


def publish_image(api: Api, state_dir: Path, image: str) -> None:
    """Point the CatalogSource at the catalog image `image` (`spec.image`), as on a real
    cluster: the catalog operator runs it as a registry pod behind a Service, which the pod
    runner runs from the image (pulled with podman) and OLM reaches by the Service's name
    (services.py). A catalog served at CATALOG_ADDRESS stops."""
    # By repository, as a node has it: whatever reference the pod names is pulled. The
    # catalog image runs as USER 1001 (hack/catalog.Dockerfile), as OLM's images do.
    image_map.add(image_map.path(state_dir),
                  {image_map.repository(image): image_map.pulled(OLM_USER)})
    (state_dir / CATALOG_LINK).unlink(missing_ok=True)
    api.apply(f"{OPERATORS}/v1alpha1/namespaces/{NAMESPACE}/catalogsources/{CATALOG_SOURCE}",
              catalog_source(image), "devcluster")


def catalog_source(image: str | None = None) -> JsonObject:
    """The CatalogSource of the served catalog: a gRPC address, so no registry pod; or, given
    a catalog `image`, that image, with the registry pod's restricted securityContext (as
    OpenShift's catalogs have it)."""
    where: JsonObject = ({"image": image, "grpcPodConfig": {"securityContextConfig": "restricted"}}
                         if image else {"address": CATALOG_ADDRESS})
    return {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "CatalogSource",
            "metadata": {"name": CATALOG_SOURCE, "namespace": NAMESPACE},
            "spec": {"sourceType": "grpc", **where,
                     "displayName": "external-secrets-operator (local)",
                     "publisher": "devcluster"}}


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except FileNotFoundError:
        return ""


# --- the host process -----------------------------------------------------------------------


def host(state_dir: Path, api: Api, stop: threading.Event, interval: str | None = None,
         tools: tuple[str, str] = (UTIL_IMAGE, OPM_IMAGE)) -> None:
    """Run OLM's processes in their network namespace, reaching the API server `api`, until
    `stop` (or one of them exits). `interval`: olm-operator's wake-up interval, its resync of
    every CSV (which is when it sees a change of the cluster proxy). `tools`: the util and
    opm images of the unpack Job."""
    kubeconfig = state_dir / "kubeconfig"
    olm_bin, opm_bin = binaries()
    network = PodNetwork(None, api.address)
    network.start()
    cluster_services = Services(api, network, state_dir / HOSTS_FILE)
    children: dict[str, subprocess.Popen[bytes]] = {}

    def start(name: str, argv: list[str], **env: str) -> None:
        # Each in a private mount namespace whose /etc/hosts names the Services (services.py).
        with (state_dir / f"{name}.log").open("ab") as log:
            children[name] = subprocess.Popen(
                ["nsenter", f"--net={network.path}", "--", "unshare", "--mount",
                 "--propagation", "private", "--", "sh", "-c",
                 'mount --bind "$0" /etc/hosts && exec setpriv --pdeathsig=KILL -- "$@"',
                 str(cluster_services.hosts), *argv],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env={**os.environ, "KUBECONFIG": str(kubeconfig), **env})

    try:
        common = ["--namespace", NAMESPACE, "--writeStatusName", ""]
        resync = ["--interval", interval] if interval else []
        start("olm-operator", [str(olm_bin / "olm"), *common, *resync],
              OPERATOR_NAMESPACE=NAMESPACE, OPERATOR_NAME="olm-operator")
        start("catalog-operator", [
            str(olm_bin / "catalog"), *common, "--util-image", tools[0],
            "--opmImage", tools[1], "--set-workload-user-id=false"])
        served, services_due = "", 0.0
        while not stop.wait(0.2):
            exited = [name for name, child in children.items() if child.poll() is not None]
            if exited:
                logger.error("%s exited; see %s", exited[0], state_dir / f"{exited[0]}.log")
                return
            if time.monotonic() >= services_due:
                cluster_services.sync()
                services_due = time.monotonic() + SERVICES_PERIOD
            link = state_dir / CATALOG_LINK
            wanted = str(link.resolve()) if link.is_symlink() else ""
            if wanted != served:
                _stop(children.pop("opm-serve", None))
                (state_dir / SERVING_FILE).unlink(missing_ok=True)
                served = wanted
                start("opm-serve", [str(opm_bin / "opm"), "serve", wanted,
                                    "-p", str(CATALOG_PORT),
                                    "-t", str(state_dir / "opm-serve.termination-log")])
                if _wait_listening(network, children["opm-serve"], stop):
                    (state_dir / SERVING_FILE).write_text(served)
    finally:
        for child in children.values():
            _stop(child)
        network.stop()


def _stop(child: subprocess.Popen[bytes] | None) -> None:
    if child is None:
        return
    with contextlib.suppress(ProcessLookupError):
        child.terminate()
    try:
        child.wait(10)
    except subprocess.TimeoutExpired:
        child.kill()
        child.wait()


def _wait_listening(network: PodNetwork, child: subprocess.Popen[bytes],
                    stop: threading.Event) -> bool:
    """Until `opm serve` accepts connections at CATALOG_ADDRESS in `network`; False if it
    exited first."""
    while child.poll() is None and not stop.is_set():
        with inside(network.namespace_fd):
            probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        with probe:
            if probe.connect_ex(("127.0.0.1", CATALOG_PORT)) == 0:
                return True
        stop.wait(0.1)
    return False
