"""The operator's moving parts around one reconcile worker.

    ESC/ESM and their CRDs   ─┐
    child/dependency watches ─┼─► ReconcileQueue ─► worker: Reconciler.run_pass() ─► Watcher
    periodic resync          ─┘        ▲                    │
                                       └── retry (backoff) ─┘

The watches of the two custom resources are always on, whatever a pass asks for: together
with the watches of their CRDs they make the start order irrelevant. If the CRDs appear after
the operator started, or are deleted and created again, the CRD watch makes the operator look
the kind up again and the ESC/ESM watches resume, so an ESC created afterwards is reconciled
at once, not at the next resync.

Exactly one pass runs at a time. After each pass the worker points the Watcher at what that
pass said to watch, and schedules a retry, with the backoff of backoff.py, only when nothing
it watches is sure to announce the way out: a transient error (Retrying), a Degraded outcome
(the fix may be a change nobody watches, such as a foreign object or an admission policy
that refuses a write), or a failed side task (the CRD annotator, the upgrade gate, the
operator's own monitoring). A pass that waits for the operand (Progressing) schedules no
retry: what it waits for (Deployments, Certificates, the webhook configurations, the
operand's pods, the served CA) is watched, so an idle, waiting operator sends no request.
A pass that knows that time alone will change its outcome (the end of a CA overlap,
ca_overlap.py; a stale caBundle outlasting its grace, readiness.py) asks for one recheck at
that moment. The periodic resync stays the safety net for an event that was missed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from manager import metrics
from manager.apply import Discovery
from manager.apply.cache import ObjectCache
from manager.client.kube import ApiError, JsonObject, Kube
from manager.client.watch_spec import WatchSpec
from manager.config import OperatorEnvironment
from manager.logs import fields
from manager.names import (
    API_VERSION,
    CRD_API_VERSION,
    CRD_KIND,
    ESC_KIND,
    ESC_PATH,
    ESC_PLURAL,
    ESM_KIND,
    ESM_PLURAL,
    GROUP,
    SINGLETON_NAME,
)
from manager.render import templates
from manager.reporting.events import EventRecorder
from manager.reporting.status import OutcomeKind
from manager.runtime.backoff import RETRY_REASON, Backoff
from manager.runtime.pass_watches import CHILD_CRD_WATCHES, CHILD_WATCHES
from manager.runtime.queue import ReconcileQueue
from manager.runtime.reconciler import PassReport, Reconciler
from manager.runtime.watches import Watcher
from manager.steps.facts import TLS_PROFILE_WATCHES
from manager.steps.uninstall import operand_namespace_of
from manager.tls_profile import INTERMEDIATE, TLSProfile

logger = logging.getLogger(__name__)

DEFAULT_RESYNC_SECONDS = 300.0


def _own_resource_watches() -> frozenset[WatchSpec]:
    """The ESC and the ESM (by name, whole: the passes read them from the cache) and the CRDs
    that serve them."""
    by_name = f"metadata.name={SINGLETON_NAME}"
    specs = {WatchSpec(API_VERSION, kind, field_selector=by_name, whole=True, cached=True)
             for kind in (ESC_KIND, ESM_KIND)}
    specs.update(WatchSpec(CRD_API_VERSION, CRD_KIND, any_change=True,
                           field_selector=f"metadata.name={plural}.{GROUP}")
                 for plural in (ESC_PLURAL, ESM_PLURAL))
    return frozenset(specs)


OWN_RESOURCE_WATCHES = _own_resource_watches()


STANDING_WATCHES = (OWN_RESOURCE_WATCHES | CHILD_WATCHES | CHILD_CRD_WATCHES
                    | TLS_PROFILE_WATCHES)
"""What is watched from start-up to shutdown; a pass adds its dependencies' watches."""
_FINE = frozenset({OutcomeKind.READY.value, OutcomeKind.PROGRESSING.value,
                   OutcomeKind.UNMANAGED.value, OutcomeKind.REMOVED.value, "NoConfig"})


@dataclass(frozen=True)
class PassSummary:
    """The latest pass, for the liveness probe and for tests."""

    number: int
    finished_at: float
    result: str
    writes: int


class OperatorRuntime:
    def __init__(self, kube: Kube, environment: OperatorEnvironment,
                 resync_seconds: float = DEFAULT_RESYNC_SECONDS,
                 startup: tuple[Mapping[str, object], Mapping[str, object]] = ({}, {}),
                 on_tls_profile: Callable[[TLSProfile], None] = lambda _profile: None):
        self.kube = kube
        self.discovery = Discovery(kube)
        self.queue = ReconcileQueue()
        self.cache = ObjectCache()
        self.watcher = Watcher(kube, self.discovery, self._child_changed, self.cache)
        self.reconciler = Reconciler(kube, self.discovery, environment,
                                     EventRecorder(kube), self.cache)
        self.resync_seconds = resync_seconds
        self.startup = startup
        """What the start-up lines report: who and where (the operand namespace is added
        once read), then the settings in effect."""
        self.tls_profile: TLSProfile = INTERMEDIATE
        """The cluster's TLS security profile, read at start and by every pass, for the
        operator's own TLS servers: `on_tls_profile` hears of every change."""
        self._on_tls_profile = on_tls_profile
        self.last_pass: PassSummary | None = None
        self.passes_done = asyncio.Condition()
        self._tasks: list[asyncio.Task[None]] = []
        self.backoff = Backoff()

    # --- lifecycle ----------------------------------------------------------------------

    async def start(self) -> None:
        """Say what runs where with which settings (the first log lines), create the ESM if
        it is missing, and start the watches and the worker."""
        esc: JsonObject | ApiError | None
        try:
            esc = await self.kube.get(ESC_PATH)
        except ApiError as error:  # the first pass tries again
            esc = error
        identity, settings = self.startup
        logger.info("action=start %s", fields({"operandNamespace": _operand_namespace(esc),
                                                **identity}))
        logger.info("action=settings %s", fields(settings))
        self.reconciler.gate.announce()
        try:  # before any pass: what the operator's own servers start with
            self._follow(await self.reconciler.facts.tls_profile())
        except ApiError as error:  # the first pass reads it again
            logger.warning("action=read result=error kind=APIServer error=%r", str(error))
        try:
            await self.reconciler.ensure_esm()
        except ApiError as error:  # the first pass tries again
            logger.warning("action=create result=error kind=ExternalSecretsManager error=%r",
                           str(error))
        self.watcher.set_specs(STANDING_WATCHES)
        self._tasks = [asyncio.create_task(self._work(), name="reconcile worker"),
                       asyncio.create_task(self._resync(), name="periodic resync")]
        self.queue.request("start")

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []
        await self.watcher.stop()

    # --- triggers -----------------------------------------------------------------------

    def _child_changed(self, _spec: WatchSpec, reason: str) -> None:
        """A watch saw a change (a CRD watch has already told discovery: watches.py)."""
        self.queue.request(reason)

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.resync_seconds)
            self.queue.request("periodic resync")

    # --- the worker ---------------------------------------------------------------------

    async def _work(self) -> None:
        number = 0
        while True:
            reasons = await self.queue.next_batch()
            number += 1
            started = time.monotonic()
            report = await self._run_pass()
            result, writes, retry = self._schedule_retry(report, RETRY_REASON in reasons)
            metrics.record_pass(result, time.monotonic() - started)
            # Anything but a pass that ends well, or waits for the operand to roll out, is a
            # warning; its message is in the status and Events.
            level = logging.INFO if result in _FINE else logging.WARNING
            logger.log(level, "action=pass number=%d result=%s writes=%d seconds=%.3f%s "
                       "reasons=%s", number, result, writes, time.monotonic() - started,
                       f" retry_in={retry:.1f}s" if retry is not None else "",
                       ",".join(sorted(reasons)))
            async with self.passes_done:
                self.last_pass = PassSummary(number, time.monotonic(), result, writes)
                self.passes_done.notify_all()
            if number == 1:  # off the event loop: watches and probes go on meanwhile
                await asyncio.to_thread(templates.warm_up)

    async def _run_pass(self) -> PassReport | None:
        """One pass and the watches it asks for; any failure ends as a retried pass, never
        as a dead worker."""
        try:
            report = await self.reconciler.run_pass()
            self._follow(report.tls_profile)
            self.watcher.set_specs(STANDING_WATCHES | report.watches)
            return report
        except ApiError as error:  # reading the CRs or writing status failed
            logger.warning("action=reconcile result=error error=%r", str(error))
        except Exception:  # a bug must not stop the operator; it is retried with backoff
            logger.exception("action=reconcile result=crash")
        return None

    def _follow(self, profile: TLSProfile) -> None:
        if profile != self.tls_profile:
            self.tls_profile = profile
            self._on_tls_profile(profile)

    def _schedule_retry(self, report: PassReport | None, retrying: bool,
                        ) -> tuple[str, int, float | None]:
        """The pass's result, its number of writes, and the delay of the retry scheduled."""
        if report is not None and not report.needs_retry:  # settled, or waiting on watches
            self.backoff = Backoff()
            result = report.outcome.kind.value if report.outcome else "NoConfig"
            if report.recheck_in is not None:  # nothing will say when the time has come
                self.queue.request_after(report.recheck_in, "recheck")
            return result, len(report.writes), None
        kind = (report.outcome.kind if report is not None and report.outcome is not None
                else OutcomeKind.RETRYING)
        self.backoff, delay = self.backoff.after(kind, retrying)
        self.queue.request_after(delay, RETRY_REASON)
        if report is None:
            return "Error", 0, delay
        result = report.outcome.kind.value if report.outcome else "NoConfig"
        return result, len(report.writes), delay

    async def wait_for_pass(self, after: int = 0, timeout: float = 30.0) -> PassSummary:
        """The first pass numbered above `after` (for tests and the demo)."""
        async with self.passes_done, asyncio.timeout(timeout):  # not wait_for: gh-86296
            await self.passes_done.wait_for(
                lambda: self.last_pass is not None and self.last_pass.number > after)
        assert self.last_pass is not None
        return self.last_pass


def _operand_namespace(esc: JsonObject | ApiError | None) -> str:
    if isinstance(esc, ApiError):
        return "unknown (the API server did not answer)"
    if esc is None:
        return "none (no ExternalSecretsConfig yet)"
    return operand_namespace_of(esc)
