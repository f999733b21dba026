"""NetworkPolicies an administrator adds to the operand namespace are never pruned (issue 37,
item 7; docs/gitops.md).

Another field manager creates them with the real API server: one without labels, one that
copies the operator's managed-by label (which the operator's label-selected watch sees), and
one while the operator is down. They must keep their uid, resourceVersion and contents through
the passes their arrival triggers, through the operator pruning its own policies both ways
(its default provider egress replaced by a declared policy, then the declared one removed)
and through a restart; the operator's own policies follow the spec meanwhile, so pruning did
run.
"""

from __future__ import annotations

from typing import Any

from manager.client.kube import Kube
from manager.names import FIELD_MANAGER
from tests.integration.conftest import (
    MANAGED,
    EscHandle,
    OperatorThread,
    StartOperator,
    UserObjects,
    eventually,
    wait_condition,
)

NAMESPACE = "eso-it-gitops-policies"
POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}/networkpolicies"
ADMIN = "cluster-admin-gitops"  # the administrator's field manager (Argo CD, kubectl, ...)
DEFAULT_EGRESS = "allow-provider-egress-for-main-controller"
DECLARED = "allow-vault"


def admin_policy(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """An ingress policy for the controller's metrics from a monitoring namespace."""
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE}
    if labels:
        metadata["labels"] = labels
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy", "metadata": metadata,
            "spec": {"podSelector": {"matchLabels": {"app.kubernetes.io/name": "external-secrets"}},
                     "policyTypes": ["Ingress"],
                     "ingress": [{"from": [{"namespaceSelector": {"matchLabels": {
                         "kubernetes.io/metadata.name": "openshift-monitoring"}}}],
                         "ports": [{"protocol": "TCP", "port": 8080}]}]}}


PLAIN = "admin-allow-monitoring"
COPIED_LABELS = "admin-copied-labels"
WHILE_DOWN = "admin-while-operator-down"


async def create_admin_policy(kube: Kube, name: str, labels: dict[str, str] | None = None,
                              ) -> dict[str, Any]:
    return await kube.apply(f"{POLICIES}/{name}", admin_policy(name, labels),
                            field_manager=ADMIN)


async def assert_intact(kube: Kube, created: dict[str, dict[str, Any]]) -> None:
    """Each administrator's policy is the object it was made: same uid and resourceVersion
    (so untouched), and no field of the operator's."""
    for name, first in created.items():
        live = await kube.get(f"{POLICIES}/{name}")
        assert live is not None, f"NetworkPolicy {name} was deleted"
        meta = live["metadata"]
        assert meta["uid"] == first["metadata"]["uid"], f"{name} was deleted and re-created"
        assert meta["resourceVersion"] == first["metadata"]["resourceVersion"], \
            f"{name} was changed: {meta.get('managedFields')}"
        assert FIELD_MANAGER not in {e.get("manager") for e in meta.get("managedFields") or []}


def touched_admin_policies(operator: OperatorThread) -> list[tuple[str, str]]:
    """The operator's requests (any method) naming an administrator's policy."""
    return [(method, url) for method, url in operator.log.requests
            if "/networkpolicies/admin-" in url]


async def operator_policies(kube: Kube) -> set[str]:
    return {p["metadata"]["name"] for p in (await kube.list(
        POLICIES, label_selector=MANAGED))["items"]
        if FIELD_MANAGER in {e.get("manager") for e in p["metadata"].get("managedFields") or []}}


def pruned(operator: OperatorThread, name: str) -> bool:
    return ("DELETE", name) in {(method, url.split("?")[0].rpartition("/")[2])
                                for method, url in operator.log.writes()
                                if "/networkpolicies/" in url}


async def test_admin_network_policies_survive_passes_toggles_and_restarts(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    ours = await operator_policies(kube)
    assert {DEFAULT_EGRESS, "deny-all-traffic"} <= ours, ours

    # The administrator's policies arrive; the labelled one wakes the operator.
    passes = operator.passes
    created = {PLAIN: await create_admin_policy(kube, PLAIN),
               COPIED_LABELS: await create_admin_policy(kube, COPIED_LABELS, {
                   "app.kubernetes.io/managed-by": "external-secrets-operator",
                   "app.kubernetes.io/name": "external-secrets"})}
    await operator.wait_woken(passes, f"added NetworkPolicy {COPIED_LABELS}")
    await assert_intact(kube, created)
    await wait_condition(esc, "Ready", "True")

    # The operator's own policies toggled: its default egress is pruned for a declared one...
    await esc.patch_spec({"controllerConfig": {"networkPolicies": [
        {"name": DECLARED, "componentName": "ExternalSecretsCoreController",
         "egress": [{"to": [{"ipBlock": {"cidr": "10.0.5.17/32"}}],
                     "ports": [{"protocol": "TCP", "port": 8200}]}]}]}})

    async def declared() -> None:
        names = await operator_policies(kube)
        assert DECLARED in names, names
        assert DEFAULT_EGRESS not in names, names

    await eventually(declared)
    await wait_condition(esc, "Ready", "True")
    await operator.wait_idle()
    assert pruned(operator, DEFAULT_EGRESS), operator.log.writes()
    await assert_intact(kube, created)

    # ... and the declared one pruned when the declaration goes, the default back.
    await esc.patch_spec({"controllerConfig": {"networkPolicies": None}})

    async def default_again() -> None:
        names = await operator_policies(kube)
        assert DECLARED not in names, names
        assert DEFAULT_EGRESS in names, names

    await eventually(default_again)
    await wait_condition(esc, "Ready", "True")
    await operator.wait_idle()
    assert pruned(operator, DECLARED), operator.log.writes()
    await assert_intact(kube, created)
    assert touched_admin_policies(operator) == []

    # A restart, with one more policy added while no operator runs.
    await operator.stop()
    created[WHILE_DOWN] = await create_admin_policy(kube, WHILE_DOWN)
    restarted = await start_operator()
    await restarted.wait_idle(quiet=2.0)
    runtime = restarted.runtime
    assert runtime is not None
    assert runtime.last_pass is not None
    assert runtime.last_pass.result == "Ready", runtime.last_pass
    await assert_intact(kube, created)
    assert touched_admin_policies(restarted) == []
    assert await operator_policies(kube) == ours
    print(f"\nadministrator's NetworkPolicies intact: {sorted(created)}; the operator's: "
          f"{len(ours)}, pruned and restored: {DEFAULT_EGRESS}, pruned: {DECLARED}")
    await user_objects.assert_untouched(kube)
