"""Nothing silently shadowed: when the ExternalSecretsConfig's appConfig (with the log level the
API server defaults to 1) hides a globalConfig setting of the ExternalSecretsManager, the
ESM's status says so; features this operator does not have are reported, not ignored. The
ESM's messages fit on one line (esm_conditions checks every one); the whole text is in an
Event about the ESM."""

from __future__ import annotations

from typing import Any

from manager.client.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESM_PATH,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    esc_events,
    esm_conditions,
    eventually,
    wait_condition,
)


async def manager_entry(kube: Kube) -> dict[str, dict[str, Any]]:
    conditions = await esm_conditions(kube, "external-secrets-manager")
    assert conditions, "no entry yet"
    return conditions


async def esm_notes(kube: Kube, reason: str) -> list[str]:
    """The notes of the Events about the ESM with `reason`."""
    uid = (await kube.request("GET", ESM_PATH))["metadata"]["uid"]
    return [e["note"] for e in await esc_events(kube, uid) if e["reason"] == reason]


async def set_esm_spec(kube: Kube, spec: dict[str, Any]) -> None:
    # A JSON patch carries no resourceVersion: the operator's status writes in between
    # cannot turn it into a 409 the way a GET-then-PUT can.
    await kube.request("PATCH", ESM_PATH, body=[{"op": "replace", "path": "/spec", "value": spec}],
                       content_type="application/json-patch+json")


async def test_overridden_global_settings_and_unknown_features_are_reported(
        *, kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    namespace = SCENARIO_NAMESPACES["shadowed"]
    await start_operator()
    try:
        # Every setting of globalConfig that the appConfig also sets, to another value: a
        # whole message longer than a line.
        await set_esm_spec(kube, {"globalConfig": {
            "logLevel": 4, "nodeSelector": {"eso-it/global": "yes"},
            "tolerations": [{"key": "eso-it/global", "operator": "Exists"}]}})
        # appConfig without logLevel: the API server stores logLevel 1, which wins.
        await esc.create({"controllerConfig": {"namespace": namespace},
                          "appConfig": {"webhookConfig": {}, "nodeSelector": {},
                                        "tolerations": []}})
        await wait_condition(esc, "Ready", "True", timeout=60)
        assert (await esc.get())["spec"]["appConfig"]["logLevel"] == 1
        deployment = await kube.request(
            "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/external-secrets")
        assert "--loglevel=info" in deployment["spec"]["template"]["spec"]["containers"][0][
            "args"]

        async def reported() -> None:
            ready = (await manager_entry(kube))["Ready"]
            assert (ready["status"], ready["reason"]) == ("True", "PartlyOverridden"), ready
            assert ready["message"].startswith(
                "globalConfig applies except logLevel, tolerations, nodeSelector"), ready
            assert ready["message"].endswith("(see kubectl describe esm cluster)"), ready
            [note] = await esm_notes(kube, "PartlyOverridden")
            assert "except globalConfig.logLevel, globalConfig.tolerations, " in note, note
            assert "set the log level in spec.appConfig.logLevel" in note, note

        await eventually(reported)

        # An unknown feature: Degraded on the ESM's own entry, the operand is not affected.
        await set_esm_spec(kube, {"features": [{"name": "NoSuchFeature", "enabled": "true"}]})

        async def refused() -> None:
            degraded = (await manager_entry(kube))["Degraded"]
            assert (degraded["status"], degraded["reason"]) == ("True", "UnknownFeature")
            assert "'NoSuchFeature' is not a feature of this operator" in degraded["message"]
            assert cluster.kubectl("get", "esm").stdout.split()[-2] == "2/3"

        await eventually(refused)

        # Many of them: counted on the line, every name in the Event.
        names = [f"NoSuchFeature{i:02d}" for i in range(12)]
        await set_esm_spec(kube, {"features": [{"name": name, "enabled": "true"}
                                               for name in names]})

        async def counted() -> None:
            degraded = (await manager_entry(kube))["Degraded"]
            assert degraded["message"].startswith(
                "spec.features: 12 names are not features of this operator: 'NoSuchFeature00'")
            notes = [n for n in await esm_notes(kube, "UnknownFeature") if "NoSuchFeature11" in n]
            assert notes, "no Event with every name yet"
            assert all(repr(name) in notes[0] for name in names), notes

        await eventually(counted)
        assert (await esc.condition("Ready") or {})["status"] == "True"
    finally:
        await set_esm_spec(kube, {})
