"""One level-based pass: read both CRs, converge the cluster, record the outcome.

    ESC + ESM + environment ─► EffectiveConfig ─► render ─► observe ─► decide ─► apply,
                                (ConfigError)                                  prune ─► status

`observe` reads every rendered object, the preflight's missing dependencies and our objects
no longer rendered; `decide` (pass_decision.py, pure, shared with `plan`) says what to write,
hold back and delete; this module executes it and reports. The pass reads everything it
needs afresh, so it does not matter what triggered it, how many triggers were coalesced, or
whether the operator restarted in between. It writes nothing when the cluster already
matches (see manager.apply.convergence), and it never deletes anything when the spec is
invalid or a dependency is missing.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from manager import metrics
from manager.api.models import ExternalSecretsManagerSpec
from manager.apply import (
    Action,
    Applier,
    Discovery,
    ObjectError,
    ObjectRef,
    ObjectResult,
    Observed,
    Pruner,
)
from manager.apply.cache import ObjectCache
from manager.client.kube import ApiError, JsonObject, Kube
from manager.client.watch_spec import WatchSpec
from manager.config import (
    OPERAND_MONITORING,
    ConfigError,
    EffectiveConfig,
    OperatorEnvironment,
    config_of_objects,
    feature_enabled,
)
from manager.errors import PassError
from manager.management import REMOVED, UNMANAGED, management_state
from manager.names import (
    ESC_KIND,
    ESC_PATH,
    WEBHOOK_CERTIFICATE,
)
from manager.render import DesiredState, render_operand
from manager.render.state import apply_stage
from manager.reporting import status
from manager.reporting.esm_status import AnnotatorReport
from manager.reporting.events import EventRecorder
from manager.reporting.failures import failed_outcome
from manager.reporting.outcomes import (
    drift_of_decision,
    operand_outcome,
    removal_outcome,
    unmanaged_outcome,
    with_removed_providers,
)
from manager.reporting.status import Outcome, OutcomeKind
from manager.reporting.writer import StatusWriter
from manager.runtime.pass_watches import OPERAND_CRD_CHANGES, operand_crd_watch, operand_pod_watch
from manager.sidetasks.console_quickstart import ConsoleQuickStart
from manager.sidetasks.crd_annotator import CrdAnnotator
from manager.sidetasks.esm_default import ensure_esm
from manager.sidetasks.operator_monitoring import MonitoringReport, OperatorMonitoring
from manager.sidetasks.upgrade_gate import OPERATOR_CONDITIONS_CRD, Gate, UpgradeGate, decide
from manager.steps import pass_decision, readiness
from manager.steps.facts import ClusterFacts
from manager.steps.observe import observe, read_singleton
from manager.steps.operand_readiness import OperandReadiness, record_webhook_certificate
from manager.steps.pass_decision import Observation, Unwanted
from manager.steps.preflight import (
    Preflight,
    crd_watch,
    dependency_watches,
)
from manager.steps.removed_providers import RemovedProviders, StoreOnRemovedProvider
from manager.steps.uninstall import execute_uninstall, operand_namespace_of, plan_uninstall
from manager.tls_profile import INTERMEDIATE, TLSProfile

logger = logging.getLogger(__name__)

REMOVED_CAUSE = "managementState is Removed"
WEBHOOK_CERTIFICATE_REF = ObjectRef("cert-manager.io/v1", "Certificate", "", WEBHOOK_CERTIFICATE)


@dataclass
class Branch:
    """How the pass's branch for the ESC's managementState ended: everything the pass then
    reports (status, Events) and hands to the worker. The watches are always stated: an
    invalid spec or a removal watches nothing of the operand."""

    outcome: Outcome
    config: EffectiveConfig | None = None
    watches: frozenset[WatchSpec] = frozenset()
    writes: list[ObjectResult] = field(default_factory=list)
    annotator: AnnotatorReport | ApiError | None = None
    cause: str | None = None  # why the pass changed things when the spec did not
    recheck_at: float | None = None  # when time alone changes the readiness (epoch seconds)
    desired: DesiredState | None = None  # the rendered operand (status.relatedObjects)


@dataclass
class PassReport:
    """What the worker needs from a pass: how it ended and what to watch until the next."""

    outcome: Outcome | None  # None: there is no ESC to manage
    watches: frozenset[WatchSpec]
    writes: list[ObjectResult] = field(default_factory=list)
    annotator_failed: bool = False
    recheck_in: float | None = None
    """Seconds until the outcome changes by time alone (a CA overlap ends, a stale caBundle
    outlasts its grace), when it will."""
    tls_profile: TLSProfile = INTERMEDIATE
    """The cluster's TLS security profile this pass saw (for the operator's own servers)."""
    gate_failed: bool = False
    """The upgrade gate could not be read or published (upgrade_gate.py)."""
    monitoring_failed: bool = False
    """The operator's own ServiceMonitor or PrometheusRule could not be read or written."""

    @property
    def needs_retry(self) -> bool:
        """Whether only time can tell when to look again. Not while the operand rolls out
        (Progressing): everything readiness.py waits for is watched, and `recheck_in`
        covers what time alone changes, so a waiting operator sends no request."""
        return self.annotator_failed or self.gate_failed or self.monitoring_failed or (
            self.outcome is not None and not self.outcome.kind.settled
            and self.outcome.kind is not OutcomeKind.PROGRESSING)


class Reconciler:
    def __init__(self, kube: Kube, discovery: Discovery, environment: OperatorEnvironment,
                 events: EventRecorder, cache: ObjectCache):
        self.kube = kube
        self.discovery = discovery
        self.environment = environment
        self.events = events
        self.cache = cache
        self.applier = Applier(kube, discovery, cache)
        self.pruner = Pruner(kube, discovery, cache)
        self.preflight = Preflight(kube, discovery)
        self.facts = ClusterFacts(kube, discovery, cache)
        self.annotator = CrdAnnotator(kube)
        self.gate = UpgradeGate(kube, discovery, cache, environment.operator_condition,
                                environment.own_namespace)
        self.operator_monitoring = OperatorMonitoring(kube, discovery,
                                                      environment.own_namespace)
        self.quickstart = ConsoleQuickStart(kube, discovery)
        self.operand = OperandReadiness(kube)
        self.removed_providers = RemovedProviders(kube, discovery, cache)
        self.status = StatusWriter(kube, cache, events)
        self._monitoring: MonitoringReport | None = None  # this pass's, for the ESM status
        self._managing_uid: str | None = None  # the ESC this process has managed, if any

    # --- the pass -----------------------------------------------------------------------

    async def run_pass(self) -> PassReport:
        esm = await self.ensure_esm()
        monitoring_failed = await self._reconcile_operator_monitoring(esm)
        monitoring_failed |= await self._reconcile_quickstart()  # both side tasks: a retry
        esc = await read_singleton(self.kube, self.cache, ESC_KIND, ESC_PATH)
        if esc is None or esc["metadata"].get("deletionTimestamp"):
            await self.status.no_esc(esc, esm, self._managing_uid, self._feature_note())
            self._managing_uid = None
            metrics.record_webhook_certificate(None)
            gate_failed = False
            if self.gate.active:  # no ESC to tell: only OLM's OperatorCondition
                gate = await self._gate(None, None, "", await self._removed_provider_stores())
                gate_failed = await self._publish_gate(gate)
            return PassReport(None, self._gate_watches(), tls_profile=await
                              self.facts.tls_profile(), gate_failed=gate_failed,
                              monitoring_failed=monitoring_failed)
        self._managing_uid = esc["metadata"]["uid"]
        state = management_state(esc)
        branch = (await self._observe(esc, esm) if state == UNMANAGED
                  else await self._remove(esc) if state == REMOVED
                  else await self._converge(esc, esm))
        config, stores = branch.config, await self._removed_provider_stores()
        outcome = with_removed_providers(branch.outcome, stores or ())
        listed = (dict(branch.annotator.listed) if isinstance(branch.annotator, AnnotatorReport)
                  else None)
        gate = await self._gate(outcome, config, state, stores, listed)
        fields = status.esc_fields(config, outcome, branch.desired, self.environment)
        await self.status.esc(esc, outcome, fields,
                              gate.condition if gate else None)
        await self.status.esm(esm, esc, outcome, branch.annotator, config,
                              feature_note=self._feature_note(config))
        await self.status.pass_events(esc, outcome, branch.writes, config, branch.cause)
        metrics.record_writes((result.action.value, result.ref.kind) for result in branch.writes)
        gate_failed = await self._publish_gate(gate) or gate is None
        profile = config.tls_profile if config else await self.facts.tls_profile()
        # The ESC's Upgradeable follows the operand CRDs' storedVersions and the stores'
        # providers, with OLM or without.
        return PassReport(outcome, branch.watches | self._gate_watches() | {OPERAND_CRD_CHANGES}
                          | self.removed_providers.watches(), branch.writes,
                          isinstance(branch.annotator, ApiError),
                          _recheck_in(config, branch.recheck_at), profile,
                          gate_failed, monitoring_failed)

    async def _reconcile_operator_monitoring(self, esm: JsonObject) -> bool:
        """The operator's own ServiceMonitor and PrometheusRule (operator_monitoring.py);
        whether that failed (the pass is then retried)."""
        try:
            spec = ExternalSecretsManagerSpec.model_validate(esm.get("spec") or {})
        except ValidationError:  # reported as InvalidGlobalConfig: change nothing
            self._monitoring = None
            return False
        try:
            self._monitoring = await self.operator_monitoring.reconcile(
                feature_enabled(spec, OPERAND_MONITORING))
        except ApiError as error:
            logger.warning("action=operator-monitoring result=error error=%r", str(error))
            self.operator_monitoring.forget()
            self._forget_apis(error)
            return True
        return False

    async def _reconcile_quickstart(self) -> bool:
        """The operator's ConsoleQuickStart where the console serves the kind
        (console_quickstart.py); whether that failed (the pass is then retried)."""
        try:
            await self.quickstart.reconcile()
        except ApiError as error:
            logger.warning("action=console-quickstart result=error error=%r", str(error))
            self._forget_apis(error)
            return True
        return False

    async def _removed_provider_stores(self) -> list[StoreOnRemovedProvider] | None:
        """The stores on a provider the next operand release no longer has
        (steps/removed_providers.py); None when they could not be read."""
        try:
            return await self.removed_providers.stores()
        except ApiError as error:
            logger.warning("action=removed-providers result=error error=%r", str(error))
            self._forget_apis(error)
            return None

    async def _gate(self, outcome: Outcome | None, config: EffectiveConfig | None, state: str,
                    stores: Sequence[StoreOnRemovedProvider] | None,
                    listed: dict[str, str] | None = None) -> Gate | None:
        """Whether the operator may be upgraded (upgrade_gate.decide), for the ESC's status
        and OLM's OperatorCondition alike; None when what it depends on could not be read
        (`stores` None, or the operand CRDs): what was said stands until a retry can tell.
        `listed`: the operand CRDs as the CRD annotator listed them in this pass."""
        if stores is None:
            return None
        try:
            unserved = await self.gate.stored_versions.unserved(listed)
        except ApiError as error:
            logger.warning("action=upgrade-gate result=error error=%r", str(error))
            self._forget_apis(error)
            return None
        return decide(outcome, config, state, unserved, stores)

    async def _publish_gate(self, gate: Gate | None) -> bool:
        """Tell OLM the decision, where OLM asked for it (upgrade_gate.py); whether that
        failed (the pass is then retried)."""
        if not self.gate.active:
            return False
        if gate is None:
            return True
        try:
            await self.gate.publish(gate)
        except ApiError:  # logged once by the gate
            return True
        return False

    def _gate_watches(self) -> frozenset[WatchSpec]:
        """With the gate on, a change of an operand CRD (its storedVersions) is a trigger,
        and so are the OperatorCondition API coming (or going) and a store's provider."""
        watch = self.gate.watch()
        if watch is None:
            return frozenset()
        return frozenset({OPERAND_CRD_CHANGES, crd_watch(OPERATOR_CONDITIONS_CRD), watch}
                         | self.removed_providers.watches())

    async def _observe(self, esc: JsonObject, esm: JsonObject) -> Branch:
        """managementState Unmanaged: decide as a Managed pass would, report what it would
        change, write nothing. The watches stay, so drift is reported as it happens."""
        try:
            config = await self.facts.complete(self._effective_config(esc, esm))
            desired = render_operand(config)
            watches = frozenset(dependency_watches(config))
            decision = pass_decision.decide(await self._observation(config, desired))
            drift = drift_of_decision(decision)
        except PassError as problem:
            self._forget_apis(problem)
            return Branch(failed_outcome(problem))
        return Branch(unmanaged_outcome(drift), config, watches, desired=desired)

    async def _remove(self, esc: JsonObject) -> Branch:
        """managementState Removed: delete what the operator created (Namespaces aside, see
        manager.steps.uninstall), release the CRD annotations, and say what is left."""
        self.status.converged = None  # what comes back is a new installation
        try:
            writes: list[ObjectResult] = []
            plan = await plan_uninstall(self.kube, namespaces=False)
            report = await execute_uninstall(self.kube, plan, force=True)
            writes.extend(ObjectResult(ref, Action.DELETED) for ref in report.deleted)
            released = await self.annotator.reconcile(False, operand_namespace_of(esc))
            writes.extend(released.results)
            left = await plan_uninstall(self.kube, namespaces=False)
        except ApiError as error:
            return Branch(failed_outcome(error), cause=REMOVED_CAUSE)
        metrics.record_managed(())
        metrics.record_webhook_certificate(None)
        return Branch(removal_outcome(report, left), writes=writes, cause=REMOVED_CAUSE)

    async def ensure_esm(self) -> JsonObject:
        return await ensure_esm(self.kube, self.cache)

    async def _converge(self, esc: JsonObject, esm: JsonObject) -> Branch:
        """managementState Managed: apply the desired state, prune, report readiness."""
        try:
            config = self._effective_config(esc, esm)
        except ConfigError as error:  # nothing is written while the spec is wrong
            return Branch(failed_outcome(error))
        writes: list[ObjectResult] = []
        watches: frozenset[WatchSpec] = frozenset()
        desired: DesiredState | None = None
        try:
            config = await self.facts.complete(config)
            desired = render_operand(config)
            watches = frozenset(dependency_watches(config) | operand_crd_watch(config)
                                | {operand_pod_watch(config.namespace)})
            decision = pass_decision.decide(await self._observation(config, desired))
            if decision.refusal is not None:
                raise decision.refusal
            await self._write(decision.namespace, writes)
            applied = await self._write(decision.apply, writes)
            if decision.blocked is not None:  # degraded: nothing is deleted
                raise decision.blocked
            operand = (await self.operand.read(config, applied)
                       + readiness.being_deleted([o.ref for o in decision.waiting]))
            await self._delete(decision.prune, writes)
            if decision.deferred and not await self.operand.cert_controller_held(config,
                                                                                   applied):
                await self._delete(decision.deferred, writes)
            metrics.record_managed(str(obj["kind"]) for obj in desired.objects())
        except PassError as problem:
            self._forget_apis(problem)
            return Branch(failed_outcome(problem), config, watches, writes, desired=desired)
        annotator = await self._annotate(config, writes)
        count = len(list(desired.objects()))
        return Branch(operand_outcome(config, operand, count), config, watches, writes,
                      annotator, recheck_at=operand.until, desired=desired)

    async def _observation(self, config: EffectiveConfig, desired: DesiredState) -> Observation:
        observation = await observe(config, desired, self.applier, self.preflight, self.pruner)
        record_webhook_certificate(config, observation.observed)
        return observation

    def _effective_config(self, esc: JsonObject, esm: JsonObject) -> EffectiveConfig:
        return config_of_objects(esc, esm, self.environment)

    async def _write(self, objects: Sequence[Observed],
                     writes: list[ObjectResult]) -> list[ObjectResult]:
        """Apply stage after stage (render.state.APPLY_STAGES), the objects of one stage at
        once (they do not refer to each other). A failure ends the pass once its stage is
        done; the first one, in order, is raised."""
        results: list[ObjectResult] = []
        for _, group in itertools.groupby(objects, key=lambda o: apply_stage(o.ref.kind)):
            outcomes = await asyncio.gather(*(self.applier.write(o) for o in group),
                                            return_exceptions=True)
            done = [outcome for outcome in outcomes if isinstance(outcome, ObjectResult)]
            results += done
            writes += [result for result in done if result.wrote]
            failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
            if failed is not None:
                raise failed
        return results

    async def _delete(self, unwanted: Sequence[Unwanted], writes: list[ObjectResult]) -> None:
        for resource, obj in unwanted:
            writes.append(await self.pruner.delete(resource, obj))

    async def _annotate(self, config: EffectiveConfig,
                        writes: list[ObjectResult]) -> AnnotatorReport | ApiError:
        """The CRD annotator's share of the pass; its failure does not fail the operand."""
        try:
            report = await self.annotator.reconcile(
                config.cert_manager.add_injector_annotations, config.namespace)
        except ApiError as error:
            logger.warning("action=annotate-crds result=error error=%r", str(error))
            return error
        writes.extend(report.results)
        return report

    def _forget_apis(self, problem: Exception) -> None:
        """An API that answers 404 may have gone: look the kinds up again next pass."""
        error = problem.error if isinstance(problem, ObjectError) else problem
        if isinstance(error, ApiError) and error.not_found:
            self.discovery.invalidate()

    # --- status -------------------------------------------------------------------------

    def _feature_note(self, config: EffectiveConfig | None = None) -> str | None:
        """The OperandMonitoring note: the operator's side and, with `config` (the pass's,
        cluster facts included), whether anything scrapes the operand's namespace."""
        return self._monitoring.note_for(config) if self._monitoring is not None else None


# --- helpers --------------------------------------------------------------------------------

def _recheck_in(config: EffectiveConfig | None, readiness_at: float | None) -> float | None:
    """Seconds until the earliest moment time alone changes the outcome: the end of a CA
    overlap, or a stale caBundle's grace running out."""
    overlap = config.cert_manager.overlap_until if config is not None else None
    moments = [moment for moment in (overlap, readiness_at) if moment is not None]
    return max(1.0, min(moments) - time.time()) if moments else None
