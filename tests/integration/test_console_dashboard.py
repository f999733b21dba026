"""The operand's dashboard in OpenShift's console (manager/render/dashboard.py), on the real
API server, with the operator authenticated as its own ServiceAccount and the shipped RBAC
(manifests/operator/rbac.yaml, unchanged for this: its ConfigMap rule is cluster-wide).

With OperandMonitoring on and the monitoring API served, the dashboard waits for the
console's namespace: `openshift-config-managed` created later is noticed by its watch (the
resync is an hour away) and the ConfigMap appears there. Turning the feature off prunes it,
managementState Removed deletes it; the ConfigMaps of others in that namespace (another
dashboard, one that copied our label) are never touched. The namespace is OpenShift's: the
operator neither creates it nor deletes it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from manager.client.kube import Kube, install_crds
from manager.names import CONSOLE_DASHBOARDS_NAMESPACE, DASHBOARD_CONFIGMAP
from manager.runtime.operator import load_crds
from tests.conftest import Cluster
from tests.integration.conftest import (
    MANAGED,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    eventually,
    wait_condition,
)
from tests.integration.test_controller_rbac import service_account_kubeconfig
from tests.integration.test_monitoring import remove_monitoring_crds, set_feature

NAMESPACE = SCENARIO_NAMESPACES["monitoring"]
CONSOLE = f"/api/v1/namespaces/{CONSOLE_DASHBOARDS_NAMESPACE}"
CONFIGMAPS = f"{CONSOLE}/configmaps"
DASHBOARD = f"{CONFIGMAPS}/{DASHBOARD_CONFIGMAP}"
OTHERS = "console-tests"  # the field manager of what the operator must leave alone


def others_configmaps() -> list[dict[str, Any]]:
    """What others keep in the console's namespace: a dashboard of another product, and one
    that copied our managed-by label without the operator ever applying it."""
    def configmap(name: str, labels: dict[str, str]) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": CONSOLE_DASHBOARDS_NAMESPACE,
                             "labels": labels},
                "data": {"board.json": json.dumps({"title": name, "rows": []})}}

    return [configmap("grafana-dashboard-someone-else", {"console.openshift.io/dashboard": "true"}),
            configmap("copied-our-label", {"app.kubernetes.io/managed-by":
                                           "external-secrets-operator"})]


@pytest_asyncio.fixture(loop_scope="session")
async def monitoring_api(kube: Kube, crd_dir: Path) -> AsyncIterator[None]:
    """The monitoring CRDs served, no console namespace yet; afterwards neither."""
    await install_crds(kube, load_crds(crd_dir / "prometheus-operator"),
                       field_manager="prometheus-operator")
    await kube.delete(CONSOLE)

    async def gone() -> None:  # the namespace controller empties it first
        assert await kube.get(CONSOLE) is None

    await eventually(gone, timeout=60)
    yield
    await set_feature(kube, False)
    await kube.delete(CONSOLE)
    await remove_monitoring_crds(kube)  # later tests expect a cluster without them


async def versions(kube: Kube) -> dict[str, str]:
    """resourceVersion of the others' ConfigMaps in the console's namespace, by name (not
    kube-root-ca.crt, which Kubernetes adds to every namespace)."""
    listing = await kube.list(CONFIGMAPS)
    names = {obj["metadata"]["name"] for obj in others_configmaps()}
    return {item["metadata"]["name"]: item["metadata"]["resourceVersion"]
            for item in listing.get("items") or [] if item["metadata"]["name"] in names}


@pytest.mark.usefixtures("user_objects", "monitoring_api")
async def test_the_dashboard_follows_the_console_namespace_and_the_feature(
        *, kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator,
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    kubeconfig = await service_account_kubeconfig(kube, cluster, tmp_path)
    operator = await start_operator(kubeconfig=str(kubeconfig))
    await set_feature(kube, True)
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    assert await kube.get(CONSOLE) is None  # plain Kubernetes so far: nothing to render

    # The console's namespace appears (OpenShift): its watch wakes the operator (the resync
    # is an hour away), and the dashboard is applied there.
    before = operator.passes
    await kube.apply(CONSOLE, {"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": CONSOLE_DASHBOARDS_NAMESPACE}},
                     field_manager=OTHERS)

    async def shown() -> dict[str, Any]:
        configmap = await kube.get(DASHBOARD)
        assert configmap is not None, "no dashboard yet"
        return configmap

    configmap = await eventually(shown, timeout=20)
    await operator.wait_woken(before, f"added Namespace {CONSOLE_DASHBOARDS_NAMESPACE}")
    # What others keep there (one of them wakes the operator: it has our label).
    before = operator.passes
    for obj in others_configmaps():
        await kube.apply(f"{CONFIGMAPS}/{obj['metadata']['name']}", obj, field_manager=OTHERS)
    await operator.wait_woken(before, "ConfigMap copied-our-label")
    others = await versions(kube)
    assert len(others) == 2
    labels = configmap["metadata"]["labels"]
    assert labels["console.openshift.io/dashboard"] == "true"
    assert f"{labels['app.kubernetes.io/managed-by']}" == "external-secrets-operator"
    [text] = configmap["data"].values()
    board = json.loads(text)  # what the console parses
    assert board["title"] == "External Secrets / Operand"
    assert any(f'namespace=\\"{NAMESPACE}\\"' in json.dumps(panel)
               for row in board["rows"] for panel in row["panels"])
    await wait_condition(esc, "Ready", "True", timeout=30)

    # The feature off: the dashboard is pruned, the others' ConfigMaps stay as they were.
    await set_feature(kube, False)

    async def pruned() -> None:
        assert await kube.get(DASHBOARD) is None

    await eventually(pruned, timeout=20)
    await operator.wait_idle()
    assert await versions(kube) == others
    assert await kube.get(CONSOLE) is not None  # not ours to delete

    # On again, then managementState Removed: the removal takes the dashboard too, though it
    # is outside the operand namespace, and again nothing else.
    await set_feature(kube, True)
    await eventually(shown, timeout=20)
    await esc.patch_spec({"managementState": "Removed"})
    await wait_condition(esc, "Ready", "False", reason="Removed", timeout=60)
    assert await kube.get(DASHBOARD) is None
    assert await versions(kube) == others
    listing = await kube.list(CONFIGMAPS, label_selector=MANAGED)
    assert [item["metadata"]["name"] for item in listing["items"]] == ["copied-our-label"]
    forbidden = [r.getMessage() for r in caplog.records if " 403 " in r.getMessage()]
    assert forbidden == []
