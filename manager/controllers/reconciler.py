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
from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import ValidationError

from manager import __version__
from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.apply import (
    MANAGED_SELECTOR,
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
    ESM_GLOBAL,
    ConfigError,
    EffectiveConfig,
    OperatorEnvironment,
    effective_config,
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
from manager.controllers import readiness, status
from manager.controllers.crd_annotator import OPERAND_CRD_LABEL, AnnotatorReport, CrdAnnotator
from manager.controllers.events import EventRecorder, now_rfc3339
from manager.controllers.facts import ClusterFacts
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
from manager.render import DesiredState, render_operand
from manager.render.components import CERT_CONTROLLER_APP
from manager.render.context import WEBHOOK_SECRET_CERT_MANAGER

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
            self.outcome is not None and self.outcome.kind is not OutcomeKind.READY)


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
        self.facts = ClusterFacts(kube)
        self.annotator = CrdAnnotator(kube)
        self._managing_uid: str | None = None  # the ESC this process has managed, if any
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
        outcome, config, annotator = await self._converge(esc, esm, writes)
        images = None
        if config is not None and outcome.applied:
            images = (config.images.external_secrets,
                      config.images.bitwarden_sdk_server if config.bitwarden.enabled else None)
        await self._write_esc_status(esc, outcome, images)
        await self._write_esm_status(esm, esc, outcome, annotator, config)
        return PassReport(outcome, self._watches, writes, isinstance(annotator, ApiError))

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
            return _config_outcome(error), None, None
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
            await self._write(esc, [o for o in observed
                                    if o.ref.kind == "Namespace" and not o.foreign], writes)
            await self.preflight.check(config)
            # A missing operating namespace holds back only what goes into it.
            deferred = await self.preflight.missing_operating_namespace(config)
            applied = await self._write(esc, [
                o for o in observed if o.ref.kind != "Namespace"
                and (deferred is None or o.ref.namespace != config.operating_namespace)], writes)
            if deferred is not None:  # degraded: nothing is deleted
                raise deferred
            operand = await self._operand_readiness(config, applied)
            held = await self._cert_controller_held(config, applied)
            await self._prune(esc, desired, writes, held)
        except (MissingDependencyError, ForeignObjectsError) as problem:
            return Outcome(OutcomeKind.DEGRADED, problem.reason, str(problem)), config, None
        except TerminatingObjectError as waiting:
            return Outcome(OutcomeKind.RETRYING, "ObjectTerminating", str(waiting)), config, None
        except ObjectError as error:
            return self._api_outcome(error.error, str(error)), config, None
        except ApiError as error:
            return self._api_outcome(error, str(error)), config, None
        annotator = await self._annotate(esc, config, writes)
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
        try:
            esc_spec = ExternalSecretsConfigSpec.model_validate(esc.get("spec") or {})
        except ValidationError as error:
            raise ConfigError(_first_location("spec", error), _first_message(error)) from None
        try:
            esm_spec = ExternalSecretsManagerSpec.model_validate(esm.get("spec") or {})
        except ValidationError as error:
            raise ConfigError(_first_location("spec", error), _first_message(error)) from None
        return effective_config(esc_spec, esm_spec, self.environment)

    async def _write(self, esc: JsonObject, objects: Sequence[Observed],
                     writes: list[ObjectResult]) -> list[ObjectResult]:
        results = []
        for observed in objects:
            result = await self.applier.write(observed)
            results.append(result)
            if result.wrote:
                writes.append(result)
                await self.events.object_changed(esc, result)
        return results

    async def _prune(self, esc: JsonObject, desired: DesiredState,
                     writes: list[ObjectResult], cert_controller_held: bool) -> None:
        keep = [ObjectRef.of(obj) for obj in desired.objects()]
        unwanted = await self.pruner.find_unwanted(desired.kinds(), keep)
        for resource, obj in unwanted:
            if cert_controller_held and _component_app(obj) == CERT_CONTROLLER_APP:
                continue
            result = await self.pruner.delete(resource, obj)
            writes.append(result)
            await self.events.object_changed(esc, result)

    async def _annotate(self, esc: JsonObject, config: EffectiveConfig,
                        writes: list[ObjectResult]) -> AnnotatorReport | ApiError:
        """The CRD annotator's share of the pass; its failure does not fail the operand."""
        try:
            report = await self.annotator.reconcile(
                config.cert_manager.add_injector_annotations, config.namespace)
        except ApiError as error:
            logger.warning("action=annotate-crds result=error error=%r", str(error))
            return error
        for result in report.results:
            writes.append(result)
            await self.events.object_changed(esc, result)
        return report

    async def _esc_absent(self, esc: JsonObject | None, esm: JsonObject) -> None:
        if self._managing_uid is not None:
            logger.info("action=stop-managing kind=ExternalSecretsConfig name=%s "
                        "reason=%r", SINGLETON_NAME,
                        "deleted: the operand is left in place and no longer reconciled")
            await self.events.post(esc or {"metadata": {"name": SINGLETON_NAME,
                                                        "uid": self._managing_uid}},
                                   "Normal", "ManagementStopped", status.ESC_DELETED_MESSAGE)
            self._managing_uid = None
            message = status.ESC_DELETED_MESSAGE
        else:
            previous = _entry_message(esm, status.CONTROLLER_ESC)
            message = (status.ESC_DELETED_MESSAGE if previous == status.ESC_DELETED_MESSAGE
                       else status.ESC_MISSING_MESSAGE)
        # Not Ready, but not Degraded either: nothing is wrong, there is nothing to manage.
        unmanaged = ControllerState(status.CONTROLLER_ESC, (
            status.Condition("Ready", "False", "", message),
            status.Condition("Degraded", "False", "", ""),
            status.Condition("Progressing", "False", "", "")), None)
        annotator = (_previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
                     or status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True,
                                            "inactive: no ExternalSecretsConfig", None))
        await self._patch_esm_status(esm, [unmanaged, _esm_state(esm, None), annotator])

    def _api_outcome(self, error: ApiError, text: str) -> Outcome:
        if error.not_found:
            self.discovery.invalidate()
        return _api_outcome(error, text)

    # --- status -------------------------------------------------------------------------

    async def _write_esc_status(self, esc: JsonObject, outcome: Outcome,
                                images: tuple[str | None, str | None] | None) -> None:
        patch = status.esc_status_update(esc.get("status") or {}, outcome,
                                         esc["metadata"].get("generation"), images,
                                         now_rfc3339())
        if patch is None:
            return
        await self.kube.merge_patch(f"{ESC_PATH}/status", {"status": patch},
                                    field_manager=FIELD_MANAGER)
        logger.info("action=status kind=ExternalSecretsConfig name=%s outcome=%s reason=%s "
                    "message=%r", SINGLETON_NAME, outcome.kind, outcome.reason, outcome.message)

    async def _write_esm_status(self, esm: JsonObject, esc: JsonObject, outcome: Outcome,
                                annotator: AnnotatorReport | ApiError | None,
                                config: EffectiveConfig | None) -> None:
        generation = esc["metadata"].get("generation")
        esc_state = ControllerState(status.CONTROLLER_ESC, outcome.conditions(), generation)
        global_problem = (outcome.message if outcome.kind is OutcomeKind.DEGRADED
                          and outcome.reason == "InvalidGlobalConfig" else None)
        states = [esc_state, _esm_state(esm, global_problem),
                  _annotator_state(esm, annotator, config)]
        await self._patch_esm_status(esm, states)

    async def _patch_esm_status(self, esm: JsonObject, states: Sequence[ControllerState]) -> None:
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
        return Outcome(OutcomeKind.DEGRADED, operand.problems[0].reason,
                       "; ".join(problem.message for problem in operand.problems), True)
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


def _config_outcome(error: ConfigError) -> Outcome:
    if error.field.startswith(ESM_GLOBAL):
        return Outcome(OutcomeKind.DEGRADED, "InvalidGlobalConfig",
                       f"ExternalSecretsManager cluster {error.field}: {error.message}")
    if error.field.startswith("env."):
        return Outcome(OutcomeKind.DEGRADED, "InvalidOperatorEnvironment",
                       f"operator Deployment {error.field}: {error.message}")
    return Outcome(OutcomeKind.DEGRADED, "InvalidConfiguration", str(error))


def _api_outcome(error: ApiError, text: str) -> Outcome:
    if error.transient or error.not_found:  # not found: an API went away mid-pass
        return Outcome(OutcomeKind.RETRYING, "APIError", text)
    if error.status in (401, 403):
        return Outcome(OutcomeKind.DEGRADED, "Forbidden",
                       f"{text}. The operator's ServiceAccount lacks a permission: install the "
                       "RBAC shipped with the operator (manifests/operator/rbac.yaml)")
    return Outcome(OutcomeKind.DEGRADED, "ApplyRejected",
                   f"{text}. The API server rejected the object; check the fields of the "
                   "ExternalSecretsConfig that shape it")


def _first_location(prefix: str, error: ValidationError) -> str:
    location = error.errors()[0]["loc"] if error.errors() else ()
    return ".".join([prefix, *(str(part) for part in location)])


def _first_message(error: ValidationError) -> str:
    return error.errors()[0]["msg"] if error.errors() else str(error)


def _entries(esm: JsonObject) -> dict[str, JsonObject]:
    entries = (esm.get("status") or {}).get("controllerStatuses") or []
    return {entry.get("name", ""): entry for entry in entries}


def _entry_message(esm: JsonObject, name: str) -> str | None:
    entry = _entries(esm).get(name)
    for condition in (entry or {}).get("conditions") or []:
        if condition.get("type") == "Ready":
            return str(condition.get("message", ""))
    return None


def _previous_state(esm: JsonObject, name: str) -> ControllerState | None:
    entry = _entries(esm).get(name)
    if entry is None:
        return None
    conditions = tuple(status.Condition(c.get("type", ""), c.get("status", ""), "",
                                        c.get("message", ""))
                       for c in entry.get("conditions") or [])
    return ControllerState(name, conditions, entry.get("observedGeneration"))


def _esm_state(esm: JsonObject, problem: str | None) -> ControllerState:
    generation = esm["metadata"].get("generation")
    if problem is not None:
        return status.simple_state(status.CONTROLLER_ESM, False, problem, generation)
    return status.simple_state(
        status.CONTROLLER_ESM, True,
        "ExternalSecretsManager 'cluster' is observed: its globalConfig applies to every "
        "managed object", generation)


def _annotator_state(esm: JsonObject, report: AnnotatorReport | ApiError | None,
                     config: EffectiveConfig | None) -> ControllerState:
    if report is None or config is None:  # the pass did not get that far: keep what was said
        return (_previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
                or status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, False,
                                       "waiting for a valid ExternalSecretsConfig", None))
    if isinstance(report, ApiError):
        return status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, False,
                                   f"failed to annotate the operand CRDs, retrying: {report}",
                                   None)
    return status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True,
                               report.message(config.namespace), None)
