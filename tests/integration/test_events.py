"""Events where administrators look for them, and few of them.

The operator runs as it does in-cluster, with POD_NAMESPACE set; the Events about the
cluster-scoped ExternalSecretsConfig are still in `default`, where `kubectl describe esc
cluster` finds them. Per scenario: one Normal `Applied` per pass that wrote, one Warning
while Degraded (repeats counted in its series, not added), `Recovered` when the problem is
fixed, nothing for passes that change nothing.
"""

from __future__ import annotations

from typing import Any

import pytest

from manager.client.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESC_API,
    OPERATOR_NAMESPACE,
    SCENARIO_NAMESPACES,
    EscHandle,
    OperatorThread,
    StartOperator,
    UserObjects,
    esc_events,
    eventually,
    in_operator_namespace,
    wait_condition,
    wait_installed,
)
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret


def summary(events: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["type"], e["reason"]) for e in events]


async def trigger_pass(kube: Kube, operator: OperatorThread, value: str) -> None:
    """A label on the ESC itself: its watch starts a pass that finds the same spec. Returns
    once that pass ran and the operator is idle again."""
    before = operator.passes
    await kube.merge_patch(f"{ESC_API}/cluster", {"metadata": {"labels": {"poke": value}}},
                           field_manager="integration-tests")
    await operator.wait_woken(before, "modified ExternalSecretsConfig cluster")


async def test_events_summarise_passes_and_live_where_describe_looks(
        *, kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects, monkeypatch: pytest.MonkeyPatch) -> None:
    namespace = SCENARIO_NAMESPACES["events"]
    await in_operator_namespace(kube, monkeypatch)
    operator = await start_operator()
    base = {"controllerConfig": {"namespace": namespace}}
    await esc.create(base)
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    uid = (await esc.get())["metadata"]["uid"]

    # Install: one Event, whatever the number of objects.
    events = await esc_events(kube, uid)
    assert summary(events) == [("Normal", "Applied")], events
    assert events[0]["note"].endswith(": installed"), events[0]
    assert events[0]["regarding"]["name"] == "cluster"
    assert "namespace" not in events[0]["regarding"]
    assert events[0]["reportingController"] == "external-secrets-operator"

    # A pass that changes nothing posts nothing; a label change posts one Event.
    await trigger_pass(kube, operator, "1")
    assert len(await esc_events(kube, uid)) == 1
    await esc.patch_spec({"controllerConfig": {"labels": {"team": "platform"}}})
    await wait_condition(esc, "Ready", "True")
    await operator.wait_idle()
    events = await esc_events(kube, uid)
    assert summary(events) == [("Normal", "Applied")] * 2, events
    assert events[-1]["note"].endswith(": labels changed"), events[-1]

    # Degraded: one Warning; the same problem in later passes joins its series.
    await esc.patch_spec({"appConfig": {"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": BITWARDEN_TLS_SECRET}}}})
    await wait_condition(esc, "Degraded", "True", reason="BitwardenSecretNotFound")
    await operator.wait_idle()
    for value in ("2", "3"):
        await trigger_pass(kube, operator, value)
    events = await esc_events(kube, uid)
    # What does not wait for the Secret (all of bitwarden but its Deployment) was applied.
    assert summary(events) == [("Normal", "Applied")] * 3 + [
        ("Warning", "BitwardenSecretNotFound")], events
    assert events[2]["note"].endswith(": bitwarden switched on"), events[2]
    assert "bitwarden-tls" in events[-1]["note"]
    assert (events[-1].get("series") or {}).get("count", 1) >= 3, events[-1]

    # Fixed: the pass that installs bitwarden says so, and that the problem is gone.
    await kube.apply(f"/api/v1/namespaces/{namespace}/secrets/{BITWARDEN_TLS_SECRET}",
                     bitwarden_tls_secret(namespace), field_manager="integration-tests")
    await wait_installed(esc, namespace)
    await operator.wait_idle()
    events = await esc_events(kube, uid)
    assert summary(events)[4:] == [("Normal", "Applied"), ("Normal", "Recovered")], events
    assert events[4]["note"].endswith(": bitwarden switched on"), events[4]

    # Nothing was posted where kubectl describe does not look.
    elsewhere = await kube.list(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/events")
    assert [e for e in elsewhere["items"]
            if e["involvedObject"].get("kind") == "ExternalSecretsConfig"] == []

    # kubectl describe shows them, the repeated Warning once with its count.
    async def described() -> str:
        text = cluster.kubectl("describe", "esc", "cluster").stdout
        assert "Warning  BitwardenSecretNotFound" in text, text
        return text

    text = await eventually(described)
    events_section = text.split("Events:", 1)[1]
    assert "Normal   Applied" in events_section
    assert "Normal   Recovered" in events_section
    assert events_section.count("BitwardenSecretNotFound") == 1
    assert " (x" in events_section  # "(x3 over 5s)": the series
