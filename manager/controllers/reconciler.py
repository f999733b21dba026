"""One level-based pass: read both CRs, converge the cluster, record the outcome.

    ESC + ESM + environment ─► EffectiveConfig ─► render ─► apply ─► prune ─► status
                                (ConfigError)                (preflight before all but
                                                              the Namespace)

The pass reads everything it needs afresh, so it does not matter what triggered it, how
many triggers were coalesced, or whether the operator restarted in between. It writes
nothing when the cluster already matches (see manager.apply.convergence), and it never
deletes anything when the spec is invalid or a dependency is missing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from manager import __version__, metrics
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
    ConfigError,
    EffectiveConfig,
    OperatorEnvironment,
    config_of_objects,
)
from manager.constants import (
    API_VERSION,
    ESC_PLURAL,
    ESM_KIND,
    ESM_PLURAL,
    FIELD_MANAGER,
    MANAGED_BY_LABEL,
    OPERATOR_NAME,
    SINGLETON_NAME,
)
from manager.controllers import esm_status, readiness, status
from manager.controllers.crd_annotator import OPERAND_CRD_LABEL, AnnotatorReport, CrdAnnotator
from manager.controllers.events import EventRecorder, EventSpec, now_rfc3339
from manager.controllers.facts import ClusterFacts
from manager.controllers.failures import failed_outcome
from manager.controllers.management_outcomes import (
    Drift,
    drift_of,
    removal_outcome,
    unmanaged_outcome,
)
from manager.controllers.pass_events import Before, pass_events
from manager.controllers.preflight import (
    CRD_API_VERSION,
    CRD_KIND,
    MissingDependencyError,
    Preflight,
    dependency_watches,
)
from manager.controllers.status import ControllerState, Outcome, OutcomeKind
from manager.controllers.watches import WatchSpec
from manager.kube import PARTIAL_METADATA, ApiError, JsonObject, Kube
from manager.logs import brief
from manager.management import REMOVED, UNMANAGED, management_state
from manager.render import DesiredState, render_operand
from manager.render.components import CERT_CONTROLLER_APP
from manager.render.context import WEBHOOK_SECRET_CERT_MANAGER
from manager.uninstall import execute_uninstall, operand_namespace_of, plan_uninstall

logger = logging.getLogger(__name__)

ESC_PATH = f"/apis/{API_VERSION}/{ESC_PLURAL}/{SINGLETON_NAME}"
ESM_PATH = f"/apis/{API_VERSION}/{ESM_PLURAL}/{SINGLETON_NAME}"
WEBHOOK_CERTIFICATE = ObjectRef("cert-manager.io/v1", "Certificate", "", "external-secrets-webhook")


@dataclass
class PassReport:
    """What the worker needs from a pass: how it ended and what to watch until the next."""

    outcome: Outcome | None  # None: there is no ESC to manage
    watches: frozenset[WatchSpec]
    writes: list[ObjectResult] = field(default_factory=list)
    annotator_failed: bool = False

    @property
    def needs_retry(self) -> bool:
        return self.annotator_failed or (
            self.outcome is not None and not self.outcome.kind.settled)


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


def child_watches(desired: DesiredState) -> set[WatchSpec]:
    """One watch per kind the renderer can produce, selected by the managed-by label, in
    every namespace: the operator's own objects wherever they are (an operating namespace's
    Role, what a moved operand left behind). They feed the ObjectCache."""
    return {WatchSpec(api_version, kind, label_selector=MANAGED_SELECTOR,
                      with_status=kind in STATUS_KINDS, cached=True)
            for api_version, kind in desired.kinds()}


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
        self.facts = ClusterFacts(kube, discovery)
        self.annotator = CrdAnnotator(kube)
        self._managing_uid: str | None = None  # the ESC this process has managed, if any
        self._converged: EffectiveConfig | None = None  # of the last pass that applied all
        self._watches: frozenset[WatchSpec] = frozenset()

    # --- the pass -----------------------------------------------------------------------

    async def run_pass(self) -> PassReport:
        esm = await self.ensure_esm()
        esc = await self.kube.get(ESC_PATH)
        if esc is None or esc["metadata"].get("deletionTimestamp"):
            await self._esc_absent(esc, esm)
            self._watches = frozenset()
            return PassReport(None, self._watches)
        self._managing_uid = esc["metadata"]["uid"]
        writes: list[ObjectResult] = []
        annotator: AnnotatorReport | ApiError | None = None
        state, cause = management_state(esc), None
        if state == UNMANAGED:
            outcome, config = await self._observe(esc, esm)
        elif state == REMOVED:
            outcome, config = await self._remove(esc, writes), None
            cause = "managementState is Removed"
        else:
            outcome, config, annotator = await self._converge(esc, esm, writes)
        await self._write_esc_status(esc, outcome, status.esc_fields(config, outcome))
        await self._write_esm_status(esm, esc, outcome, annotator, config)
        await self._post_events(esc, outcome, writes, config, cause)
        metrics.record_writes((result.action.value, result.ref.kind) for result in writes)
        return PassReport(outcome, self._watches, writes, isinstance(annotator, ApiError))

    async def _post_events(self, esc: JsonObject, outcome: Outcome,
                           writes: Sequence[ObjectResult], config: EffectiveConfig | None,
                           cause: str | None) -> None:
        for event in pass_events(writes, outcome, Before.of(esc), self._converged, config,
                                 cause=cause):
            await self.events.post(esc, event)
        if config is not None and outcome.applied:
            self._converged = config

    async def _observe(self, esc: JsonObject, esm: JsonObject,
                       ) -> tuple[Outcome, EffectiveConfig | None]:
        """managementState Unmanaged: read what a pass would write, report the difference,
        write nothing. The watches stay, so drift is reported as it happens."""
        try:
            config = await self.facts.complete(self._effective_config(esc, esm))
            desired = render_operand(config)
            self._watches = frozenset(child_watches(desired) | dependency_watches(config))
            drift = [found for obj in desired.objects() if (found := await self._drift_of(obj))]
            keep = [ObjectRef.of(obj) for obj in desired.objects()]
            drift += [Drift(ObjectRef.of(obj), "is no longer rendered (it would be deleted)")
                      for _, obj in await self.pruner.find_unwanted(desired.kinds(), keep)]
        except (ConfigError, ObjectError, ApiError) as problem:
            self._forget_apis(problem)
            return failed_outcome(problem), None
        return unmanaged_outcome(drift), config

    async def _drift_of(self, desired: JsonObject) -> Drift | None:
        try:
            return drift_of(await self.applier.read(desired))
        except TerminatingObjectError as deleting:
            return Drift(deleting.ref, "is being deleted")

    async def _remove(self, esc: JsonObject, writes: list[ObjectResult]) -> Outcome:
        """managementState Removed: delete what the operator created (Namespaces aside, see
        manager.uninstall), release the CRD annotations, and say what is left."""
        self._watches = frozenset()
        self._converged = None  # what comes back is a new installation
        try:
            plan = await plan_uninstall(self.kube, namespaces=False)
            report = await execute_uninstall(self.kube, plan, force=True)
            writes.extend(ObjectResult(ref, Action.DELETED) for ref in report.deleted)
            released = await self.annotator.reconcile(False, operand_namespace_of(esc))
            writes.extend(released.results)
            left = await plan_uninstall(self.kube, namespaces=False)
        except ApiError as error:
            return failed_outcome(error)
        metrics.record_managed(())
        return removal_outcome(report, left)

    async def ensure_esm(self) -> JsonObject:
        """The ESM, created with defaults (and the reference's labels) if missing."""
        esm = await self.kube.get(ESM_PATH)
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

    async def _converge(self, esc: JsonObject, esm: JsonObject, writes: list[ObjectResult],
                        ) -> tuple[Outcome, EffectiveConfig | None,
                                   AnnotatorReport | ApiError | None]:
        try:
            config = self._effective_config(esc, esm)
        except ConfigError as error:
            return failed_outcome(error), None, None
        try:
            config = await self.facts.complete(config)
            desired = render_operand(config)
            self._watches = frozenset(
                child_watches(desired) | dependency_watches(config)
                | _operand_crd_watch(config))
            # Every object is read before anything is written, so that an object that is
            # not the operator's stops the pass before any write.
            observed = [await self.applier.read(obj) for obj in desired.objects()]
            _check_ownership(observed, config)
            # A Namespace the operator did not create is used as it is (never adopted).
            await self._write([o for o in observed
                                    if o.ref.kind == "Namespace" and not o.foreign], writes)
            await self.preflight.check(config)
            # A missing operating namespace holds back only what goes into it.
            deferred = await self.preflight.missing_operating_namespace(config)
            applied = await self._write([
                o for o in observed if o.ref.kind != "Namespace"
                and (deferred is None or o.ref.namespace != config.operating_namespace)], writes)
            if deferred is not None:  # degraded: nothing is deleted
                raise deferred
            operand = await self._operand_readiness(config, applied)
            held = await self._cert_controller_held(config, applied)
            await self._prune(desired, writes, held)
            metrics.record_managed(str(obj["kind"]) for obj in desired.objects())
        except (MissingDependencyError, ForeignObjectsError, TerminatingObjectError,
                ObjectError, ApiError) as problem:
            self._forget_apis(problem)
            return failed_outcome(problem), config, None
        annotator = await self._annotate(config, writes)
        return _operand_outcome(config, operand, len(observed)), config, annotator

    async def _operand_readiness(self, config: EffectiveConfig,
                                 applied: Sequence[ObjectResult]) -> readiness.Readiness:
        """What the applied objects' live state says about the operand (readiness.py)."""
        parts = []
        for result in applied:
            live = result.live or {}
            if result.ref.kind == "Deployment":
                pods = [] if readiness.deployment_available(live) else await self._pods_of(live)
                parts.append(readiness.deployment_readiness(live, pods))
            elif result.ref.kind == "ValidatingWebhookConfiguration":
                parts.append(readiness.webhook_readiness(live, _ca_bundle_source(config)))
            elif result.ref.kind == "Certificate":
                parts.append(readiness.certificate_readiness(live))
        return readiness.combine(parts)

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
        results = []
        for observed in objects:
            result = await self.applier.write(observed)
            results.append(result)
            if result.wrote:
                writes.append(result)
        return results

    async def _prune(self, desired: DesiredState,
                     writes: list[ObjectResult], cert_controller_held: bool) -> None:
        keep = [ObjectRef.of(obj) for obj in desired.objects()]
        unwanted = await self.pruner.find_unwanted(desired.kinds(), keep)
        for resource, obj in unwanted:
            if cert_controller_held and _component_app(obj) == CERT_CONTROLLER_APP:
                continue
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
            message = status.ESC_DELETED_MESSAGE
        else:
            previous = esm_status.entry_message(esm, status.CONTROLLER_ESC)
            message = (status.ESC_DELETED_MESSAGE if previous == status.ESC_DELETED_MESSAGE
                       else status.ESC_MISSING_MESSAGE)
        # Not Ready, but not Degraded either: nothing is wrong, there is nothing to manage.
        reason = ("ExternalSecretsConfigDeleted" if message == status.ESC_DELETED_MESSAGE
                  else "NoExternalSecretsConfig")
        unmanaged = ControllerState(status.CONTROLLER_ESC, (
            status.Condition("Ready", "False", reason, message),
            status.Condition("Degraded", "False", "AsExpected", ""),
            status.Condition("Progressing", "False", reason, "")), None)
        annotator = (esm_status.previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
                     or status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True, "Inactive",
                                            "inactive: no ExternalSecretsConfig", None))
        await self._patch_esm_status(esm, [unmanaged, esm_status.manager_state(esm, None, None),
                                           annotator])

    def _forget_apis(self, problem: Exception) -> None:
        """An API that answers 404 may have gone: look the kinds up again next pass."""
        error = problem.error if isinstance(problem, ObjectError) else problem
        if isinstance(error, ApiError) and error.not_found:
            self.discovery.invalidate()

    # --- status -------------------------------------------------------------------------

    async def _write_esc_status(self, esc: JsonObject, outcome: Outcome,
                                fields: Mapping[str, object]) -> None:
        metrics.record_conditions("ExternalSecretsConfig", "",
                                  ((c.type, c.status) for c in outcome.conditions()))
        patch = status.esc_status_update(esc.get("status") or {}, outcome,
                                         esc["metadata"].get("generation"), fields,
                                         now_rfc3339())
        if patch is None:
            return
        await self.kube.merge_patch(f"{ESC_PATH}/status", {"status": patch},
                                    field_manager=FIELD_MANAGER)
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
        states = [esc_state, esm_status.manager_state(esm, global_problem, config),
                  esm_status.annotator_state(esm, annotator, config)]
        await self._patch_esm_status(esm, states)

    async def _patch_esm_status(self, esm: JsonObject, states: Sequence[ControllerState]) -> None:
        for state in states:
            metrics.record_conditions("ExternalSecretsManager", state.name,
                                      ((c.type, c.status) for c in state.conditions))
        patch = status.esm_status_update(esm.get("status") or {}, states, now_rfc3339())
        if patch is None:
            return
        await self.kube.merge_patch(f"{ESM_PATH}/status", {"status": patch},
                                    field_manager=FIELD_MANAGER)
        logger.info("action=status kind=%s name=%s controllers=%d", ESM_KIND, SINGLETON_NAME,
                    len(states))


# --- helpers --------------------------------------------------------------------------------


def _check_ownership(observed: Sequence[Observed], config: EffectiveConfig) -> None:
    """Objects of the rendered names that the operator did not create stop the pass, unless
    the administrator asked for adoption (Namespaces are not adopted: see _converge)."""
    foreign = [(o.ref, o.live or {}) for o in observed if o.foreign and o.ref.kind != "Namespace"]
    if foreign and not config.adopt_existing_objects:
        raise ForeignObjectsError(foreign)


def _component_app(obj: JsonObject) -> str | None:
    labels: dict[str, str] = obj.get("metadata", {}).get("labels") or {}
    return labels.get("app.kubernetes.io/name")


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
        first = operand.problems[0]
        return Outcome(OutcomeKind.DEGRADED, first.reason,
                       "; ".join(problem.message for problem in operand.problems), True,
                       status.Failure(first.inspect, first.subject))
    if operand.awaited:
        return Outcome(OutcomeKind.PROGRESSING, "WaitingForOperand",
                       f"all {count} objects are applied; waiting for "
                       + "; ".join(operand.awaited), True)
    return Outcome(OutcomeKind.READY, "Reconciled",
                   f"external-secrets {config.versions.external_secrets} is running in "
                   f"namespace {config.namespace}: every Deployment is available and the "
                   "webhooks are trusted", True)


def _operand_crd_watch(config: EffectiveConfig) -> set[WatchSpec]:
    """With injector annotations on, newly installed operand CRDs get annotated at once."""
    if not config.cert_manager.add_injector_annotations:
        return set()
    return {WatchSpec(CRD_API_VERSION, CRD_KIND, label_selector=OPERAND_CRD_LABEL)}


def _first_message(error: ValidationError) -> str:
    return error.errors()[0]["msg"] if error.errors() else str(error)
