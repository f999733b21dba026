"""The ExternalSecretsManager's entries for its own controller and the CRD annotator (the
ExternalSecretsConfig's entry mirrors the ESC's conditions), and the Events that carry the
whole of a message an entry cuts to one line. Pure functions.

Every condition message of the ESM fits in summary.LIMIT characters: ControllerState.line
decides, using `summary` where a state gives one (many overridden settings, many unknown
features, a feature note) and otherwise the message's start and "see kubectl describe esm
cluster", where `esm_events` has put the whole text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pydantic import ValidationError

from manager.api.models import ExternalSecretsManagerSpec
from manager.apply.results import ObjectResult
from manager.client.kube import ApiError, JsonObject
from manager.config import (
    KNOWN_FEATURES,
    UNSAFE_ALLOW_GENERIC_TARGETS,
    EffectiveConfig,
    feature_enabled,
    unknown_features,
)
from manager.names import GENERIC_TARGETS_ROLE, WEBHOOK_CERTIFICATE
from manager.render.context import INJECT_CA_FROM
from manager.reporting import status, summary
from manager.reporting.events import EventSpec
from manager.reporting.status import ControllerState

ESC_DELETED_REASON = "ExternalSecretsConfigDeleted"
OBSERVED = ("ExternalSecretsManager 'cluster' is observed: its globalConfig applies to every "
            "managed object")
LOG_LEVEL_DEFAULT = ("appConfig.logLevel is 1 whenever the ExternalSecretsConfig has an "
                     "appConfig (the CRD's default, indistinguishable from a 1 written there), "
                     "so set the log level in spec.appConfig.logLevel")


@dataclass(frozen=True)
class AnnotatorReport:
    """What the CRD annotator (manager/sidetasks/crd_annotator.py) did in a pass."""

    active: bool
    crds: int
    results: tuple[ObjectResult, ...]
    listed: tuple[tuple[str, str], ...] = ()
    """(name, resourceVersion) of the operand CRDs as it listed them: the upgrade gate's
    stored versions reuse that listing (steps/stored_versions.py) instead of a second one."""

    def message(self, namespace: str) -> str:
        if not self.active:
            return ("inactive: spec.appConfig.certManagerConfig.addInjectorAnnotations is not "
                    '"true"')
        return (f"{self.crds} operand CRDs carry {INJECT_CA_FROM}: "
                f"{namespace}/{WEBHOOK_CERTIFICATE}")


def _entries(esm: JsonObject) -> dict[str, JsonObject]:
    entries = (esm.get("status") or {}).get("controllerStatuses") or []
    return {entry.get("name", ""): entry for entry in entries}


def esc_was_deleted(esm: JsonObject) -> bool:
    """Whether the ESC entry says the ESC was deleted while managed: what a restarted
    operator, which never saw the ESC, keeps saying instead of "does not exist"."""
    entry = _entries(esm).get(status.CONTROLLER_ESC)
    return any(condition.get("type") == "Ready" and condition.get("reason") == ESC_DELETED_REASON
               for condition in (entry or {}).get("conditions") or [])


def previous_state(esm: JsonObject, name: str) -> ControllerState | None:
    entry = _entries(esm).get(name)
    if entry is None:
        return None
    conditions = tuple(status.Condition(c.get("type", ""), c.get("status", ""),
                                        c.get("reason", ""), c.get("message", ""))
                       for c in entry.get("conditions") or [])
    return ControllerState(name, conditions, entry.get("observedGeneration"))


def manager_state(esm: JsonObject, problem: str | None, config: EffectiveConfig | None,
                  feature_note: str | None = None) -> ControllerState:
    """The ESM controller's entry: its globalConfig is invalid (`problem`), names features
    this operator does not have, is partly overridden by the ESC, or simply applies; a
    feature that is on but has no effect (`feature_note`) is said in the message, with
    reason FeatureWithoutEffect where nothing else is to say, and so is the risk of
    UnsafeAllowGenericTargets while it is on (reason GenericTargetsEnabled: Ready, not
    Degraded, for it works as asked)."""
    state = _manager_state(esm, problem, config)
    if problem is not None:
        return state
    state = _with_note(state, feature_note, "FeatureWithoutEffect", feature_note)
    return _with_note(state, generic_targets_warning(esm, config), GENERIC_TARGETS_REASON,
                      GENERIC_TARGETS_LINE)


def _with_note(state: ControllerState, note: str | None, reason: str,
               line: str | None) -> ControllerState:
    """`state` with `note` added to its message; where the state had nothing else to say
    (Observed), the note is the news: its reason, and `line` as the summary."""
    if note is None:
        return state
    ready = state.conditions[0]
    news = ready.reason == "Observed"
    return status.simple_state(
        status.CONTROLLER_ESM, ready.status == "True", reason if news else ready.reason,
        f"{ready.message}; {note}", state.observed_generation,
        summary=summary.fitted(line or note, summary.SEE_ESM_EVENTS) if news else state.summary)


GENERIC_TARGETS_REASON = "GenericTargetsEnabled"
GENERIC_TARGETS_LINE = (f"feature {UNSAFE_ALLOW_GENERIC_TARGETS} is on: targets other than "
                        "Secrets sync slower and are not protected as Secrets are "
                        f"({summary.SEE_ESM_EVENTS})")


def generic_targets_warning(esm: JsonObject, config: EffectiveConfig | None) -> str | None:
    """What UnsafeAllowGenericTargets costs, while it is on: slower syncs, targets that are
    not Secrets (at rest and to readers), and the RBAC the operator grants for them."""
    spec = _spec(esm)
    if spec is None or not feature_enabled(spec, UNSAFE_ALLOW_GENERIC_TARGETS):
        return None
    scope = (f"in namespace {config.operating_namespace} (Role {GENERIC_TARGETS_ROLE})"
             if config is not None and config.operating_namespace
             else f"in every namespace (ClusterRole {GENERIC_TARGETS_ROLE})")
    return (f"feature {UNSAFE_ALLOW_GENERIC_TARGETS} is on: an ExternalSecret with "
            "spec.target.manifest writes a ConfigMap or a custom resource instead of a "
            "Secret; such a sync is slower, whoever may read ConfigMaps (the role view) reads "
            "a ConfigMap target, and etcd encryption leaves a custom resource unencrypted at "
            "rest (it covers Secrets, on OpenShift ConfigMaps too); the controller may create, "
            f"update and delete ConfigMaps {scope}; a custom resource kind needs RBAC an "
            'administrator grants (docs/operations.md, "Generic targets")')


def _manager_state(esm: JsonObject, problem: str | None,
                   config: EffectiveConfig | None) -> ControllerState:
    generation = esm["metadata"].get("generation")
    if problem is not None:
        return status.simple_state(status.CONTROLLER_ESM, False, "InvalidGlobalConfig", problem,
                                   generation)
    unknown = _unknown_features(esm)
    if unknown:
        names = ", ".join(repr(name) for name in unknown)
        return status.simple_state(
            status.CONTROLLER_ESM, False, "UnknownFeature",
            f"spec.features: {names} {'is' if len(unknown) == 1 else 'are'} not a feature of "
            f"this operator (known: {', '.join(sorted(KNOWN_FEATURES))}); such an entry has no "
            "effect: remove it", generation, summary=_unknown_line(unknown, names))
    hidden = config.hidden_global_settings if config is not None else ()
    if hidden:
        settings = ", ".join(f"globalConfig.{name}" for name in hidden)
        note = f"; {LOG_LEVEL_DEFAULT}" if "logLevel" in hidden else ""
        return status.simple_state(
            status.CONTROLLER_ESM, True, "PartlyOverridden",
            f"{OBSERVED}, except {settings}: the ExternalSecretsConfig's appConfig sets "
            f"{'it' if len(hidden) == 1 else 'them'} to another value, which wins{note}",
            generation, summary=summary.framed(
                "globalConfig applies except ", ", ".join(hidden),
                f": the ESC's appConfig wins ({summary.SEE_ESM_EVENTS})"))
    return status.simple_state(status.CONTROLLER_ESM, True, "Observed", OBSERVED, generation)


def _unknown_line(unknown: tuple[str, ...], names: str) -> str:
    one = len(unknown) == 1
    return summary.framed(
        f"spec.features: {len(unknown)} "
        f"{'name is not a feature' if one else 'names are not features'} of this operator: ",
        names, f"; remove {'it' if one else 'them'} ({summary.SEE_ESM_EVENTS})")


def _spec(esm: JsonObject) -> ExternalSecretsManagerSpec | None:
    try:
        return ExternalSecretsManagerSpec.model_validate(esm.get("spec") or {})
    except ValidationError:  # reported as InvalidGlobalConfig by the pass
        return None


def _unknown_features(esm: JsonObject) -> tuple[str, ...]:
    spec = _spec(esm)
    return unknown_features(spec) if spec is not None else ()


def annotator_state(esm: JsonObject, report: AnnotatorReport | ApiError | None,
                     config: EffectiveConfig | None) -> ControllerState:
    if report is None or config is None:  # the pass did not get that far: keep what was said
        return (previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
                or status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, False, "Waiting",
                                       "waiting for a valid ExternalSecretsConfig", None))
    if isinstance(report, ApiError):
        return status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, False, "APIError",
                                   f"failed to annotate the operand CRDs, retrying: {report}",
                                   None)
    return status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True,
                               "Annotated" if report.active else "Inactive",
                               report.message(config.namespace), None)


def esm_events(esm: JsonObject, states: Sequence[ControllerState]) -> list[EventSpec]:
    """An Event about the ESM with the whole message of each entry that cuts one, when that
    entry's line changed (the stored status in `esm` is the one before this pass), so that
    `kubectl describe esm cluster` has what the status line leaves out."""
    stored = _entries(esm)
    events = []
    for state in states:
        cut = state.cut
        if cut is None:
            continue
        before = {c.get("type"): c for c in (stored.get(state.name) or {}).get("conditions")
                  or []}.get(cut.type) or {}
        if (before.get("reason"), before.get("message")) == (cut.reason, state.line(cut.message)):
            continue
        events.append(EventSpec("Normal" if state.ready else "Warning", cut.reason,
                                f"{state.name}: {cut.message}"))
    return events
