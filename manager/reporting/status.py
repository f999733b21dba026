"""Status of the ESC (conditions, what is in effect, the failure) and of the ESM (one entry
per controller, and how many are Ready).

Pure functions: they compute the status a pass should leave and say whether it differs
from what is stored, so that the writer sends a status update only when something changed.
`lastTransitionTime` moves only when a condition's status flips, in both resources.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pydantic import BaseModel

from manager.api import models
from manager.api.models import Failure, MetaCondition
from manager.client.kube import JsonObject
from manager.config import EffectiveConfig, OperatorEnvironment
from manager.render.state import DesiredState
from manager.reporting import summary
from manager.reporting.related import related_objects
from manager.steps.readiness import Awaited

CONDITION_TYPES = ("Ready", "Degraded", "Progressing")
"""The conditions every outcome states (Outcome.conditions)."""
UPGRADEABLE = "Upgradeable"
"""The upgrade gate's condition, beside them on the ESC (esc_conditions)."""
CONDITION_MESSAGE_MAX = 32768  # metav1.Condition's bound (models.MetaCondition)

CONTROLLER_ESC = "external-secrets-controller"
CONTROLLER_ESM = "external-secrets-manager"
CONTROLLER_CRD_ANNOTATOR = "crd-annotator"
CONTROLLER_NAMES = (CONTROLLER_ESC, CONTROLLER_ESM, CONTROLLER_CRD_ANNOTATOR)

ESC_DELETED_MESSAGE = (
    "ExternalSecretsConfig 'cluster' was deleted: the operator stopped managing the operand "
    "and left every object in place; create the ExternalSecretsConfig again to resume, or "
    "remove the objects labelled app.kubernetes.io/managed-by=external-secrets-operator by hand"
)
"""The ManagementStopped Event's note; the status entry says ESC_DELETED_SUMMARY."""
ESC_DELETED_SUMMARY = (
    "ExternalSecretsConfig 'cluster' was deleted; the operand is left in place, unmanaged: "
    "create it again to resume (see docs/uninstall.md)"
)
ESC_MISSING_MESSAGE = (
    "ExternalSecretsConfig 'cluster' does not exist; create it to install external-secrets"
)


class OutcomeKind(enum.StrEnum):
    READY = "Ready"              # applied, pruned, and the operand works (readiness.py)
    PROGRESSING = "Progressing"  # applied; waiting for the operand to roll out and serve
    DEGRADED = "Degraded"        # the spec or the cluster needs a fix by the administrator
    RETRYING = "Retrying"        # a transient error; the pass is retried with backoff
    UNMANAGED = "Unmanaged"      # managementState Unmanaged: nothing written, drift reported
    REMOVED = "Removed"          # managementState Removed: the operand is gone

    @property
    def settled(self) -> bool:
        """Nothing more to do until something changes (no retry)."""
        return self in (OutcomeKind.READY, OutcomeKind.UNMANAGED, OutcomeKind.REMOVED)


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" or "False"
    reason: str
    message: str


def _dump(model: BaseModel) -> JsonObject:
    """A status model as the API stores it (camelCase, unset fields absent)."""
    return model.model_dump(by_alias=True, exclude_none=True)


def _whole(model: BaseModel) -> JsonObject:
    """A nested status object for a merge patch: every field stated, unset ones as null.

    The server merges nested objects field by field (RFC 7386), so a field left out would
    keep the value of an earlier write: one failure's request beside another's object."""
    return model.model_dump(by_alias=True)


def _stored(value: object) -> object:
    """`value` as the server keeps it after a merge patch: null fields of objects removed."""
    if isinstance(value, Mapping):
        return {k: _stored(v) for k, v in value.items() if v is not None}
    return value


def inspect_command(kind: str, namespace: str, name: str, verb: str = "get") -> str:
    """The kubectl command that shows one object (`get` prints it as YAML)."""
    where = f" -n {namespace}" if namespace else ""
    output = " -o yaml" if verb == "get" else ""
    return f"kubectl {verb} {kind.lower()}{where} {name}{output}"


@dataclass(frozen=True)
class Outcome:
    """How a pass over an existing ESC ended."""

    kind: OutcomeKind
    reason: str
    message: str
    """The whole account, for Events and the log; the conditions carry `line`."""
    applied: bool = False
    """Every desired object was applied (the images in status are then in effect)."""
    failure: Failure | None = None
    awaited: tuple[Awaited, ...] = ()
    """What a Progressing pass waits for (`status.awaited`)."""
    summary: str = ""
    """The conditions' message when `message` would not do as one (summary.py)."""
    warning: tuple[str, str] | None = None
    """(reason, text) of what a Ready outcome's message warns of (outcomes.with_warning):
    a Warning Event carries the text when the Ready line changes (pass_events.py)."""

    @property
    def line(self) -> str:
        """The conditions' message: at most summary.LIMIT characters, whatever happened."""
        if self.summary:
            return summary.clip(self.summary)
        return summary.fitted(self.message, summary.SEE_FAILURE if self.failure
                              else summary.SEE_EVENTS)

    def conditions(self) -> tuple[Condition, ...]:
        line = self.line
        if self.kind is OutcomeKind.READY:
            return (Condition("Ready", "True", self.reason, line),
                    Condition("Degraded", "False", "AsExpected", ""),
                    Condition("Progressing", "False", self.reason, ""))
        if self.kind is OutcomeKind.DEGRADED:
            return (Condition("Ready", "False", self.reason, line),
                    Condition("Degraded", "True", self.reason, line),
                    Condition("Progressing", "False", "WaitingForFix",
                              "nothing more happens until the problem reported by Degraded "
                              "is fixed"))
        if self.kind is OutcomeKind.PROGRESSING:
            return (Condition("Ready", "False", self.reason, line),
                    Condition("Degraded", "False", "AsExpected", ""),
                    Condition("Progressing", "True", self.reason, line))
        if self.kind is OutcomeKind.UNMANAGED:  # the operator does not know, and does not act
            return (Condition("Ready", "Unknown", self.reason, line),
                    Condition("Degraded", "False", self.reason, ""),
                    Condition("Progressing", "False", self.reason, ""))
        if self.kind is OutcomeKind.REMOVED:
            return (Condition("Ready", "False", self.reason, line),
                    Condition("Degraded", "False", "AsExpected", ""),
                    Condition("Progressing", "False", self.reason, ""))
        retrying = summary.framed("", self.summary or self.message, "; retrying with backoff"
                                  + (f" ({summary.SEE_FAILURE})" if self.failure else ""))
        return (Condition("Ready", "False", self.reason, line),
                Condition("Degraded", "False", "AsExpected", ""),
                Condition("Progressing", "True", self.reason, retrying))


def merge_conditions(current: Sequence[JsonObject], wanted: Sequence[Condition],
                     generation: int | None, now: str) -> list[JsonObject]:
    """metav1.Conditions for `wanted`, keeping lastTransitionTime of unchanged statuses and
    any condition types other writers own."""
    by_type = {c.get("type"): c for c in current}
    merged = []
    for condition in wanted:
        previous = by_type.pop(condition.type, None)
        unchanged = previous is not None and previous.get("status") == condition.status
        merged.append(_dump(MetaCondition(
            type=condition.type, status=condition.status, reason=condition.reason,
            message=condition.message, observed_generation=generation,
            last_transition_time=previous["lastTransitionTime"] if unchanged and previous
            else now)))
    merged.extend(c for t, c in by_type.items() if t not in CONDITION_TYPES)
    return merged


def _comparable(conditions: Sequence[JsonObject]) -> list[tuple[object, ...]]:
    return sorted((c.get("type"), c.get("status"), c.get("reason"), c.get("message"),
                   c.get("observedGeneration")) for c in conditions)


_IN_EFFECT = ("externalSecretsImage", "externalSecretsVersion", "bitwardenSDKServerImage",
              "bitwardenSDKServerVersion", "tlsProfile")


def esc_fields(config: EffectiveConfig | None, outcome: Outcome,
               desired: DesiredState | None = None,
               environment: OperatorEnvironment | None = None) -> dict[str, object]:
    """The ESC's status fields besides the conditions (None removes one).

    The namespace, the ignored settings and the unsupported overrides are recorded once the
    spec resolves; images,
    versions and the TLS profile once a pass has applied everything (they are then in
    effect); `failure` while a pass fails. Without a configuration (an invalid spec) what
    was recorded stays. `relatedObjects` follows the rendered objects `desired` (kept as
    recorded while a pass has none; only the operator's side once the operand is
    removed)."""
    fields: dict[str, object] = {"failure": _failure(outcome), "awaited": _awaited(outcome)}
    environment = environment or OperatorEnvironment()
    if outcome.kind is OutcomeKind.REMOVED:  # nothing is in effect any more
        return {**fields, **dict.fromkeys(_IN_EFFECT),
                "relatedObjects": related_objects(None, environment)}
    if desired is not None:
        fields["relatedObjects"] = related_objects(desired, environment)
    if config is None:
        return fields
    fields["operandNamespace"] = config.namespace
    fields["ignoredSettings"] = list(config.ignored_settings) or None
    fields["unsupportedOverrides"] = list(config.unsupported_overrides) or None
    if outcome.applied:
        bitwarden = config.bitwarden.enabled
        fields.update({
            "externalSecretsImage": config.images.external_secrets,
            "externalSecretsVersion": config.versions.external_secrets,
            "bitwardenSDKServerImage": config.images.bitwarden_sdk_server if bitwarden else None,
            "bitwardenSDKServerVersion":
                config.versions.bitwarden_sdk_server if bitwarden else None,
            "tlsProfile": {"type": config.tls_profile.type,
                           "minTLSVersion": config.tls_profile.min_tls_version},
        })
    return fields


def _failure(outcome: Outcome) -> JsonObject | None:
    """`status.failure`, with the whole message the conditions summarise."""
    if outcome.failure is None:
        return None
    message = summary.clip(outcome.message, models.FAILURE_MESSAGE_MAX)
    return _whole(outcome.failure.model_copy(update={"message": message}))


def _awaited(outcome: Outcome) -> list[JsonObject] | None:
    """`status.awaited`, within the CRD's bounds; absent when nothing is awaited."""
    return [_dump(models.Awaited(object=summary.clip(item.subject, models.AWAITED_OBJECT_MAX),
                                 message=summary.clip(item.detail, models.AWAITED_MESSAGE_MAX)))
            for item in outcome.awaited[:models.AWAITED_MAX_ITEMS]] or None


def esc_conditions(outcome: Outcome, upgradeable: Condition | None) -> tuple[Condition, ...]:
    """The ESC's conditions for a pass: the outcome's, and `Upgradeable` as the upgrade gate
    decided it (sidetasks/upgrade_gate.py: Gate.condition). None: the pass could not tell,
    so the stored one stays as it is (merge_conditions keeps what it is not given)."""
    return outcome.conditions() + ((upgradeable,) if upgradeable is not None else ())


def esc_status_update(status: JsonObject, outcome: Outcome, generation: int | None,
                      fields: Mapping[str, object], now: str, *,
                      upgradeable: Condition | None = None) -> JsonObject | None:
    """A merge patch of `.status` taking the ESC from `status` to `outcome`, `upgradeable`
    and `fields` (see esc_fields); None if equal."""
    current = status.get("conditions") or []
    conditions = merge_conditions(current, esc_conditions(outcome, upgradeable), generation,
                                  now)
    patch: JsonObject = {}
    if _comparable(conditions) != _comparable(current):
        patch["conditions"] = conditions
    patch.update({key: value for key, value in fields.items()
                  if status.get(key) != _stored(value)})
    return patch or None


@dataclass(frozen=True)
class ControllerState:
    """One entry of ESM.status.controllerStatuses. Its conditions hold whole messages; the
    entry carries each as `line` says (at most summary.LIMIT characters), and the whole text
    of a message it cuts goes to an Event about the ESM (esm_status.esm_events)."""

    name: str
    conditions: tuple[Condition, ...]
    observed_generation: int | None
    summary: str = ""
    """What a message too long for one line says instead; without it, the message's start
    and where the whole is."""

    @property
    def ready(self) -> bool:
        return any(c.type == "Ready" and c.status == "True" for c in self.conditions)

    def line(self, message: str) -> str:
        """A condition's message as the entry carries it: at most summary.LIMIT characters,
        whatever the message (the one place that bounds the ESM's messages)."""
        if len(message) <= summary.LIMIT:
            return message
        if self.summary:
            return summary.clip(self.summary)
        return summary.fitted(message, summary.SEE_ESM_EVENTS)

    @property
    def cut(self) -> Condition | None:
        """The first condition whose message the entry does not carry whole, if any."""
        return next((c for c in self.conditions if self.line(c.message) != c.message), None)

    def as_status(self, previous: JsonObject | None = None, now: str = "") -> JsonObject:
        """The entry; each condition keeps the lastTransitionTime of `previous` (the stored
        entry) while its status stays, else takes `now`."""
        before = {c.get("type"): c for c in (previous or {}).get("conditions") or []}
        conditions = []
        for condition in self.conditions:
            stored = before.get(condition.type) or {}
            kept = stored.get("status") == condition.status and stored.get("lastTransitionTime")
            conditions.append(models.Condition(
                type=condition.type, status=condition.status,
                message=self.line(condition.message),
                reason=condition.reason or None, last_transition_time=kept or now))
        return _dump(models.ControllerStatus(name=self.name, conditions=conditions,
                                             observed_generation=self.observed_generation))


def simple_state(name: str, ok: bool, reason: str, message: str,
                 generation: int | None, *, summary: str = "") -> ControllerState:
    """Ready/Degraded pair for a controller that is either fine or needs a fix; `summary`
    stands for `message` if that is too long for one line (ControllerState.line)."""
    return ControllerState(name, (
        Condition("Ready", "True" if ok else "False", reason, message),
        Condition("Degraded", "False" if ok else "True", "AsExpected" if ok else reason,
                  "" if ok else message),
    ), generation, summary)


def esm_status_update(status: JsonObject, states: Sequence[ControllerState], now: str,
                      ) -> JsonObject | None:
    """A merge patch of the ESM `.status`, or None if the controller entries are unchanged.
    `controllersReady` counts the entries whose Ready is True ("2/3")."""
    stored = {e.get("name"): e for e in status.get("controllerStatuses") or []}
    entries = [state.as_status(stored.get(state.name), now) for state in states]
    ready = f"{sum(state.ready for state in states)}/{len(states)}"
    if entries == (status.get("controllerStatuses") or []) and status.get(
            "controllersReady") == ready:
        return None
    return {"controllerStatuses": entries, "controllersReady": ready, "lastTransitionTime": now}
