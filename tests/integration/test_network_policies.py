"""The operand's NetworkPolicies select the operand's pods and nothing else in the namespace.

An administrator may pre-create the operand namespace and run other workloads in it. Every
policy the operator applies is evaluated by the API server itself: its podSelector becomes a
label selector for listing the namespace's Pods, the real ones the ReplicaSet controller
created for the operand's Deployments and for the other workloads.
"""

from __future__ import annotations

from typing import Any

from manager.client.kube import Kube
from tests.integration.conftest import (
    MANAGED,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    eventually,
    install_with_bitwarden,
    wait_condition,
)

NAMESPACE = SCENARIO_NAMESPACES["policies"]
POLICIES = f"/apis/networking.k8s.io/v1/namespaces/{NAMESPACE}/networkpolicies"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"

# Other workloads of the namespace: one with labels of its own, and one that looks like
# external-secrets installed by Helm (same name and instance labels as the operand's pods).
UNRELATED = {
    "billing": {"app": "billing", "app.kubernetes.io/name": "billing"},
    "helm-external-secrets": {"app.kubernetes.io/name": "external-secrets",
                              "app.kubernetes.io/instance": "external-secrets",
                              "app.kubernetes.io/managed-by": "Helm"},
}


def label_selector(selector: dict[str, Any]) -> str:
    """A LabelSelector object as the `labelSelector` query parameter."""
    terms = [f"{key}={value}" for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        operator = {"In": "in", "NotIn": "notin"}[expression["operator"]]
        terms.append(f"{expression['key']} {operator} ({','.join(expression['values'])})")
    assert terms, f"an empty podSelector selects every pod: {selector}"
    return ",".join(terms)


async def create_unrelated_workloads(kube: Kube) -> None:
    for name, labels in UNRELATED.items():
        deployment = {
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": NAMESPACE},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "containers": [{"name": "app", "image": "example.com/app:1"}]}}}}
        await kube.apply(f"{DEPLOYMENTS}/{name}", deployment, field_manager="someone-else")


async def pods_of(kube: Kube, name: str) -> set[str]:
    """The pods of Deployment `name`, by its own pod template's labels (all of them)."""
    deployment = await kube.request("GET", f"{DEPLOYMENTS}/{name}")
    labels = deployment["spec"]["template"]["metadata"]["labels"]

    async def created() -> set[str]:
        listing = await kube.list(PODS, label_selector=",".join(
            f"{key}={value}" for key, value in labels.items()))
        found = {p["metadata"]["name"] for p in listing["items"]}
        assert found, f"no pod of {name} yet"
        return found

    result: set[str] = await eventually(created)
    return result


async def test_no_policy_selects_a_pod_the_operator_did_not_render(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    await create_unrelated_workloads(kube)
    await start_operator()
    await install_with_bitwarden(kube, esc, NAMESPACE)
    ours = {name: await pods_of(kube, name)
            for name in ("external-secrets", "bitwarden-sdk-server")}
    unrelated = set().union(*[await pods_of(kube, name) for name in UNRELATED])

    policies = (await kube.list(POLICIES, label_selector=MANAGED))["items"]
    assert len(policies) >= 6, [p["metadata"]["name"] for p in policies]
    selected: dict[str, set[str]] = {}
    for policy in policies:
        listing = await kube.list(PODS, label_selector=label_selector(
            policy["spec"]["podSelector"]))
        selected[policy["metadata"]["name"]] = {p["metadata"]["name"] for p in listing["items"]}
    assert all(not names & unrelated for names in selected.values()), selected
    # The selectors do select the operand: deny-all covers both, each component's policy
    # its own pods.
    assert ours["external-secrets"] | ours["bitwarden-sdk-server"] <= selected["deny-all-traffic"]
    assert selected["allow-api-server-egress-for-main-controller"] == ours["external-secrets"]
    assert selected["allow-api-server-egress-for-bitwarden-server"] == ours[
        "bitwarden-sdk-server"]
    await user_objects.assert_untouched(kube)


async def test_declared_egress_replaces_the_default_and_removing_it_brings_it_back(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    vault = {"to": [{"ipBlock": {"cidr": "10.0.5.17/32"}}],
             "ports": [{"protocol": "TCP", "port": 8200}]}
    await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True")
    default = await kube.request("GET", f"{POLICIES}/allow-provider-egress-for-main-controller")
    assert default["spec"]["egress"] == [{}]
    assert default["spec"]["policyTypes"] == ["Egress"]

    await esc.patch_spec({"controllerConfig": {"networkPolicies": [
        {"name": "allow-vault", "componentName": "ExternalSecretsCoreController",
         "egress": [vault]}]}})

    async def narrowed() -> None:
        names = {p["metadata"]["name"]
                 for p in (await kube.list(POLICIES, label_selector=MANAGED))["items"]}
        assert "allow-vault" in names
        assert "allow-provider-egress-for-main-controller" not in names
        # The API server and DNS stay reachable through the operator's own policies.
        assert {"allow-api-server-egress-for-main-controller", "allow-to-dns"} <= names

    await eventually(narrowed)
    await wait_condition(esc, "Ready", "True")
    declared = await kube.request("GET", f"{POLICIES}/allow-vault")
    assert declared["spec"]["egress"] == [vault]
    assert declared["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == \
        "external-secrets"

    await esc.patch_spec({"controllerConfig": {"networkPolicies": None}})

    async def default_again() -> None:
        assert await kube.get(f"{POLICIES}/allow-vault") is None
        assert await kube.get(f"{POLICIES}/allow-provider-egress-for-main-controller")

    await eventually(default_again)
    await user_objects.assert_untouched(kube)
