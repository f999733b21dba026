"""Moving the operand leaves nothing behind, and uninstalling one namespace spares the
cluster-scoped objects another operand namespace uses."""

from __future__ import annotations

from manager.client.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESC_API,
    EscHandle,
    StartOperator,
    UserObjects,
    esc_events,
    eventually,
    managed_objects,
    wait_condition,
)
from tests.integration.test_controller_install import expected_objects
from tests.integration.test_uninstall import kept, uninstall

OLD, NEW = "eso-it-move-old", "eso-it-move-new"


def namespaced(keys: set[tuple[str, str, str]], namespace: str) -> set[tuple[str, str, str]]:
    return {key for key in keys if key[1] == namespace}


async def test_recreated_with_another_namespace_prunes_the_old_operand(
        cluster: Cluster, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": OLD}})
    await wait_condition(esc, "Ready", "True")
    old_objects = namespaced(expected_objects({"controllerConfig": {"namespace": OLD}}), OLD)
    assert old_objects <= set(await managed_objects(kube, OLD))

    # Deleted and created again elsewhere (the namespace is immutable).
    await kube.delete(f"{ESC_API}/cluster")
    await operator.wait_idle()
    await esc.create({"controllerConfig": {"namespace": NEW}})
    await wait_condition(esc, "Ready", "True")

    async def moved() -> None:
        left = namespaced(set(await managed_objects(kube, OLD)), OLD)
        assert left == set(), sorted(left)
        new = namespaced(expected_objects({"controllerConfig": {"namespace": NEW}}), NEW)
        assert new <= set(await managed_objects(kube, NEW))

    await eventually(moved)
    # The old namespace itself stays (it may hold the users' Secrets).
    old_namespace = await kube.request("GET", f"/api/v1/namespaces/{OLD}")
    assert not old_namespace["metadata"].get("deletionTimestamp")
    events = await esc_events(kube, (await esc.get())["metadata"]["uid"])
    assert any(e["reason"] == "Applied" and e["note"].endswith(
        f"operand moved from namespace {OLD} to {NEW}") for e in events), events
    await user_objects.assert_untouched(kube)

    # Uninstalling the old namespace keeps the cluster-scoped objects the new operand uses.
    await operator.stop()
    code, output = await uninstall(cluster, "--yes", "--force", f"--namespace={OLD}")
    assert code == 0, output
    reasons = kept(output)
    for key in (("ClusterRole", "", "external-secrets-controller"),
                ("ClusterRoleBinding", "", "external-secrets-controller"),
                ("ValidatingWebhookConfiguration", "", "externalsecret-validate")):
        assert f"the operand in namespace {NEW} uses it" in reasons[key], output
    cluster_wide = {key for key in await managed_objects(kube, NEW) if not key[1]}
    assert ("ClusterRole", "", "external-secrets-controller") in cluster_wide
    assert ("ValidatingWebhookConfiguration", "", "secretstore-validate") in cluster_wide
