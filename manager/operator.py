"""The operator process: kopf for the two custom resources, our runtime for everything else.

`run_operator()` runs against $KUBECONFIG (or ~/.kube/config, or the in-cluster service
account); `make run` starts a simulated cluster for it when none is given. `serve()` is the
asynchronous core, also used by the integration tests to run the operator in-process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import kopf
import yaml

from manager.config import OperatorEnvironment
from manager.constants import FIELD_MANAGER
from manager.controllers.handlers import build_registry
from manager.controllers.runtime import DEFAULT_RESYNC_SECONDS, OperatorRuntime
from manager.credentials import load_credentials
from manager.kube import JsonObject, Kube, install_crds, own_namespace
from manager.paths import REPO_ROOT

logger = logging.getLogger("manager.operator")

CRDS_DIR = REPO_ROOT / "manifests" / "crds"
LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"


@dataclass(frozen=True)
class OperatorOptions:
    kubeconfig: str | None = None
    liveness_endpoint: str | None = None
    resync_seconds: float = DEFAULT_RESYNC_SECONDS
    events_namespace: str | None = None


def configure_logging(verbose: bool = False) -> None:
    """One line per action, `key=value` fields; kopf's own chatter only when verbose."""
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, format=LOG_FORMAT,
                        stream=sys.stderr, force=True)
    for noisy in ("kopf", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)


async def serve(options: OperatorOptions, *,
                stop_flag: asyncio.Event | threading.Event | None = None,
                ready_flag: asyncio.Event | threading.Event | None = None,
                holder: dict[str, OperatorRuntime] | None = None) -> None:
    """Run until `stop_flag` is set (or SIGINT/SIGTERM in the main thread)."""
    credentials = load_credentials(options.kubeconfig)
    environment = OperatorEnvironment.from_environ(os.environ, own_namespace())
    kube = Kube(credentials)
    holder = holder if holder is not None else {}

    async def start_runtime() -> OperatorRuntime:
        runtime = OperatorRuntime(kube, environment, options.resync_seconds,
                                  options.events_namespace)
        await runtime.start()
        return runtime

    registry = build_registry(start_runtime, credentials, holder)
    try:
        await kopf.operator(registry=registry, clusterwide=True, standalone=True,
                            liveness_endpoint=options.liveness_endpoint,
                            stop_flag=stop_flag, ready_flag=ready_flag)
    finally:
        runtime = holder.get("runtime")
        if runtime is not None:
            await runtime.stop()
        await kube.close()


def load_crds(directory: Path) -> list[JsonObject]:
    documents: list[JsonObject] = []
    for path in sorted(directory.glob("*.yaml")):
        documents.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return documents


async def install_operator_crds(kubeconfig: Path, directory: Path = CRDS_DIR) -> None:
    crds = load_crds(directory)
    if not crds:
        raise FileNotFoundError(f"no CRDs in {directory}; run `make generate` first")
    kube = Kube.connect(kubeconfig)
    try:
        await install_crds(kube, crds, field_manager=FIELD_MANAGER)
    finally:
        await kube.close()


def run_operator(*, kubeconfig: str | None = None, liveness_endpoint: str | None = None,
                 verbose: bool = False, resync_seconds: float = DEFAULT_RESYNC_SECONDS) -> int:
    configure_logging(verbose)
    asyncio.run(serve(OperatorOptions(kubeconfig, liveness_endpoint, resync_seconds)))
    return 0
