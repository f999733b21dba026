"""The operator process: kopf for the two custom resources, our runtime for everything else.

`run_operator()` runs against $KUBECONFIG (or ~/.kube/config, or the in-cluster service
account); `make run` starts a simulated cluster for it when none is given. `serve()` is the
asynchronous core, also used by the integration tests to run the operator in-process.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

import kopf
import yaml

from manager import __version__
from manager.config import OperatorEnvironment
from manager.constants import FIELD_MANAGER
from manager.controllers.events import EVENTS_NAMESPACE
from manager.controllers.handlers import build_registry
from manager.controllers.runtime import DEFAULT_RESYNC_SECONDS, OperatorRuntime
from manager.credentials import load_credentials
from manager.kube import JsonObject, Kube, install_crds, own_namespace
from manager.logs import configure_logging, without_credentials
from manager.metrics import MetricsServer
from manager.paths import REPO_ROOT

logger = logging.getLogger("manager.operator")

CRDS_DIR = REPO_ROOT / "manifests" / "crds"


@dataclass(frozen=True)
class OperatorOptions:
    kubeconfig: str | None = None
    liveness_endpoint: str | None = None
    resync_seconds: float = DEFAULT_RESYNC_SECONDS
    metrics_addr: str | None = None
    """Where to serve /metrics (HOST:PORT or :PORT); None: not served. `run` defaults to
    :8080 (manager.metrics.DEFAULT_METRICS_ADDR)."""


def startup_settings(options: OperatorOptions, environment: OperatorEnvironment,
                     api_server: str) -> tuple[dict[str, object], dict[str, object]]:
    """What the two start-up lines report: which operator runs where, and with which
    settings (images, versions, proxy without credentials). Never a secret."""
    proxies = {name: without_credentials(value) for name, value in (
        ("HTTP_PROXY", environment.http_proxy), ("HTTPS_PROXY", environment.https_proxy),
        ("NO_PROXY", environment.no_proxy)) if value}
    identity: dict[str, object] = {
        "version": os.environ.get("OPERATOR_IMAGE_VERSION") or __version__,
        "apiServer": api_server,
        "operatorNamespace": environment.own_namespace or "none (not in a pod)",
        "eventsNamespace": EVENTS_NAMESPACE,
    }
    settings: dict[str, object] = {
        "externalSecretsImage": environment.external_secrets_image or "none",
        "externalSecretsVersion": environment.operand_version,
        "bitwardenImage": environment.bitwarden_image or "none",
        "proxy": ",".join(f"{k}={v}" for k, v in proxies.items()) or "none",
        "resyncSeconds": f"{options.resync_seconds:g}",
        "liveness": options.liveness_endpoint or "off",
        "metrics": options.metrics_addr or "off",
    }
    return identity, settings


async def serve(options: OperatorOptions, *,
                stop_flag: asyncio.Event | threading.Event | None = None,
                ready_flag: asyncio.Event | threading.Event | None = None,
                holder: dict[str, OperatorRuntime] | None = None) -> None:
    """Run until `stop_flag` is set (or SIGINT/SIGTERM in the main thread)."""
    credentials = load_credentials(options.kubeconfig)
    environment = OperatorEnvironment.from_environ(os.environ, own_namespace())
    kube = Kube(credentials)
    holder = holder if holder is not None else {}

    startup = startup_settings(options, environment, credentials.server)
    metrics_server = MetricsServer(options.metrics_addr) if options.metrics_addr else None
    if metrics_server is not None:
        await metrics_server.start()

    async def start_runtime() -> OperatorRuntime:
        runtime = OperatorRuntime(kube, environment, options.resync_seconds, startup)
        await runtime.start()
        return runtime

    # On stop, what kopf started and still runs (its API scans retrying against a server
    # that does not answer) is cancelled at once rather than after kopf's 5 s of grace; the
    # tasks that existed before (the caller's) are left alone.
    registry = build_registry(start_runtime, credentials, holder,
                              keep=frozenset(asyncio.all_tasks()))
    try:
        await kopf.operator(registry=registry, clusterwide=True, standalone=True,
                            liveness_endpoint=options.liveness_endpoint,
                            stop_flag=stop_flag, ready_flag=ready_flag)
    finally:
        runtime = holder.get("runtime")
        if runtime is not None:
            await runtime.stop()
        if metrics_server is not None:
            await metrics_server.stop()
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
                 verbose: bool = False, resync_seconds: float = DEFAULT_RESYNC_SECONDS,
                 metrics_addr: str | None = None) -> int:
    configure_logging(verbose)
    asyncio.run(serve(OperatorOptions(kubeconfig, liveness_endpoint, resync_seconds,
                                      metrics_addr)))
    return 0
