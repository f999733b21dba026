"""spec.managementState: Unmanaged pauses the operator (drift reported, not repaired),
Removed removes the operand and says when it is gone, Managed brings it back."""

from __future__ import annotations

import itertools
from typing import Any

from manager.client.kube import Kube
from manager.steps.uninstall import plan_uninstall
from tests.integration.conftest import (
    ESC_API,
    MANAGED,
    SCENARIO_NAMESPACES,
    EscHandle,
    OperatorThread,
    StartOperator,
    UserObjects,
    esc_events,
    eventually,
    managed_objects,
    wait_condition,
)
from tests.integration.test_controller_install import expected_objects


def operand_writes(operator: OperatorThread) -> list[tuple[str, str]]:
    """Writes to anything but the operator's own resources and Events."""
    return [(method, url) for method, url in operator.log.writes()
            if "/apis/operator.openshift.io/" not in url and "/apis/events.k8s.io/" not in url]


async def set_state(esc: EscHandle, state: str) -> None:
    await esc.patch_spec({"managementState": state})


async def test_unmanaged_pauses_removed_removes_managed_restores(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    namespace = SCENARIO_NAMESPACES["management"]
    spec: dict[str, Any] = {"controllerConfig": {"namespace": namespace}}
    operator = await start_operator()
    await esc.create(spec)
    await wait_condition(esc, "Ready", "True", timeout=60)
    expected = expected_objects(spec)

    # Unmanaged: nothing to report yet, and the operator says it stopped acting.
    await set_state(esc, "Unmanaged")
    paused = await wait_condition(esc, "Ready", "Unknown", reason="Unmanaged")
    assert "the operand matches the spec" in paused["message"], paused
    assert (await esc.condition("Degraded") or {})["status"] == "False"
    await operator.wait_idle()
    writes_before = len(operand_writes(operator))
    service_account = f"/api/v1/namespaces/{namespace}/serviceaccounts/external-secrets-webhook"
    await kube.delete(service_account)
    await esc.patch_spec({"controllerConfig": {"labels": {"paused": "yes"}}})

    async def drift_reported() -> None:
        # The new label changes every object; the missing one is named, the rest counted.
        # The Ready summary counts them; the Unmanaged Event lists them.
        message = (await esc.condition("Ready") or {}).get("message", "")
        assert f"drift in {len(expected)} objects" in message, message
        notes = [e["note"] for e in await esc_events(kube, (await esc.get())["metadata"]["uid"])
                 if e["reason"] == "Unmanaged"]
        assert f"ServiceAccount {namespace}/external-secrets-webhook is missing" in notes[-1]
        assert f"{len(expected)} objects differ from the spec" in notes[-1], notes

    await eventually(drift_reported)
    await operator.wait_idle()
    assert await kube.get(service_account) is None  # not repaired
    assert operand_writes(operator)[writes_before:] == []
    assert not (await plan_uninstall(kube)).esc_manages  # uninstall need not be forced

    # Managed again: the drift is repaired.
    await set_state(esc, "Managed")
    await wait_condition(esc, "Ready", "True", timeout=60)
    assert await kube.get(service_account) is not None

    # Removed: everything the operator created goes; the status says when it is gone.
    await set_state(esc, "Removed")
    removed = await wait_condition(esc, "Ready", "False", reason="Removed", timeout=60)
    assert "the operand is removed" in removed["message"], removed
    assert await managed_objects(kube, namespace) == {}
    status = (await esc.get())["status"]
    assert "externalSecretsImage" not in status
    assert "externalSecretsVersion" not in status
    webhooks = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    assert (await kube.list(webhooks, label_selector=MANAGED))["items"] == []
    await operator.wait_idle()
    writes_before, passes_before = len(operand_writes(operator)), operator.passes
    await kube.merge_patch(f"{ESC_API}/cluster", {"metadata": {"labels": {"poke": "1"}}},
                           field_manager="integration-tests")
    await operator.wait_woken(passes_before, "modified ExternalSecretsConfig cluster")
    assert operand_writes(operator)[writes_before:] == []  # a removed operand stays removed

    # Managed again: installed from scratch.
    await set_state(esc, "Managed")
    await wait_condition(esc, "Ready", "True", timeout=90)
    found = await managed_objects(kube, namespace)
    assert expected <= set(found), sorted(expected - set(found))

    events = await esc_events(kube, (await esc.get())["metadata"]["uid"])
    notes = [(e["reason"], e["note"]) for e in events]
    reasons = [reason for reason, _ in notes]
    # One Unmanaged Event on entering, then one per change of the drift the Ready summary
    # counts (the Event lists it whole); never the same note twice in a row.
    unmanaged = [note for reason, note in notes if reason == "Unmanaged"]
    assert unmanaged[0].endswith("the operand matches the spec"), notes
    assert len(unmanaged) >= 2, notes
    assert "is missing" in unmanaged[-1], notes
    assert all(a != b for a, b in itertools.pairwise(unmanaged)), notes
    assert reasons.count("Removed") == 1, notes
    assert any(reason == "Applied" and "managementState is Removed" in note
               for reason, note in notes), notes
    # The second install said what the first said: one Event, counted twice in its series.
    installs = [e for e in events if e["note"].endswith(": installed")]
    assert len(installs) == 1, notes
    assert installs[0]["series"]["count"] == 2, installs[0]
    await user_objects.assert_untouched(kube)
