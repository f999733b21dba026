"""spec.managementState: what Unmanaged and Removed passes report (pure parts)."""

from __future__ import annotations

from typing import Any

from manager.apply import ObjectRef, Observed, Resource
from manager.apply.convergence import prepare_for_apply
from manager.management import MANAGED, REMOVED, management_state
from manager.names import FIELD_MANAGER
from manager.reporting.outcomes import (
    Drift,
    drift_of,
    removal_outcome,
    unmanaged_outcome,
)
from manager.reporting.status import OutcomeKind
from manager.steps.uninstall import Candidate, Kept, UninstallPlan, UninstallReport

DESIRED: dict[str, Any] = {"apiVersion": "v1", "kind": "ServiceAccount",
                           "metadata": {"name": "external-secrets", "namespace": "es"}}
REF = ObjectRef.of(DESIRED)


def applied(body: dict[str, Any], manager: str = FIELD_MANAGER) -> dict[str, Any]:
    """The live object after `manager` applied `body` (managedFields as the server keeps
    them)."""
    applied_body = prepare_for_apply(body)
    fields = {"f:metadata": {"f:annotations": {
        f"f:{key}": {} for key in applied_body["metadata"]["annotations"]}}}
    return {**applied_body, "metadata": {
        **applied_body["metadata"], "uid": "u1",
        "managedFields": [{"manager": manager, "operation": "Apply", "fieldsV1": fields}]}}


def test_absent_means_managed() -> None:
    assert management_state({"spec": {}}) == MANAGED
    assert management_state({}) == MANAGED
    assert management_state({"spec": {"managementState": REMOVED}}) == REMOVED


def test_drift_says_how_an_object_differs() -> None:
    assert drift_of(Observed(DESIRED, REF, None)) == Drift(REF, "is missing")
    assert drift_of(Observed(DESIRED, REF, applied(DESIRED))) is None
    changed = {**DESIRED, "metadata": {**DESIRED["metadata"], "labels": {"team": "a"}}}
    assert drift_of(Observed(changed, REF, applied(DESIRED))) == Drift(
        REF, "differs from the spec")
    foreign = drift_of(Observed(DESIRED, REF, applied(DESIRED, manager="helm")))
    assert foreign == Drift(REF, "exists but the operator did not create it")


def test_unmanaged_reports_drift_without_acting() -> None:
    clean = unmanaged_outcome([])
    assert clean.kind is OutcomeKind.UNMANAGED
    assert "the operand matches the spec" in clean.message
    ready = {c.type: c for c in clean.conditions()}["Ready"]
    assert (ready.status, ready.reason) == ("Unknown", "Unmanaged")
    drifted = unmanaged_outcome([Drift(REF, "is missing")] * 7)
    assert "7 objects differ from the spec: ServiceAccount es/external-secrets is missing" in \
        drifted.message
    assert "(and 2 more)" in drifted.message
    assert drifted.kind.settled  # Unmanaged is not retried


def _plan(*, left: int = 0, kept: tuple[Kept, ...] = ()) -> UninstallPlan:
    resource = Resource("v1", "ServiceAccount", "serviceaccounts", True)
    objects = tuple(Candidate(resource, REF, "u1") for _ in range(left))
    return UninstallPlan("es", True, objects, (), kept)


def test_removal_goes_on_until_nothing_is_left() -> None:
    done = UninstallReport(deleted=[REF])
    assert removal_outcome(done, _plan(left=1)).kind is OutcomeKind.PROGRESSING
    terminating = _plan(kept=(Kept(REF, "already being deleted"),))
    assert removal_outcome(done, terminating).reason == "Removing"
    namespace = ObjectRef("v1", "Namespace", "", "es")
    removed = removal_outcome(done, _plan(kept=(Kept(namespace, "not deleted"),)))
    assert removed.kind is OutcomeKind.REMOVED
    assert "the operand is removed" in removed.message
    assert "kept: Namespace es (not deleted)" in removed.message
    failed = removal_outcome(UninstallReport(errors=["delete X: 403"]), _plan())
    assert (failed.kind, failed.reason) == (OutcomeKind.DEGRADED, "RemovalFailed")
