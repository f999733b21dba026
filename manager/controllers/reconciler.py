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
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from manager import __version__, metrics
from manager.api.models import ExternalSecretsManagerSpec, Failure
from manager.apply import (
    MANAGED_SELECTOR,
    Action,
    Applier,
    Discovery,
    ForeignObjectsError,
    ObjectError,
    ObjectRef,
    ObjectResult,
    Observed,
    Pruner,
    TerminatingObjectError,
)
from manager.apply.cache import ObjectCache
from manager.config import (
    OPERAND_MONITORING,
    ConfigError,
    EffectiveConfig,
    OperatorEnvironment,
    config_of_objects,
    feature_enabled,
)
from manager.constants import (
    API_VERSION,
    ESC_KIND,
    ESC_PATH,
    ESM_KIND,
    ESM_PATH,
    FIELD_MANAGER,
    GROUP,
    MANAGED_BY_LABEL,
    OPERATOR_NAME,
    SINGLETON_NAME,
)
from manager.controllers import esm_status, pass_decision, readiness, status, summary
from manager.controllers.crd_annotator import OPERAND_CRD_LABEL, AnnotatorReport, CrdAnnotator
from manager.controllers.events import EventRecorder, EventSpec, now_rfc3339
from manager.controllers.facts import ClusterFacts
from manager.controllers.failures import failed_outcome
from manager.controllers.management_outcomes import (
    drift_of_decision,
    removal_outcome,
    unmanaged_outcome,
)
from manager.controllers.operator_monitoring import MonitoringReport, OperatorMonitoring
from manager.controllers.pass_decision import Observation, Unwanted
from manager.controllers.pass_events import Before, pass_events
from manager.controllers.preflight import (
    CERT_MANAGER_CRDS,
    CRD_API_VERSION,
    CRD_KIND,
    MONITORING_CRDS,
    MissingDependencyError,
    Preflight,
    crd_watch,
    dependency_watches,
)
from manager.controllers.status import ControllerState, Outcome, OutcomeKind
from manager.controllers.upgrade_gate import OPERATOR_CONDITIONS_CRD, UpgradeGate, decide
from manager.controllers.watches import WatchSpec
from manager.kube import PARTIAL_METADATA, ApiError, JsonObject, Kube
from manager.logs import brief
from manager.management import REMOVED, UNMANAGED, management_state
from manager.render import DesiredState, render_operand
from manager.render.context import WEBHOOK_SECRET_CERT_MANAGER, webhook_secret
from manager.render.state import apply_stage, renderable_kinds
from manager.tls_profile import INTERMEDIATE, TLSProfile
from manager.uninstall import execute_uninstall, operand_namespace_of, plan_uninstall

logger = logging.getLogger(__name__)

REMOVED_CAUSE = "managementState is Removed"
WEBHOOK_CERTIFICATE = ObjectRef("cert-manager.io/v1", "Certificate", "", "external-secrets-webhook")


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


def esm_default_object() -> JsonObject:
    """The ExternalSecretsManager the operator creates when there is none."""
    version = os.environ.get("OPERATOR_IMAGE_VERSION") or __version__
    return {
        "apiVersion": API_VERSION,
        "kind": ESM_KIND,
        "metadata": {
            "name": SINGLETON_NAME,
            "labels": {
                "app.kubernetes.io/name": SINGLETON_NAME,
                "app.kubernetes.io/instance": SINGLETON_NAME,
                "app.kubernetes.io/version": version,
                MANAGED_BY_LABEL: OPERATOR_NAME,
                "app.kubernetes.io/part-of": OPERATOR_NAME,
            },
        },
        "spec": {},
    }


# Kinds whose status decides Ready (readiness.py): watched whole, so status changes count.
STATUS_KINDS = frozenset({"Deployment", "Certificate", "ValidatingWebhookConfiguration"})


CHILD_WATCHES = frozenset(
    WatchSpec(api_version, kind, label_selector=MANAGED_SELECTOR,
              with_status=kind in STATUS_KINDS, cached=True)
    for api_version, kind in renderable_kinds())
"""One watch per kind the renderer can produce, selected by the managed-by label, in every
namespace: the operator's own objects wherever they are (an operating namespace's Role, what a
moved operand left behind). They run from start-up, whatever the ESC says, and feed the
ObjectCache, so that even the first pass over a new ESC reads nothing it can know."""

def operand_pod_watch(namespace: str) -> WatchSpec:
    """The operand's pods, by the managed-by label their templates carry, in the operand
    namespace: their status explains a Deployment that is not available (readiness.py), so a
    change of it (scheduled, a container's waiting reason, a restart) must wake a pass. Not
    cached: the watch keeps one digest per pod (watches.pod_digest)."""
    return WatchSpec("v1", "Pod", namespace, label_selector=MANAGED_SELECTOR, with_status=True)


OPERAND_CRD_CHANGES = WatchSpec(CRD_API_VERSION, CRD_KIND, label_selector=OPERAND_CRD_LABEL,
                                any_change=True)
"""Any change of an operand CRD, status included (its storedVersions: the upgrade gate)."""

CHILD_CRD_WATCHES = frozenset(
    {crd_watch(CERT_MANAGER_CRDS[kind])
     for _, kind in renderable_kinds() if kind in CERT_MANAGER_CRDS}
    | {crd_watch(name) for name in MONITORING_CRDS})
"""The CRDs of the child kinds add-ons serve (cert-manager's Certificate, the Prometheus
Operator's ServiceMonitor and PrometheusRule): their arrival ends the wait of those kinds'
child watches (watches.FIRST_RECHECK)."""


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
        self._monitoring: MonitoringReport | None = None  # this pass's, for the ESM status
        self._managing_uid: str | None = None  # the ESC this process has managed, if any
        self._converged: EffectiveConfig | None = None  # of the last pass that applied all
        # The served CA by (Secret path, resourceVersion): a steady pass reads no Secret.
        self._serving_ca_seen: tuple[_SecretVersion, readiness.ServingCA | None] | None = None

    # --- the pass -----------------------------------------------------------------------

    async def run_pass(self) -> PassReport:
        esm = await self.ensure_esm()
        monitoring_failed = await self._reconcile_operator_monitoring(esm)
        esc = await self._singleton(ESC_KIND, ESC_PATH)
        if esc is None or esc["metadata"].get("deletionTimestamp"):
            await self._esc_absent(esc, esm)
            gate_failed = await self._publish_gate(None, None, "")
            return PassReport(None, self._gate_watches(), tls_profile=await
                              self.facts.tls_profile(), gate_failed=gate_failed,
                              monitoring_failed=monitoring_failed)
        self._managing_uid = esc["metadata"]["uid"]
        state = management_state(esc)
        branch = (await self._observe(esc, esm) if state == UNMANAGED
                  else await self._remove(esc) if state == REMOVED
                  else await self._converge(esc, esm))
        outcome, config = branch.outcome, branch.config
        await self._write_esc_status(esc, outcome, status.esc_fields(config, outcome))
        await self._write_esm_status(esm, esc, outcome, branch.annotator, config)
        await self._post_events(esc, outcome, branch.writes, config, branch.cause)
        metrics.record_writes((result.action.value, result.ref.kind) for result in branch.writes)
        gate_failed = await self._publish_gate(outcome, config, state)
        profile = config.tls_profile if config else await self.facts.tls_profile()
        return PassReport(outcome, branch.watches | self._gate_watches(), branch.writes,
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

    async def _publish_gate(self, outcome: Outcome | None, config: EffectiveConfig | None,
                            state: str) -> bool:
        """Tell OLM whether the operator may be upgraded (upgrade_gate.py); whether that
        failed (the pass is then retried)."""
        if not self.gate.active:
            return False
        try:
            unserved = await self.gate.stored_versions.unserved()
            await self.gate.publish(decide(outcome, config, state, unserved))
        except ApiError:  # logged once by the gate
            return True
        return False

    def _gate_watches(self) -> frozenset[WatchSpec]:
        """With the gate on, a change of an operand CRD (its storedVersions) is a trigger,
        and so is the OperatorCondition API coming (or going)."""
        watch = self.gate.watch()
        if watch is None:
            return frozenset()
        return frozenset({OPERAND_CRD_CHANGES, crd_watch(OPERATOR_CONDITIONS_CRD), watch})

    async def _post_events(self, esc: JsonObject, outcome: Outcome,
                           writes: Sequence[ObjectResult], config: EffectiveConfig | None,
                           cause: str | None) -> None:
        for event in pass_events(writes, outcome, Before.of(esc), self._converged, config,
                                 cause=cause):
            await self.events.post(esc, event)
        if config is not None and outcome.applied:
            self._converged = config

    async def _observe(self, esc: JsonObject, esm: JsonObject) -> Branch:
        """managementState Unmanaged: decide as a Managed pass would, report what it would
        change, write nothing. The watches stay, so drift is reported as it happens."""
        try:
            config = await self.facts.complete(self._effective_config(esc, esm))
            desired = render_operand(config)
            watches = frozenset(dependency_watches(config))
            decision = pass_decision.decide(await self._observation(config, desired))
            drift = drift_of_decision(decision)
        except (ConfigError, ObjectError, ApiError) as problem:
            self._forget_apis(problem)
            return Branch(failed_outcome(problem))
        return Branch(unmanaged_outcome(drift), config, watches)

    async def _remove(self, esc: JsonObject) -> Branch:
        """managementState Removed: delete what the operator created (Namespaces aside, see
        manager.uninstall), release the CRD annotations, and say what is left."""
        self._converged = None  # what comes back is a new installation
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
        return Branch(removal_outcome(report, left), writes=writes, cause=REMOVED_CAUSE)

    async def _singleton(self, kind: str, path: str) -> JsonObject | None:
        """The ESC or the ESM: from the cache their watch keeps, else from the server."""
        group_kind = (GROUP, kind)
        if self.cache.synced(group_kind):
            return self.cache.get(ObjectRef(API_VERSION, kind, "", SINGLETON_NAME))
        return await self.kube.get(path)

    async def ensure_esm(self) -> JsonObject:
        """The ESM, created with defaults (and the reference's labels) if missing."""
        esm = await self._singleton(ESM_KIND, ESM_PATH)
        if esm is not None:
            return esm
        collection = ESM_PATH.rpartition("/")[0]
        try:
            esm = await self.kube.create(collection, esm_default_object(),
                                         field_manager=FIELD_MANAGER)
            logger.info("action=create result=created kind=%s name=%s", ESM_KIND, SINGLETON_NAME)
            return esm
        except ApiError as error:
            if error.status != 409:
                raise
        return await self.kube.request("GET", ESM_PATH)

    async def _converge(self, esc: JsonObject, esm: JsonObject) -> Branch:
        """managementState Managed: apply the desired state, prune, report readiness."""
        try:
            config = self._effective_config(esc, esm)
        except ConfigError as error:  # nothing is written while the spec is wrong
            return Branch(failed_outcome(error))
        writes: list[ObjectResult] = []
        watches: frozenset[WatchSpec] = frozenset()
        try:
            config = await self.facts.complete(config)
            desired = render_operand(config)
            watches = frozenset(dependency_watches(config) | _operand_crd_watch(config)
                                | {operand_pod_watch(config.namespace)})
            decision = pass_decision.decide(await self._observation(config, desired))
            if decision.refusal is not None:
                raise decision.refusal
            await self._write(decision.namespace, writes)
            applied = await self._write(decision.apply, writes)
            if decision.blocked is not None:  # degraded: nothing is deleted
                raise decision.blocked
            operand = (await self._operand_readiness(config, applied)
                       + readiness.being_deleted([o.ref for o in decision.waiting]))
            await self._delete(decision.prune, writes)
            if decision.deferred and not await self._cert_controller_held(config, applied):
                await self._delete(decision.deferred, writes)
            metrics.record_managed(str(obj["kind"]) for obj in desired.objects())
        except (MissingDependencyError, ForeignObjectsError, TerminatingObjectError,
                ObjectError, ApiError) as problem:
            self._forget_apis(problem)
            return Branch(failed_outcome(problem), config, watches, writes)
        annotator = await self._annotate(config, writes)
        count = len(list(desired.objects()))
        return Branch(_operand_outcome(config, operand, count), config, watches, writes,
                      annotator, recheck_at=operand.until)

    async def _observation(self, config: EffectiveConfig, desired: DesiredState) -> Observation:
        """Everything a decision needs, read before anything is written (so an object that
        is not the operator's stops the pass before any write)."""
        observed = await self.applier.read_all(desired.objects())
        missing = await self.preflight.check(config)
        keep = [ObjectRef.of(obj) for obj in desired.objects()]
        unwanted = await self.pruner.find_unwanted(desired.kinds(), keep)
        return Observation(config, observed, missing, unwanted)

    async def _operand_readiness(self, config: EffectiveConfig,
                                 applied: Sequence[ObjectResult]) -> readiness.Readiness:
        """What the applied objects' live state says about the operand (readiness.py)."""
        parts = []
        serving = await self._serving_ca(config, applied)
        waiting = {r.ref: r.live for r in applied
                   if r.ref.kind == "Deployment" and _pods_may_explain(r.live or {})}
        pods = dict(zip(waiting, await asyncio.gather(
            *(self._pods_of(live or {}) for live in waiting.values())), strict=True))
        for result in applied:
            live = result.live or {}
            if result.ref.kind == "Deployment":
                parts.append(readiness.deployment_readiness(live, pods.get(result.ref, [])))
            elif result.ref.kind == "ValidatingWebhookConfiguration":
                parts.append(readiness.webhook_readiness(live, _ca_bundle_source(config),
                                                         serving, time.time()))
            elif result.ref.kind == "Certificate":
                parts.append(readiness.certificate_readiness(live))
        return readiness.combine(parts)

    async def _serving_ca(self, config: EffectiveConfig, applied: Sequence[ObjectResult],
                          ) -> readiness.ServingCA | None:
        """The CA of the certificate the webhook serves: `ca.crt` of the Secret its pods
        mount (the cert-controller's, applied in this pass, or cert-manager's). The Secret is
        read whole only when its resourceVersion moved (the cache keeps metadata), and only
        `ca.crt` and its write times are kept: the private key goes with the response."""
        name = webhook_secret(config.cert_manager)
        path = f"/api/v1/namespaces/{config.namespace}/secrets/{name}"
        result = next((r for r in applied if r.ref.kind == "Secret" and r.ref.name == name),
                      None)
        secret = result.live if result else None
        if secret is None and config.cert_manager.enabled:
            secret = await self.kube.get(path, accept=PARTIAL_METADATA)
        if secret is None:
            return None
        seen = (path, secret["metadata"].get("resourceVersion"))
        # A Secret written in this pass is whole (the apply's response): without data it
        # holds none yet. One from the cache or a metadata GET is read whole if it moved.
        if "data" not in secret and not (result and result.wrote):
            if self._serving_ca_seen is not None and self._serving_ca_seen[0] == seen:
                return self._serving_ca_seen[1]
            secret = await self.kube.get(path)
            if secret is None:
                return None
            seen = (path, secret["metadata"].get("resourceVersion"))
        ca = (secret.get("data") or {}).get("ca.crt")
        serving = (readiness.ServingCA(ca, f"Secret {config.namespace}/{name}",
                                       readiness.last_change(secret)) if ca else None)
        self._serving_ca_seen = (seen, serving)
        return serving

    async def _pods_of(self, deployment: JsonObject) -> list[JsonObject]:
        """The pods of a Deployment that is not available (to say why)."""
        meta = deployment.get("metadata", {})
        match = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not match:
            return []
        selector = ",".join(f"{key}={value}" for key, value in sorted(match.items()))
        listing = await self.kube.list(f"/api/v1/namespaces/{meta.get('namespace')}/pods",
                                       label_selector=selector)
        return list(listing.get("items") or [])

    async def _cert_controller_held(self, config: EffectiveConfig,
                                    applied: Sequence[ObjectResult]) -> bool:
        """With cert-manager on, the cert-controller goes only once cert-manager's webhook
        Certificate is Ready and its Secret exists (the seed's safe transition)."""
        if not config.cert_manager.enabled:
            return False
        certificate = next((r.live for r in applied if r.ref.kind == WEBHOOK_CERTIFICATE.kind
                            and r.ref.name == WEBHOOK_CERTIFICATE.name), None)
        if not readiness.certificate_ready(certificate):
            return True
        secret = f"/api/v1/namespaces/{config.namespace}/secrets/{WEBHOOK_SECRET_CERT_MANAGER}"
        return await self.kube.get(secret, accept=PARTIAL_METADATA) is None

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

    async def _esc_absent(self, esc: JsonObject | None, esm: JsonObject) -> None:
        metrics.forget_conditions("ExternalSecretsConfig")
        if self._managing_uid is not None:
            logger.info("action=stop-managing kind=ExternalSecretsConfig name=%s "
                        "reason=%r", SINGLETON_NAME,
                        "deleted: the operand is left in place and no longer reconciled")
            await self.events.post(esc or {"metadata": {"name": SINGLETON_NAME,
                                                        "uid": self._managing_uid}},
                                   EventSpec("Normal", "ManagementStopped",
                                             status.ESC_DELETED_MESSAGE, "StopManaging"))
            self._managing_uid = None
            message = status.ESC_DELETED_SUMMARY
        else:  # after a restart, the ESM status is the only memory of a deletion
            message = (status.ESC_DELETED_SUMMARY if esm_status.esc_was_deleted(esm)
                       else status.ESC_MISSING_MESSAGE)
        # Not Ready, but not Degraded either: nothing is wrong, there is nothing to manage.
        reason = (esm_status.ESC_DELETED_REASON if message == status.ESC_DELETED_SUMMARY
                  else "NoExternalSecretsConfig")
        unmanaged = ControllerState(status.CONTROLLER_ESC, (
            status.Condition("Ready", "False", reason, message),
            status.Condition("Degraded", "False", "AsExpected", ""),
            status.Condition("Progressing", "False", reason, "")), None)
        annotator = (esm_status.previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
                     or status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True, "Inactive",
                                            "inactive: no ExternalSecretsConfig", None))
        await self._patch_esm_status(esm, [unmanaged, esm_status.manager_state(
            esm, None, None, self._feature_note()), annotator])

    def _cached(self, kind: str, obj: JsonObject) -> None:
        """What the server answered to a write of the ESC or the ESM, so that the next pass
        does not read the status it replaced (the watch event follows)."""
        self.cache.put((GROUP, kind), obj)

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

    async def _write_esc_status(self, esc: JsonObject, outcome: Outcome,
                                fields: Mapping[str, object]) -> None:
        metrics.record_conditions("ExternalSecretsConfig", "",
                                  ((c.type, c.status) for c in outcome.conditions()))
        patch = status.esc_status_update(esc.get("status") or {}, outcome,
                                         esc["metadata"].get("generation"), fields,
                                         now_rfc3339())
        if patch is None:
            return
        self._cached(ESC_KIND, await self.kube.merge_patch(
            f"{ESC_PATH}/status", {"status": patch}, field_manager=FIELD_MANAGER))
        for setting in patch.get("ignoredSettings") or ():
            logger.warning("action=ignore kind=ExternalSecretsConfig name=%s setting=%r",
                           SINGLETON_NAME, setting)
        level = logging.WARNING if outcome.kind in (OutcomeKind.DEGRADED,
                                                    OutcomeKind.RETRYING) else logging.INFO
        logger.log(level, "action=status kind=ExternalSecretsConfig name=%s outcome=%s "
                   "reason=%s message=%r", SINGLETON_NAME, outcome.kind, outcome.reason,
                   brief(outcome.message))

    async def _write_esm_status(self, esm: JsonObject, esc: JsonObject, outcome: Outcome,
                                annotator: AnnotatorReport | ApiError | None,
                                config: EffectiveConfig | None) -> None:
        generation = esc["metadata"].get("generation")
        esc_state = ControllerState(status.CONTROLLER_ESC, outcome.conditions(), generation)
        global_problem = (outcome.message if outcome.kind is OutcomeKind.DEGRADED
                          and outcome.reason == "InvalidGlobalConfig" else None)
        states = [esc_state, esm_status.manager_state(esm, global_problem, config,
                                                      self._feature_note(config)),
                  esm_status.annotator_state(esm, annotator, config)]
        await self._patch_esm_status(esm, states)

    async def _patch_esm_status(self, esm: JsonObject, states: Sequence[ControllerState]) -> None:
        for state in states:
            metrics.record_conditions("ExternalSecretsManager", state.name,
                                      ((c.type, c.status) for c in state.conditions))
        patch = status.esm_status_update(esm.get("status") or {}, states, now_rfc3339())
        if patch is None:
            return
        self._cached(ESM_KIND, await self.kube.merge_patch(
            f"{ESM_PATH}/status", {"status": patch}, field_manager=FIELD_MANAGER))
        logger.info("action=status kind=%s name=%s controllers=%d", ESM_KIND, SINGLETON_NAME,
                    len(states))
        for event in esm_status.esm_events(esm, states):  # the whole of what a line cuts
            await self.events.post(esm, event, kind=ESM_KIND)


# --- helpers --------------------------------------------------------------------------------

_SecretVersion = tuple[str, str | None]  # a Secret's path and resourceVersion


def _pods_may_explain(deployment: JsonObject) -> bool:
    """Whether the pods can say why a Deployment is not available: not when it is, and not
    before its controller has created any (a Deployment just created or re-created)."""
    return (not readiness.deployment_available(deployment)
            and bool((deployment.get("status") or {}).get("replicas")))


def _recheck_in(config: EffectiveConfig | None, readiness_at: float | None) -> float | None:
    """Seconds until the earliest moment time alone changes the outcome: the end of a CA
    overlap, or a stale caBundle's grace running out."""
    overlap = config.cert_manager.overlap_until if config is not None else None
    moments = [moment for moment in (overlap, readiness_at) if moment is not None]
    return max(1.0, min(moments) - time.time()) if moments else None


def _ca_bundle_source(config: EffectiveConfig) -> str:
    """Who fills the webhooks' caBundle in this configuration."""
    if not config.cert_manager.enabled:
        return "the cert-controller"
    if config.cert_manager.add_injector_annotations:
        return "cert-manager's CA injector"
    return "the operator, from the CA of the issued certificate"


def _operand_outcome(config: EffectiveConfig, operand: readiness.Readiness,
                     count: int) -> Outcome:
    if operand.problems:
        first, more = operand.problems[0], len(operand.problems) - 1
        line = summary.framed("", first.message, f" (and {more} more problems; "
                              f"{summary.SEE_FAILURE})") if more else ""
        return Outcome(OutcomeKind.DEGRADED, first.reason,
                       "; ".join(problem.message for problem in operand.problems), True,
                       Failure(inspect=first.inspect, object=first.subject), summary=line)
    if operand.awaited:
        return Outcome(OutcomeKind.PROGRESSING, "WaitingForOperand",
                       f"all {count} objects are applied; waiting for "
                       + "; ".join(str(item) for item in operand.awaited), True,
                       awaited=operand.awaited,
                       summary=summary.counted("Waiting for {objects}",
                                               [str(item) for item in operand.awaited],
                                               summary.SEE_AWAITED))
    return Outcome(OutcomeKind.READY, "Reconciled",
                   f"external-secrets {config.versions.external_secrets} is running in "
                   f"namespace {config.namespace}: every Deployment is available and the "
                   "webhooks are trusted", True)


def _operand_crd_watch(config: EffectiveConfig) -> set[WatchSpec]:
    """With injector annotations on, newly installed operand CRDs get annotated at once (the
    upgrade gate's watch of them, when it is on: one watch for both)."""
    if not config.cert_manager.add_injector_annotations:
        return set()
    return {OPERAND_CRD_CHANGES}


def _first_message(error: ValidationError) -> str:
    return error.errors()[0]["msg"] if error.errors() else str(error)
