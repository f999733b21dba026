"""Status of the ESC (conditions, images) and of the ESM (one entry per controller).

Pure functions: they compute the status a pass should leave and say whether it differs
from what is stored, so that the writer sends a status update only when something changed.
`lastTransitionTime` moves only when a condition's status flips.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from manager.kube import JsonObject

CONDITION_TYPES = ("Ready", "Degraded", "Progressing")

CONTROLLER_ESC = "external-secrets-controller"
CONTROLLER_ESM = "external-secrets-manager"
CONTROLLER_CRD_ANNOTATOR = "crd-annotator"
CONTROLLER_NAMES = (CONTROLLER_ESC, CONTROLLER_ESM, CONTROLLER_CRD_ANNOTATOR)

ESC_DELETED_MESSAGE = (
    "ExternalSecretsConfig 'cluster' was deleted: the operator stopped managing the operand "
    "and left every object in place; create the ExternalSecretsConfig again to resume, or "
    "remove the objects labelled app.kubernetes.io/managed-by=external-secrets-operator by hand"
)
ESC_MISSING_MESSAGE = (
    "ExternalSecretsConfig 'cluster' does not exist; create it to install external-secrets"
)


class OutcomeKind(enum.StrEnum):
    READY = "Ready"              # applied, pruned, and the operand works (readiness.py)
    PROGRESSING = "Progressing"  # applied; waiting for the operand to roll out and serve
    DEGRADED = "Degraded"        # the spec or the cluster needs a fix by the administrator
    RETRYING = "Retrying"        # a transient error; the pass is retried with backoff


@dataclass(frozen=True)
class Condition:
    type: str
    status: str  # "True" or "False"
    reason: str
    message: str


@dataclass(frozen=True)
class Outcome:
    """How a pass over an existing ESC ended."""

    kind: OutcomeKind
    reason: str
    message: str
    applied: bool = False
    """Every desired object was applied (the images in status are then in effect)."""

    def conditions(self) -> tuple[Condition, ...]:
        if self.kind is OutcomeKind.READY:
            return (Condition("Ready", "True", self.reason, self.message),
                    Condition("Degraded", "False", "AsExpected", ""),
                    Condition("Progressing", "False", self.reason, ""))
        if self.kind is OutcomeKind.DEGRADED:
            return (Condition("Ready", "False", self.reason, self.message),
                    Condition("Degraded", "True", self.reason, self.message),
                    Condition("Progressing", "False", "WaitingForFix",
                              "nothing more happens until the problem reported by Degraded "
                              "is fixed"))
        if self.kind is OutcomeKind.PROGRESSING:
            return (Condition("Ready", "False", self.reason, self.message),
                    Condition("Degraded", "False", "AsExpected", ""),
                    Condition("Progressing", "True", self.reason, self.message))
        return (Condition("Ready", "False", self.reason, self.message),
                Condition("Degraded", "False", "AsExpected", ""),
                Condition("Progressing", "True", self.reason,
                          f"{self.message}; retrying with backoff"))


def was_degraded(esc: JsonObject) -> bool:
    """Whether the ESC's stored status says Degraded (before this pass writes it)."""
    return any(c.get("type") == "Degraded" and c.get("status") == "True"
               for c in (esc.get("status") or {}).get("conditions") or [])


def merge_conditions(current: Sequence[JsonObject], wanted: Sequence[Condition],
                     generation: int | None, now: str) -> list[JsonObject]:
    """metav1.Conditions for `wanted`, keeping lastTransitionTime of unchanged statuses and
    any condition types other writers own."""
    by_type = {c.get("type"): c for c in current}
    merged = []
    for condition in wanted:
        previous = by_type.pop(condition.type, None)
        unchanged = previous is not None and previous.get("status") == condition.status
        entry: JsonObject = {
            "type": condition.type,
            "status": condition.status,
            "reason": condition.reason,
            "message": condition.message,
            "lastTransitionTime": previous["lastTransitionTime"] if unchanged and previous
            else now,
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        merged.append(entry)
    merged.extend(c for t, c in by_type.items() if t not in CONDITION_TYPES)
    return merged


def _comparable(conditions: Sequence[JsonObject]) -> list[tuple[object, ...]]:
    return sorted((c.get("type"), c.get("status"), c.get("reason"), c.get("message"),
                   c.get("observedGeneration")) for c in conditions)


def esc_status_update(status: JsonObject, outcome: Outcome, generation: int | None,
                      images: tuple[str | None, str | None] | None, now: str,
                      ) -> JsonObject | None:
    """A merge patch of `.status` taking the ESC from `status` to `outcome`; None if equal.

    `images` (external-secrets, bitwarden-sdk-server) is None when the pass could not
    compute them (invalid spec): the recorded images then stay as they are.
    """
    current = status.get("conditions") or []
    conditions = merge_conditions(current, outcome.conditions(), generation, now)
    patch: JsonObject = {}
    if _comparable(conditions) != _comparable(current):
        patch["conditions"] = conditions
    if images is not None:
        external_secrets, bitwarden = images
        if status.get("externalSecretsImage") != external_secrets:
            patch["externalSecretsImage"] = external_secrets
        if status.get("bitwardenSDKServerImage") != bitwarden:
            patch["bitwardenSDKServerImage"] = bitwarden  # None removes it
    return patch or None


@dataclass(frozen=True)
class ControllerState:
    """One entry of ESM.status.controllerStatuses."""

    name: str
    conditions: tuple[Condition, ...]
    observed_generation: int | None

    def as_status(self) -> JsonObject:
        entry: JsonObject = {
            "name": self.name,
            "conditions": [{"type": c.type, "status": c.status, "message": c.message}
                           for c in self.conditions],
        }
        if self.observed_generation is not None:
            entry["observedGeneration"] = self.observed_generation
        return entry


def simple_state(name: str, ok: bool, message: str, generation: int | None) -> ControllerState:
    """Ready/Degraded pair for a controller that is either fine or needs a fix."""
    return ControllerState(name, (
        Condition("Ready", "True" if ok else "False", "", message),
        Condition("Degraded", "False" if ok else "True", "", "" if ok else message),
    ), generation)


def esm_status_update(status: JsonObject, states: Sequence[ControllerState], now: str,
                      ) -> JsonObject | None:
    """A merge patch of the ESM `.status`, or None if the controller entries are unchanged."""
    entries = [state.as_status() for state in states]
    if entries == (status.get("controllerStatuses") or []):
        return None
    return {"controllerStatuses": entries, "lastTransitionTime": now}
