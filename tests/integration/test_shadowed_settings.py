"""Nothing silently shadowed: when the ExternalSecretsConfig's appConfig (with the log level the
API server defaults to 1) hides a globalConfig setting of the ExternalSecretsManager, the
ESM's status says so; features this operator does not have are reported, not ignored."""

from __future__ import annotations

from typing import Any

from manager.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESM_PATH,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    eventually,
    wait_condition,
)


async def manager_entry(kube: Kube) -> dict[str, dict[str, Any]]:
    esm = await kube.request("GET", ESM_PATH)
    entry = next(e for e in esm["status"]["controllerStatuses"]
                 if e["name"] == "external-secrets-manager")
    return {c["type"]: c for c in entry["conditions"]}


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
        await set_esm_spec(kube, {"globalConfig": {"logLevel": 4}})
        # appConfig without logLevel: the API server stores logLevel 1, which wins.
        await esc.create({"controllerConfig": {"namespace": namespace},
                          "appConfig": {"webhookConfig": {}}})
        await wait_condition(esc, "Ready", "True", timeout=60)
        assert (await esc.get())["spec"]["appConfig"]["logLevel"] == 1
        deployment = await kube.request(
            "GET", f"/apis/apps/v1/namespaces/{namespace}/deployments/external-secrets")
        assert "--loglevel=info" in deployment["spec"]["template"]["spec"]["containers"][0][
            "args"]

        async def reported() -> None:
            ready = (await manager_entry(kube))["Ready"]
            assert (ready["status"], ready["reason"]) == ("True", "PartlyOverridden"), ready
            assert "except globalConfig.logLevel" in ready["message"]
            assert "set the log level in spec.appConfig.logLevel" in ready["message"]

        await eventually(reported)

        # An unknown feature: Degraded on the ESM's own entry, the operand is not affected.
        await set_esm_spec(kube, {"features": [{"name": "NoSuchFeature", "enabled": "true"}]})

        async def refused() -> None:
            degraded = (await manager_entry(kube))["Degraded"]
            assert (degraded["status"], degraded["reason"]) == ("True", "UnknownFeature")
            assert "'NoSuchFeature' is not a feature of this operator" in degraded["message"]
            assert cluster.kubectl("get", "esm").stdout.split()[-2] == "2/3"

        await eventually(refused)
        assert (await esc.condition("Ready") or {})["status"] == "True"
    finally:
        await set_esm_spec(kube, {})
