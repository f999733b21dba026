"""The CRDs a cluster for the operator needs: its own two and the operand's.

On a real cluster OLM installs both sets from the bundle; here `up` and `run` apply them.
The operand's come from its published Go module (hack/fetch-crds.sh, cached).
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
