"""OperandMonitoring: the monitoring CRDs (from the pinned prometheus-operator module) arrive
after the operator started, and the ServiceMonitors and the PrometheusRule appear without a
restart; removing the feature from the ExternalSecretsManager prunes them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from manager.config import OPERAND_MONITORING
from manager.kube import CRD_COLLECTION, Kube, install_crds
from manager.operator import load_crds
from tests.integration.conftest import (
    ESM_PATH,
    MANAGED,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    eventually,
    wait_condition,
)

NAMESPACE = SCENARIO_NAMESPACES["monitoring"]
MONITORING_CRDS = ("servicemonitors.monitoring.coreos.com",
                   "prometheusrules.monitoring.coreos.com")
SERVICE_MONITORS = f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/servicemonitors"
PROMETHEUS_RULES = f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/prometheusrules"


async def remove_monitoring_crds(kube: Kube) -> None:
    for name in MONITORING_CRDS:
        await kube.delete(f"{CRD_COLLECTION}/{name}")

    async def gone() -> None:
        for name in MONITORING_CRDS:
            assert await kube.get(f"{CRD_COLLECTION}/{name}") is None, name
        served = await kube.get("/apis/monitoring.coreos.com/v1")
        assert not (served or {}).get("resources"), "monitoring.coreos.com/v1 is still served"

    await eventually(gone, timeout=30)


async def set_feature(kube: Kube, enabled: bool) -> None:
    features = [{"name": OPERAND_MONITORING, "enabled": "true"}] if enabled else None
    await kube.merge_patch(ESM_PATH, {"spec": {"features": features}},
                           field_manager="integration-tests")


@pytest_asyncio.fixture(loop_scope="session")
async def without_monitoring_crds(kube: Kube) -> AsyncIterator[None]:
    await remove_monitoring_crds(kube)
    yield
    await set_feature(kube, False)
    await remove_monitoring_crds(kube)  # later tests expect a cluster without them


async def names(kube: Kube, collection: str) -> set[str]:
    listing = await kube.list(collection, label_selector=MANAGED)
    return {item["metadata"]["name"] for item in listing.get("items") or []}


@pytest.mark.usefixtures("user_objects", "without_monitoring_crds")
async def test_monitoring_appears_with_its_crds_and_goes_with_the_switch(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, crd_dir: Path) -> None:
    operator = await start_operator()
    await set_feature(kube, True)
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    passes = operator.passes

    # The CRDs arrive while the operator runs: no restart, no resync (an hour away).
    await install_crds(kube, load_crds(crd_dir / "prometheus-operator"),
                       field_manager="prometheus-operator")

    async def monitored() -> None:
        assert await names(kube, SERVICE_MONITORS) == {
            "external-secrets-metrics", "external-secrets-webhook",
            "external-secrets-cert-controller-metrics"}
        assert await names(kube, PROMETHEUS_RULES) == {"external-secrets"}

    await eventually(monitored, timeout=20)
    assert operator.passes > passes
    rule = await kube.request("GET", f"{PROMETHEUS_RULES}/external-secrets")
    alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
    assert "ExternalSecretsDeploymentUnavailable" in alerts
    await wait_condition(esc, "Ready", "True", timeout=30)

    # The switch goes: everything it rendered is pruned, the rest of the operand stays.
    await set_feature(kube, False)

    async def pruned() -> None:
        assert await names(kube, SERVICE_MONITORS) == set()
        assert await names(kube, PROMETHEUS_RULES) == set()

    await eventually(pruned, timeout=20)
    # The rest of the operand stays.
    assert await kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/external-secrets")
    await wait_condition(esc, "Ready", "True", timeout=30)
