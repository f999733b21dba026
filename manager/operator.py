"""The operator process: kopf hosts it (signals, liveness, login), our runtime reconciles.

`run_operator()` runs against $KUBECONFIG (or ~/.kube/config, or the in-cluster service
account); `make run` starts a simulated cluster for it when none is given. `serve()` is the
asynchronous core, also used by the integration tests to run the operator in-process.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import kopf
import yaml

from manager import __version__, metrics
from manager.apply.discovery import Discovery
from manager.config import OperatorEnvironment
from manager.constants import FIELD_MANAGER
from manager.controllers.events import EVENTS_NAMESPACE
from manager.controllers.facts import ClusterFacts
from manager.controllers.handlers import build_registry
from manager.controllers.runtime import DEFAULT_RESYNC_SECONDS, OperatorRuntime
from manager.credentials import load_credentials
from manager.kube import USER_AGENT, ApiError, JsonObject, Kube, install_crds, own_namespace
from manager.leader import LeaderElector, LeaseTiming, candidate_identity
from manager.logs import configure_logging, without_credentials
from manager.metrics import MetricsServer
from manager.metrics_auth import MetricsAccess
from manager.metrics_tls import ServingTLS
from manager.olm.identity import METRICS_SERVICE
from manager.paths import REPO_ROOT
from manager.tls_profile import INTERMEDIATE, TLSProfile, python_tls_policy

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
    metrics_secure: bool = True
    """HTTPS, to bearer tokens allowed to get /metrics; False: plain HTTP, open to anyone
    who reaches the port (local runs)."""
    metrics_cert_file: str | None = None
    """The serving certificate and key (PEM), read again when they change; None, or files
    that do not exist yet: a self-signed certificate (manager.metrics_tls)."""
    metrics_key_file: str | None = None
    leader_election: LeaseTiming | None = None
    """None: reconcile at once (`make run`); else only while holding the Lease."""
    leader_election_namespace: str | None = None
    """Where the Lease is; None: the operator's own namespace (POD_NAMESPACE)."""


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
        "metrics": _metrics_setting(options),
        "leaderElection": _election_setting(options.leader_election),
    }
    return identity, settings


def _metrics_setting(options: OperatorOptions) -> str:
    if not options.metrics_addr:
        return "off"
    if not options.metrics_secure:
        return f"http://{options.metrics_addr}"
    return f"https://{options.metrics_addr}"  # to allowed bearer tokens only


def _election_setting(timing: LeaseTiming | None) -> str:
    if timing is None:
        return "off"
    # lease duration / renew deadline / retry period
    return (f"{timing.lease_duration:g}s/{timing.renew_deadline:g}s/"
            f"{timing.retry_period:g}s")


class LeaderElectionError(ValueError):
    """Leader election is on but there is no namespace to hold the Lease in."""


def exit_at_once() -> None:
    """The Lease is lost: another instance may lead any moment, so this one must not write
    one more request. Leaving the process (as controller-runtime does) stops every task at
    once, whatever it was doing; the kubelet restarts the container, which campaigns again
    with empty caches, instead of a half-stopped runtime carrying state from its reign."""
    logging.shutdown()  # the action=leader result=lost line is written first
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


async def serve(options: OperatorOptions, *,
                stop_flag: asyncio.Event | threading.Event | None = None,
                ready_flag: asyncio.Event | threading.Event | None = None,
                holder: dict[str, OperatorRuntime] | None = None,
                on_lost: Callable[[], None] = exit_at_once) -> None:
    """Run until `stop_flag` is set (or SIGINT/SIGTERM in the main thread). With leader
    election, the runtime starts only once the Lease is held; `on_lost` runs if it is lost."""
    credentials = load_credentials(options.kubeconfig)
    environment = OperatorEnvironment.from_environ(os.environ, own_namespace())
    identity = candidate_identity()
    kube = Kube(credentials, f"{USER_AGENT}/{__version__} ({identity})")
    elector = _elector(options, environment, kube, identity)
    holder = holder if holder is not None else {}

    startup = startup_settings(options, environment, credentials.server)
    metrics_server = _metrics_server(options, kube, environment.own_namespace)
    follow_profile = _tls_follower(metrics_server)
    if metrics_server is not None:
        await metrics_server.start()

    async def start_runtime() -> OperatorRuntime:
        runtime = OperatorRuntime(kube, environment, options.resync_seconds, startup,
                                  on_tls_profile=follow_profile)
        await runtime.start()
        return runtime

    async def lead(elector: LeaderElector) -> None:
        """Campaign; once leading, run the runtime until the Lease is lost. A bug here must
        not leave a process that looks alive but never reconciles: it ends like a loss."""
        try:
            if metrics_server is not None:  # a standby serves its metrics too
                await _read_tls_profile(kube, follow_profile)
            await elector.acquire()
            holder["runtime"] = await start_runtime()
            await elector.hold()
        except Exception:
            logger.exception("action=leader result=crash")
        on_lost()  # the process ends here (exit_at_once)
        # An embedding caller's on_lost may return: this instance stops reconciling anyway.
        runtime = holder.pop("runtime", None)
        if runtime is not None:
            await runtime.stop()

    # kopf's start-up handler must not wait for the Lease: kopf serves the liveness probe
    # only after it, and a waiting instance is alive. So the campaign is a task of its own,
    # and kopf starts no runtime when leader election is on.
    campaign = None
    if elector is not None:
        campaign = asyncio.create_task(lead(elector), name="leader election")
    else:
        metrics.record_leader(True)
    # On stop, what kopf started and still runs (its API scans retrying against a server
    # that does not answer) is cancelled at once rather than after kopf's 5 s of grace; the
    # tasks that existed before (the caller's, the campaign) are left alone.
    registry = build_registry(start_runtime if elector is None else None, credentials, holder,
                              keep=frozenset(asyncio.all_tasks()))
    try:
        # kopf's own identity would come from getpass, which raises for a UID that
        # /etc/passwd lacks (runAsUser on a runtime that adds no entry); ours needs none.
        await kopf.operator(registry=registry, clusterwide=True, standalone=True,
                            identity=cast(Any, identity),  # kopf's NewType of str
                            liveness_endpoint=options.liveness_endpoint,
                            stop_flag=stop_flag, ready_flag=ready_flag)
    finally:
        await _stop_campaign(campaign)
        runtime = holder.get("runtime")
        if runtime is not None:
            await runtime.stop()
        if elector is not None:  # after the runtime stopped: no write of ours can follow
            await elector.release()
        if metrics_server is not None:
            await metrics_server.stop()
        await kube.close()


def _metrics_server(options: OperatorOptions, kube: Kube,
                    namespace: str | None) -> MetricsServer | None:
    if not options.metrics_addr:
        return None
    if not options.metrics_secure:
        return MetricsServer(options.metrics_addr)
    # The names the metrics Service gives the pod, for a self-signed certificate.
    service = f"{METRICS_SERVICE}.{namespace}.svc"
    names = (service, f"{service}.cluster.local", "localhost") if namespace else ("localhost",)
    tls = ServingTLS(_path(options.metrics_cert_file), _path(options.metrics_key_file), names)
    return MetricsServer(options.metrics_addr, tls=tls,
                         access=MetricsAccess(kube, metrics.METRICS_PATH))


def _tls_follower(server: MetricsServer | None) -> Callable[[TLSProfile], None]:
    """What applies the cluster's TLS profile to the operator's own TLS server."""
    def follow(profile: TLSProfile) -> None:
        if server is not None:
            server.set_tls_policy(*python_tls_policy(profile))
    return follow


async def _read_tls_profile(kube: Kube, follow: Callable[[TLSProfile], None]) -> None:
    """Once, before leading (the runtime follows changes while it leads)."""
    try:
        profile = await ClusterFacts(kube, Discovery(kube)).tls_profile()
    except ApiError as error:  # Intermediate until the runtime reads it
        logger.warning("action=read result=error kind=APIServer error=%r", str(error))
        return
    if profile != INTERMEDIATE:
        follow(profile)


def _path(value: str | None) -> Path | None:
    return Path(value) if value else None


def _elector(options: OperatorOptions, environment: OperatorEnvironment, kube: Kube,
             identity: str) -> LeaderElector | None:
    if options.leader_election is None:
        return None
    namespace = options.leader_election_namespace or environment.own_namespace
    if not namespace:
        raise LeaderElectionError(
            "leader election needs a namespace for its Lease: run in a pod, or set "
            "POD_NAMESPACE or --leader-elect-namespace")
    return LeaderElector(kube, namespace, identity, options.leader_election)


async def _stop_campaign(campaign: asyncio.Task[None] | None) -> None:
    if campaign is None:
        return
    campaign.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await campaign


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


def run_operator(options: OperatorOptions, *, verbose: bool = False) -> int:
    configure_logging(verbose)
    asyncio.run(serve(options))
    return 0
