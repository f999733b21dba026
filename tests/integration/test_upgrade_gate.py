"""The upgrade gate against the real API server: the operator writes `Upgradeable` into the
`spec.conditions` of its OperatorCondition (OLM's own CRD, from the OLM module the simulated
cluster builds), says what to do while it is False, writes nothing while nothing changes, and
does nothing, without failing or repeating itself, where there is no OLM.

OLM itself (its copy to `status`, its Role for the operator, the next CSV held Pending) is in
tests/olm/test_upgrade_gate.py.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from devcluster import olm
from manager.client.kube import Kube, install_crds
from manager.names import CRD_COLLECTION
from manager.runtime.operator import load_crds
from manager.sidetasks.upgrade_gate import OPERATOR_CONDITIONS_CRD, UPGRADEABLE_MESSAGE, decide
from manager.steps.stored_versions import Unserved
from tests.integration.conftest import (
    ESC_API,
    EscHandle,
    OperatorThread,
    StartOperator,
    eventually,
    wait_installed,
)

NAMESPACE = "eso-it-gate"  # where the operator "runs" (POD_NAMESPACE) and OLM's object is
NAME = "external-secrets-operator.v0.2.0"
CONDITION = f"/apis/operators.coreos.com/v2/namespaces/{NAMESPACE}/operatorconditions/{NAME}"
EXTERNAL_SECRETS_CRD = f"{CRD_COLLECTION}/externalsecrets.external-secrets.io"
CLUSTER_EXTERNAL_SECRETS_CRD = f"{CRD_COLLECTION}/clusterexternalsecrets.external-secrets.io"


@pytest_asyncio.fixture(loop_scope="session")
async def operator_condition_api(kube: Kube) -> AsyncIterator[None]:
    """OLM's OperatorCondition CRD, removed afterwards (the rest of the session has no OLM)."""
    [crd] = [c for c in load_crds(olm.binaries()[0].parent / "crds")
             if c["metadata"]["name"] == OPERATOR_CONDITIONS_CRD]
    await install_crds(kube, [crd], field_manager="integration-tests")
    yield
    await kube.delete(f"{CRD_COLLECTION}/{OPERATOR_CONDITIONS_CRD}")


async def upgradeable(kube: Kube) -> dict[str, Any]:
    condition = await kube.request("GET", CONDITION)
    entries = [c for c in condition["spec"].get("conditions") or []
               if c["type"] == "Upgradeable"]
    assert len(entries) == 1, condition["spec"]
    return dict(entries[0])


async def wait_gate(kube: Kube, status: str, reason: str) -> dict[str, Any]:
    async def check() -> dict[str, Any]:
        entry = await upgradeable(kube)
        assert (entry["status"], entry["reason"]) == (status, reason), entry
        return entry

    return await eventually(check, timeout=30, what=f"Upgradeable {status} ({reason})")


def gate_requests(operator: OperatorThread) -> list[tuple[str, str]]:
    return [(m, u) for m, u in operator.log.requests if "/operatorconditions/" in u]


@pytest.fixture(autouse=True)
def _gate_lines_recorded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="manager.sidetasks.upgrade_gate")


def gate_lines(operator: OperatorThread) -> list[str]:
    return [r.getMessage() for r in list(operator.log.records)
            if "action=upgrade-gate" in r.getMessage()]


async def test_upgradeable_follows_the_esc_overrides_and_stored_versions(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        operator_condition_api: None, monkeypatch: pytest.MonkeyPatch) -> None:
    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        field_manager="integration-tests")
    await kube.apply(CONDITION, {  # as OLM creates it: no conditions
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": {}},
        field_manager="integration-tests")
    monkeypatch.setenv("OPERATOR_CONDITION_NAME", NAME)
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    operator = await start_operator()

    # No ExternalSecretsConfig: nothing holds an upgrade back.
    entry = await wait_gate(kube, "True", "AsExpected")
    assert entry["lastTransitionTime"]

    # Unmanaged, with overrides: both named, Unmanaged first; the ESC lists the overrides.
    await esc.create({"managementState": "Unmanaged", "controllerConfig": {
        "componentConfigs": [{"componentName": "ExternalSecretsCoreController",
                              "overrideArgs": ["--enable-flood-gate=false"]}]}})
    entry = await wait_gate(kube, "False", "Unmanaged")
    assert "set it to Managed (or Removed)" in entry["message"], entry
    assert "1 componentConfigs[].overrideArgs are set" in entry["message"], entry
    # One decision, two places: the ESC's condition says what OLM is told.
    mirrored = await esc.condition("Upgradeable") or {}
    assert (mirrored.get("status"), mirrored.get("reason"), mirrored.get("message")) == (
        entry["status"], entry["reason"], entry["message"]), mirrored
    assert (await esc.get())["status"]["unsupportedOverrides"] == [
        "spec.controllerConfig.componentConfigs[0].overrideArgs "
        "(ExternalSecretsCoreController): --enable-flood-gate=false"]

    # A steady pass writes nothing, and does not even read the OperatorCondition.
    await operator.wait_idle()
    before, passes = len(gate_requests(operator)), operator.passes
    await esc.patch_spec({"controllerConfig": {"labels": {"touch": "1"}}})
    await operator.wait_woken(passes, "ExternalSecretsConfig")
    assert len(gate_requests(operator)) == before, gate_requests(operator)[before:]

    # Someone else edits the condition (a hand-made True, then the entry removed): the
    # next pass writes the decision back, from the watch's copy (no polling).
    await kube.merge_patch(CONDITION, {"spec": {"conditions": [
        {**entry, "status": "True", "reason": "ForcedByHand", "message": "x"}]}},
        field_manager="someone-else")
    entry = await wait_gate(kube, "False", "Unmanaged")
    await kube.merge_patch(CONDITION, {"spec": {"conditions": []}}, field_manager="someone-else")
    await wait_gate(kube, "False", "Unmanaged")

    # Degraded (the operand namespace is the operator's own): not held back, an upgrade
    # makes it no worse (and may fix it).
    await kube.delete(f"{ESC_API}/cluster")
    await wait_gate(kube, "True", "AsExpected")
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await eventually(lambda: _degraded(esc), timeout=30, what="the ESC Degraded")
    await operator.wait_idle()
    assert (await upgradeable(kube))["status"] == "True"
    await kube.delete(f"{ESC_API}/cluster")
    await wait_gate(kube, "True", "AsExpected")

    # An operand CRD that still stores v1beta1, which it no longer serves (what an upgrade
    # from an older external-secrets leaves): False until the storage is migrated.
    status = f"{EXTERNAL_SECRETS_CRD}/status"
    await kube.merge_patch(status, {"status": {"storedVersions": ["v1beta1", "v1"]}},
                           field_manager="integration-tests")
    try:
        entry = await wait_gate(kube, "False", "StoredVersionsNotServed")
        assert ("CRD externalsecrets.external-secrets.io still lists v1beta1"
                in entry["message"]), entry
    finally:
        await kube.merge_patch(status, {"status": {"storedVersions": ["v1"]}},
                               field_manager="integration-tests")
    await wait_gate(kube, "True", "AsExpected")
    lines = gate_lines(operator)
    assert not [line for line in lines if "not-published" in line], lines
    assert sum("status=False reason=Unmanaged" in line for line in lines) == 3, lines


async def _degraded(esc: EscHandle) -> None:
    conditions = {c["type"]: c for c in ((await esc.get()).get("status") or {}).get(
        "conditions") or []}
    assert conditions.get("Degraded", {}).get("status") == "True", conditions


async def test_without_olm_nothing_is_asked_and_nothing_repeats(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No OPERATOR_CONDITION_NAME: one line at start. The variable without the API (OLM
    removed): one line, passes end well, no retries."""
    monkeypatch.delenv("OPERATOR_CONDITION_NAME", raising=False)
    plain = await start_operator()
    await esc.create({"managementState": "Unmanaged"})
    await plain.wait_idle()
    assert not gate_requests(plain)
    assert gate_lines(plain) == [
        "action=upgrade-gate result=inactive reason='no OPERATOR_CONDITION_NAME (not "
        "installed by OLM)'"]
    await plain.stop()

    monkeypatch.setenv("OPERATOR_CONDITION_NAME", NAME)
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    orphan = await start_operator()
    await orphan.wait_idle()
    passes = orphan.passes
    await esc.patch_spec({"managementState": "Removed"})
    await orphan.wait_woken(passes, "ExternalSecretsConfig")
    assert not gate_requests(orphan)
    assert gate_lines(orphan) == [
        "action=upgrade-gate result=not-published reason='OperatorCondition "
        "(operators.coreos.com/v2) is not served'"]
    assert all("retry" not in reasons for reasons in orphan.log.pass_reasons().values())


ESC_GATE_OPERAND = "eso-it-gate-esc"


async def esc_upgradeable(esc: EscHandle, status: str, reason: str) -> dict[str, Any]:
    async def check() -> dict[str, Any]:
        condition = await esc.condition("Upgradeable")
        assert condition is not None, "no Upgradeable condition yet"
        assert (condition["status"], condition["reason"]) == (status, reason), condition
        return condition

    return await eventually(check, timeout=30, what=f"the ESC's Upgradeable {status} ({reason})")


def esc_status_writes(operator: OperatorThread) -> list[tuple[str, str]]:
    return [(m, u) for m, u in operator.log.writes() if u.endswith("/cluster/status")
            and "externalsecretsconfigs" in u]


async def test_without_olm_the_esc_says_upgradeable(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """OLM v1 (a ClusterExtension) sets no OPERATOR_CONDITION_NAME and serves no
    OperatorCondition: the operator still installs the operand, and the gate's decision is
    the ESC's Upgradeable condition, following the ESC, the operand CRDs' storedVersions (by
    their watch: no resync in this test) and nothing else, written only when it changes."""
    monkeypatch.delenv("OPERATOR_CONDITION_NAME", raising=False)
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": ESC_GATE_OPERAND}})
    await wait_installed(esc, ESC_GATE_OPERAND, timeout=120)
    entry = await esc_upgradeable(esc, "True", "AsExpected")
    assert entry["message"] == UPGRADEABLE_MESSAGE
    assert entry["observedGeneration"] == (await esc.get())["metadata"]["generation"]
    assert not gate_requests(operator)
    assert gate_lines(operator) == [
        "action=upgrade-gate result=inactive reason='no OPERATOR_CONDITION_NAME (not "
        "installed by OLM)'"]

    # A pass that changes nothing writes no status (Upgradeable included).
    await operator.wait_idle()
    before, passes = len(esc_status_writes(operator)), operator.passes
    await kube.merge_patch(f"{ESC_API}/cluster", {"metadata": {"annotations": {
        "example.com/touched": "1"}}}, field_manager="integration-tests")
    await operator.wait_woken(passes, "ExternalSecretsConfig")
    assert esc_status_writes(operator)[before:] == []

    # A stored version the CRD no longer serves: Upgradeable False with what to do, Ready
    # stays True (nothing is broken today); back to True once the storage is migrated. A CRD
    # the operand does not depend on, so that only the gate's own watch can start the pass.
    status = f"{CLUSTER_EXTERNAL_SECRETS_CRD}/status"
    await kube.merge_patch(status, {"status": {"storedVersions": ["v1beta1", "v1"]}},
                           field_manager="integration-tests")
    try:
        entry = await esc_upgradeable(esc, "False", "StoredVersionsNotServed")
        assert entry["message"] == decide(None, None, "", [Unserved(
            "clusterexternalsecrets.external-secrets.io", ("v1beta1",))]).message
        assert (await esc.condition("Ready") or {}).get("status") == "True"
    finally:
        await kube.merge_patch(status, {"status": {"storedVersions": ["v1"]}},
                               field_manager="integration-tests")
    flipped = await esc_upgradeable(esc, "True", "AsExpected")
    assert flipped["lastTransitionTime"] >= entry["lastTransitionTime"]

    # Unmanaged: False, and Managed again: True.
    await esc.patch_spec({"managementState": "Unmanaged"})
    entry = await esc_upgradeable(esc, "False", "Unmanaged")
    assert "set it to Managed (or Removed)" in entry["message"]
    await esc.patch_spec({"managementState": "Managed"})
    await esc_upgradeable(esc, "True", "AsExpected")
    assert not gate_requests(operator)
