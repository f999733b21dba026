"""Stores on a provider the next operand release no longer has (issue 36), against the real
API server with v1.3.2's CRDs, which still accept `spec.provider.alibaba` and
`spec.provider.device42`: the upgrade gate holds while one exists and names each, the
ExternalSecretsConfig's Ready condition and a Warning Event say so too, a store on a provider
the next release keeps (`fake`) holds nothing, and the stores are read from the watch cache,
never written (manager/steps/removed_providers.py).

The operand's webhook here is built without the alibaba and device42 providers (hack/
build-tool.sh's tags), so it would refuse such a store: they are created before it serves.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from manager.client.kube import Kube
from manager.names import FIELD_MANAGER
from manager.steps.removed_providers import NEXT_OPERAND_VERSION
from manager.versions import EXTERNAL_SECRETS_VERSION
from tests.integration.conftest import (
    ESM_PATH,
    EscHandle,
    StartOperator,
    _gone,
    esc_events,
    esm_entries,
    wait_installed,
)
from tests.integration.test_upgrade_gate import (  # noqa: F401 (a fixture)
    CONDITION,
    NAME,
    NAMESPACE,
    operator_condition_api,
    wait_gate,
)
from tests.waiting import eventually

APPS = "eso-it-removed-apps"  # the users' stores
OPERAND = "eso-it-removed"
STORES = "/apis/external-secrets.io/v1"
ALIBABA_PATH = f"{STORES}/namespaces/{APPS}/secretstores/alibaba-store"
FAKE_PATH = f"{STORES}/namespaces/{APPS}/secretstores/fake-store"
DEVICE42_PATH = f"{STORES}/clustersecretstores/device42-store"
ALIBABA_NAMED = f"SecretStore {APPS}/alibaba-store (alibaba)"
DEVICE42_NAMED = "ClusterSecretStore device42-store (device42)"


def secret_key(name: str, key: str) -> dict[str, str]:
    return {"name": name, "key": key, "namespace": APPS}


ALIBABA = {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
           "metadata": {"name": "alibaba-store", "namespace": APPS},
           "spec": {"provider": {"alibaba": {"regionID": "cn-hangzhou", "auth": {"secretRef": {
               "accessKeyIDSecretRef": secret_key("alibaba", "id"),
               "accessKeySecretSecretRef": secret_key("alibaba", "secret")}}}}}}
DEVICE42 = {"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
            "metadata": {"name": "device42-store"},
            "spec": {"provider": {"device42": {"host": "device42.example", "auth": {
                "secretRef": {"credentials": secret_key("device42", "credentials")}}}}}}
FAKE_PROVIDER = {"fake": {"data": [{"key": "k", "value": "v"}]}}
FAKE = {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": "fake-store", "namespace": APPS},
        "spec": {"provider": FAKE_PROVIDER}}


@pytest.fixture(autouse=True)
def _lines_recorded(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="manager.steps.removed_providers")


async def namespace(kube: Kube, name: str) -> None:
    await kube.apply(f"/api/v1/namespaces/{name}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        field_manager="integration-tests")


@pytest_asyncio.fixture(loop_scope="session")
async def stores(kube: Kube, esc: EscHandle) -> AsyncIterator[None]:
    """The users' namespace; afterwards every store of the test is gone (before the `esc`
    fixture removes the operand, whose webhook sees the deletions)."""
    await namespace(kube, APPS)
    yield
    for path in (ALIBABA_PATH, FAKE_PATH, DEVICE42_PATH):
        await _gone(kube, path)


def store_requests(requests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [(method, url) for method, url in requests if "secretstores" in url]


async def ready(esc: EscHandle) -> dict[str, Any]:
    condition = await esc.condition("Ready")
    assert condition is not None
    assert (condition["status"], condition["reason"]) == ("True", "Reconciled"), condition
    return condition


async def test_stores_on_removed_providers_hold_the_gate_and_are_reported(
        *, kube: Kube, esc: EscHandle, stores: None, start_operator: StartOperator,
        operator_condition_api: None, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    await namespace(kube, NAMESPACE)
    await kube.apply(CONDITION, {  # as OLM creates it: no conditions
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": {}},
        field_manager="integration-tests")
    await kube.create(f"{STORES}/namespaces/{APPS}/secretstores", FAKE,
                      field_manager="integration-tests")
    monkeypatch.setenv("OPERATOR_CONDITION_NAME", NAME)
    monkeypatch.setenv("POD_NAMESPACE", NAMESPACE)
    operator = await start_operator()

    # Stores on `fake` (this one, and one per scenario namespace): nothing to hold.
    await wait_gate(kube, "True", "AsExpected")

    # No ESC yet, no webhook: the stores are accepted, their watch wakes the gate.
    await operator.wait_idle()
    passes = operator.passes
    await kube.create(f"{STORES}/namespaces/{APPS}/secretstores", ALIBABA,
                      field_manager="integration-tests")
    await kube.create(f"{STORES}/clustersecretstores", DEVICE42,
                      field_manager="integration-tests")
    await operator.wait_woken(passes, "SecretStore alibaba-store")
    entry = await wait_gate(kube, "False", "RemovedProviderInUse")
    message = entry["message"]
    assert message.startswith(
        f"2 stores use providers that external-secrets {NEXT_OPERAND_VERSION}, the operand of "
        f"the next release (0.3.0), no longer has: {DEVICE42_NAMED}, {ALIBABA_NAMED}; "), message
    assert message.endswith("move it to a supported provider or delete it; then upgrade")
    assert "fake-store" not in message
    assert "user-store" not in message

    # The operand installed and Ready: Ready stays True, its line names the first store and
    # the count, a Warning Event all of them; the ESM's entry mirrors the line.
    created = await esc.create({"controllerConfig": {"namespace": OPERAND}})
    await wait_installed(esc, OPERAND, timeout=120)
    line = ("warning: 2 stores use providers the next release drops: "
            f"{DEVICE42_NAMED} and 1 more; see kubectl describe esc cluster")

    async def warned() -> None:
        assert (await ready(esc))["message"] == line
        # The ESM's entry is its own status write, after the ESC's: awaited, not read once.
        esm = esm_entries(await kube.request("GET", ESM_PATH))["external-secrets-controller"]
        assert {c["type"]: c["message"] for c in esm["conditions"]}["Ready"] == line

    await eventually(warned, timeout=30, what="the warning in Ready, the ESC's and the ESM's")
    # The ESC's Upgradeable says what the gate says (without OLM, the only place).
    gate = await wait_gate(kube, "False", "RemovedProviderInUse")
    upgradeable = await esc.condition("Upgradeable") or {}
    assert (upgradeable.get("status"), upgradeable.get("reason"),
            upgradeable.get("message")) == (gate["status"], gate["reason"], gate["message"])

    async def event() -> None:
        notes = [e["note"] for e in await esc_events(kube, created["metadata"]["uid"])
                 if e["reason"] == "RemovedProviderInUse" and e["type"] == "Warning"]
        assert len(notes) == 1, notes
        assert DEVICE42_NAMED in notes[0]
        assert ALIBABA_NAMED in notes[0]

    await eventually(event, timeout=10, what="the RemovedProviderInUse Event")
    await wait_gate(kube, "False", "RemovedProviderInUse")

    # A steady pass reads the stores from the watch cache: no request for them.
    await operator.wait_idle()
    passes = operator.passes
    await esc.patch_spec({"controllerConfig": {"labels": {"touch": "1"}}})
    await operator.wait_woken(passes, "ExternalSecretsConfig")
    steady = [number for number, reasons in operator.log.pass_reasons().items()
              if number > passes]
    for number in steady:
        assert not store_requests(operator.log.requests_of_pass(number)), number

    # One store moved to a supported provider (through the real webhook now): only the
    # other is named.
    passes = operator.passes
    await kube.merge_patch(ALIBABA_PATH, {"spec": {"provider": {
        "alibaba": None, **FAKE_PROVIDER}}}, field_manager="integration-tests")
    await operator.wait_woken(passes, "SecretStore alibaba-store")

    async def one_left() -> None:
        entry = await wait_gate(kube, "False", "RemovedProviderInUse")
        assert entry["message"].startswith(
            f"1 store uses a provider that external-secrets {NEXT_OPERAND_VERSION}"), entry
        assert DEVICE42_NAMED in entry["message"]
        assert "alibaba-store" not in entry["message"]
        assert (await ready(esc))["message"] == (
            f"warning: 1 store uses a provider the next release drops: {DEVICE42_NAMED}; "
            "see kubectl describe esc cluster")

    await eventually(one_left, timeout=30, what="only the device42 store named")

    # The operator never wrote a store: only GETs (lists, watches), no field manager of its.
    for path in (ALIBABA_PATH, FAKE_PATH, DEVICE42_PATH):
        managers = {m.get("manager") for m in (await kube.request("GET", path))["metadata"]
                    .get("managedFields") or []}
        assert FIELD_MANAGER not in managers, (path, managers)
    assert {method for method, _ in store_requests(operator.log.requests)} == {"GET"}

    # The last one deleted: Upgradeable again, Ready's message is its own again.
    await _gone(kube, DEVICE42_PATH)
    await wait_gate(kube, "True", "AsExpected")

    async def plain() -> None:
        assert (await ready(esc))["message"].startswith(
            f"external-secrets {EXTERNAL_SECRETS_VERSION} is running in namespace {OPERAND}"
        ), await ready(esc)

    await eventually(plain, timeout=30, what="Ready without the warning")
    lines = [r.getMessage() for r in operator.log.records
             if "action=removed-providers" in r.getMessage()]
    # Once per change (the two creations may be seen apart: 1, then 2).
    assert [line.split(" message=")[0].split()[-1] for line in lines][-3:] == [
        "stores=2", "stores=1", "stores=0"], lines
