"""The CRDs a cluster for the operator needs: its own two and the operand's; and, in the
opt-in OpenShift mode, OpenShift's config API.

On a real cluster OLM installs both sets from the bundle; here `up` and `run` apply them.
The operand's come from its published Go module (hack/fetch-crds.sh, cached). So do
OpenShift's APIServer and Proxy CRDs (openshift/api, the Default feature set), with the
`cluster` object of each that an OpenShift cluster has: `SimulatedCluster(openshift=True)`,
`python -m devcluster up --openshift`, or the tests' `openshift_config` fixture. Plain
Kubernetes, without them, is the default.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from devcluster.api import Api, ApiError
from devcluster.controlplane import ControlPlaneError
from manager.paths import REPO_ROOT

OPERATOR_CRDS = REPO_ROOT / "manifests" / "crds"
FETCH_CRDS = REPO_ROOT / "hack" / "fetch-crds.sh"
COLLECTION = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def load(directory: Path) -> list[dict[str, Any]]:
    return [doc for path in sorted(directory.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def fetched_dir() -> Path:
    result = subprocess.run(["bash", str(FETCH_CRDS)], stdout=subprocess.PIPE, text=True,
                            check=False)
    if result.returncode != 0:
        raise ControlPlaneError(f"{FETCH_CRDS} failed with exit code {result.returncode}")
    return Path(result.stdout.strip().splitlines()[-1])


def all_crds() -> list[dict[str, Any]]:
    return load(OPERATOR_CRDS) + load(fetched_dir() / "external-secrets")


OPENSHIFT_CONFIG_API = "/apis/config.openshift.io/v1"
# The singletons an OpenShift cluster has from its installation, as bare as the installer
# leaves them (no TLS security profile: Intermediate).
OPENSHIFT_CONFIG_OBJECTS = (
    (f"{OPENSHIFT_CONFIG_API}/apiservers/cluster",
     {"apiVersion": "config.openshift.io/v1", "kind": "APIServer",
      "metadata": {"name": "cluster"}, "spec": {}}),
    (f"{OPENSHIFT_CONFIG_API}/proxies/cluster",
     {"apiVersion": "config.openshift.io/v1", "kind": "Proxy",
      "metadata": {"name": "cluster"}, "spec": {}}),
)


def openshift_config_crds() -> list[dict[str, Any]]:
    return load(fetched_dir() / "openshift-config")


def install_openshift_config(api: Api) -> None:
    """OpenShift's config API (APIServer, Proxy) and their `cluster` objects."""
    install(api, openshift_config_crds())
    for path, obj in OPENSHIFT_CONFIG_OBJECTS:
        api.apply(path, obj, "devcluster")


def install(api: Api, crds: list[dict[str, Any]], timeout: float = 60.0) -> None:
    """Apply `crds` and wait until each is Established."""
    for crd in crds:
        api.apply(f"{COLLECTION}/{crd['metadata']['name']}", crd, "devcluster")
    deadline = time.monotonic() + timeout
    for crd in crds:
        name = crd["metadata"]["name"]
        while not _established(api, name):
            if time.monotonic() > deadline:
                raise ControlPlaneError(f"CRD {name} not Established after {timeout}s")
            time.sleep(0.1)


def _established(api: Api, name: str) -> bool:
    try:
        live = api.get(f"{COLLECTION}/{name}") or {}
    except ApiError:
        return False
    return any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (live.get("status") or {}).get("conditions") or [])
