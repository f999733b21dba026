"""The operator process: kopf hosts it (liveness, login), our runtime reconciles.

`run_operator()` runs against $KUBECONFIG (or ~/.kube/config, or the in-cluster service
account); `make run` starts a simulated cluster for it when none is given. `serve()` is the
asynchronous core, also used by the integration tests to run the operator in-process.

Stopping (SIGTERM, SIGINT, or the caller's stop flag) is ours, not kopf's: `serve()` catches
the signals before it starts anything (until then the default action ends the process, which
holds nothing yet) and again right after kopf installed its own handlers. A stop cancels the
campaign, so that no runtime starts any more; stops the runtime; then lets kopf stop its
tasks; and the Lease is released last, once nothing of ours can write. Every task asked to
cancel that still runs a moment later is cancelled again: on Python 3.11 `asyncio.wait_for`
loses a cancellation that arrives just as what it waits for completes (CPython gh-86296), and
a task of the runtime that lost it would hold up the stop until the kubelet's SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import kopf
import yaml

from manager import __version__, metrics
from manager.apply.discovery import Discovery
from manager.client.credentials import load_credentials
from manager.client.kube import USER_AGENT, ApiError, JsonObject, Kube, install_crds, own_namespace
from manager.config import OperatorEnvironment
from manager.logs import configure_logging, without_credentials
from manager.metrics_endpoint.auth import MetricsAccess
from manager.metrics_endpoint.server import METRICS_PATH, MetricsServer
from manager.metrics_endpoint.tls import ServingTLS
from manager.names import FIELD_MANAGER
from manager.olm.identity import METRICS_SERVICE
from manager.paths import REPO_ROOT
from manager.reporting.events import EVENTS_NAMESPACE
from manager.runtime.handlers import build_registry
from manager.runtime.leader import LeaderElector, LeaseTiming, candidate_identity
from manager.runtime.worker import DEFAULT_RESYNC_SECONDS, OperatorRuntime
from manager.steps.facts import ClusterFacts
from manager.tls_profile import INTERMEDIATE, TLSProfile, python_tls_policy

logger = logging.getLogger("manager.runtime.operator")

CRDS_DIR = REPO_ROOT / "manifests" / "crds"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
RECANCEL_SECONDS = 0.1
"""How long a task asked to cancel may run on before it is cancelled again."""
FLAG_POLL_SECONDS = 0.05
"""How often the caller's stop flag (a threading.Event, set from another thread) is read."""


@dataclass(frozen=True)
class OperatorOptions:
    kubeconfig: str | None = None
    liveness_endpoint: str | None = None
    resync_seconds: float = DEFAULT_RESYNC_SECONDS
    metrics_addr: str | None = None
    """Where to serve /metrics (HOST:PORT or :PORT); None: not served. `run` defaults to
    :8080 (manager.metrics_endpoint.server.DEFAULT_METRICS_ADDR)."""
    metrics_secure: bool = True
    """HTTPS, to bearer tokens allowed to get /metrics; False: plain HTTP, open to anyone
    who reaches the port (local runs)."""
    metrics_cert_file: str | None = None
    """The serving certificate and key (PEM), read again when they change; None, or files
    that do not exist yet: a self-signed certificate (manager.metrics_endpoint.tls)."""
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


class StopRequest:
    """When the operator is to stop: SIGTERM or SIGINT (only a loop in the main thread gets
    signals), or the caller's stop flag."""

    def __init__(self, flag: asyncio.Event | threading.Event | None = None) -> None:
        self.flag = flag
        self.requested = asyncio.Event()
        self._signals: list[signal.Signals] = []

    def catch_signals(self) -> None:
        """Take over SIGTERM and SIGINT (again: kopf installs its own handlers at its start,
        which would stop kopf behind our back)."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for number in STOP_SIGNALS:
            loop.add_signal_handler(number, self._signalled, number)
            if number not in self._signals:
                self._signals.append(number)

    def release_signals(self) -> None:
        """The default actions again (a signal after the stop ends the process at once)."""
        loop = asyncio.get_running_loop()
        for number in self._signals:
            loop.remove_signal_handler(number)
        self._signals.clear()

    def _signalled(self, number: signal.Signals) -> None:
        if not self.requested.is_set():
            logger.info("action=stopping reason=%s", signal.Signals(number).name)
        self.requested.set()

    async def wait(self) -> None:
        while not self.requested.is_set():
            if self.flag is not None and self.flag.is_set():
                self.requested.set()
                return
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FLAG_POLL_SECONDS if self.flag is not None
                                           else None):
                    await self.requested.wait()


async def serve(options: OperatorOptions, *,
                stop_flag: asyncio.Event | threading.Event | None = None,
                ready_flag: asyncio.Event | threading.Event | None = None,
                holder: dict[str, OperatorRuntime] | None = None,
                on_lost: Callable[[], None] = exit_at_once) -> None:
    """Run until `stop_flag` is set (or SIGINT/SIGTERM in the main thread). With leader
    election, the runtime starts only once the Lease is held; `on_lost` runs if it is lost."""
    stop = StopRequest(stop_flag)
    stop.catch_signals()  # before anything starts
    try:
        await _serve(options, stop, ready_flag, holder if holder is not None else {}, on_lost)
    finally:
        stop.release_signals()


async def _serve(options: OperatorOptions, stop: StopRequest,
                 ready_flag: asyncio.Event | threading.Event | None,
                 holder: dict[str, OperatorRuntime], on_lost: Callable[[], None]) -> None:
    credentials = load_credentials(options.kubeconfig)
    environment = OperatorEnvironment.from_environ(os.environ, own_namespace())
    identity = candidate_identity()
    kube = Kube(credentials, f"{USER_AGENT}/{__version__} ({identity})")
    elector = _elector(options, environment, kube, identity)

    startup = startup_settings(options, environment, credentials.server)
    metrics_server = _metrics_server(options, kube, environment.own_namespace)
    follow_profile = _tls_follower(metrics_server)
    if metrics_server is not None:
        await metrics_server.start()

    async def start_runtime() -> OperatorRuntime:
        runtime = OperatorRuntime(kube, environment, options.resync_seconds, startup,
                                  on_tls_profile=follow_profile)
        await runtime.start()
        holder["runtime"] = runtime
        if stop.requested.is_set():  # the stop came while it started: it stops as well
            await _stop_started_late(runtime)
        return runtime

    async def lead(elector: LeaderElector) -> None:
        """Campaign; once leading, run the runtime until the Lease is lost. A bug here must
        not leave a process that looks alive but never reconciles: it ends like a loss."""
        try:
            if metrics_server is not None:  # a standby serves its metrics too
                await _read_tls_profile(kube, follow_profile)
            await elector.acquire()
            await start_runtime()
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
    kopf_stop = asyncio.Event()
    kopf_tasks: set[asyncio.Task[Any]] = set()  # kopf's root tasks, once spawned
    stopping = [asyncio.create_task(_stop_in_order(stop, campaign, holder, kopf_stop),
                                    name="stop"),
                asyncio.create_task(_cancel_again_while_stopping(stop, kopf_tasks),
                                    name="stop: cancel again")]
    # On stop, what kopf started and still runs (its API scans retrying against a server
    # that does not answer) is cancelled at once rather than after kopf's 5 s of grace; the
    # tasks that existed before (the caller's, the campaign, the stop's) are left alone.
    registry = build_registry(start_runtime if elector is None else None, credentials, holder,
                              keep=frozenset(asyncio.all_tasks()))
    try:
        await _run_kopf(registry, options, identity, ready_flag=ready_flag, stop=stop,
                        kopf_stop=kopf_stop, kopf_tasks=kopf_tasks)
    finally:
        for task in stopping:
            task.cancel()
        await asyncio.gather(*stopping, return_exceptions=True)
        await _close(campaign, holder, elector, metrics_server, kube)


async def _stop_started_late(runtime: OperatorRuntime) -> None:
    """Stop a runtime whose start ended after the stop began. OperatorRuntime.stop() awaits
    its tasks ignoring CancelledError, its caller's too: a start-up cancelled meanwhile
    (kopf's, or the campaign) must still end."""
    await runtime.stop()
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError


async def _close(campaign: asyncio.Task[None] | None, holder: dict[str, OperatorRuntime],
                 elector: LeaderElector | None, metrics_server: MetricsServer | None,
                 kube: Kube) -> None:
    """The last of a stop (what `_stop_in_order` did is done again if it did not get to
    it): the campaign and the runtime stop before the Lease is released, so that no write
    of ours can follow the release."""
    await _stop_campaign(campaign)
    runtime = holder.get("runtime")
    if runtime is not None:
        await runtime.stop()
    if elector is not None:
        await elector.release()
    if metrics_server is not None:
        await metrics_server.stop()
    await kube.close()


async def _run_kopf(registry: kopf.OperatorRegistry, options: OperatorOptions, identity: str,
                    *, ready_flag: asyncio.Event | threading.Event | None, stop: StopRequest,
                    kopf_stop: asyncio.Event, kopf_tasks: set[asyncio.Task[Any]]) -> None:
    """kopf.operator(), with our signal handlers put back once kopf installed its own; it
    stops when `kopf_stop` is set. `kopf_tasks` gets kopf's root tasks."""
    existing = frozenset(asyncio.all_tasks()) - {asyncio.current_task()}
    # kopf's own identity would come from getpass, which raises for a UID that /etc/passwd
    # lacks (runAsUser on a runtime that adds no entry); ours needs none.
    kopf_tasks.update(await kopf.spawn_tasks(
        registry=registry, clusterwide=True, standalone=True,
        identity=cast(Any, identity),  # kopf's NewType of str
        liveness_endpoint=options.liveness_endpoint, stop_flag=kopf_stop,
        ready_flag=ready_flag))
    # No await since kopf's handlers went in: a signal that came meanwhile waits in the
    # loop's wake-up pipe and reaches the handler in place when the loop reads it, ours.
    stop.catch_signals()
    await kopf.run_tasks(kopf_tasks, ignored=existing)


async def _stop_in_order(stop: StopRequest, campaign: asyncio.Task[None] | None,
                         holder: dict[str, OperatorRuntime], kopf_stop: asyncio.Event) -> None:
    """At the stop: the campaign first (no runtime starts from then on: `start_runtime`
    stops one that was starting), then the runtime, then kopf. The Lease is released after
    kopf returned (`_serve`)."""
    await stop.wait()
    await _stop_campaign(campaign)
    runtime = holder.get("runtime")
    if runtime is not None:
        await runtime.stop()
    kopf_stop.set()


async def _cancel_again_while_stopping(stop: StopRequest,
                                       spared: Collection[asyncio.Task[Any]]) -> None:
    """Once the stop began, cancel again every task that was asked to cancel but still runs
    RECANCEL_SECONDS later (module docstring), except `spared` (kopf's root tasks, which go
    on running their clean-up while cancelled)."""
    await stop.wait()
    suspects: set[asyncio.Task[Any]] = set()
    while True:
        await asyncio.sleep(RECANCEL_SECONDS)
        current = asyncio.current_task()
        cancelling = {task for task in asyncio.all_tasks()
                      if task.cancelling() and not task.done() and task is not current
                      and task not in spared}
        for task in cancelling & suspects:
            logger.info("action=stop result=cancel-again task=%r", task.get_name())
            task.cancel()
        suspects = cancelling


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
                         access=MetricsAccess(kube, METRICS_PATH))


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
