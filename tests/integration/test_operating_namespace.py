"""operatingNamespace narrows the controller's privileges, not only its flags.

The API server's own authorizer answers (SubjectAccessReview) what the controller's
ServiceAccount may do once the operator has applied the operand's RBAC.
"""

from __future__ import annotations

from typing import Any

from manager.client.kube import Kube
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    USER_NAMESPACE,
    EscHandle,
    StartOperator,
    UserObjects,
    eventually,
    managed_objects,
    wait_condition,
)

NAMESPACE = SCENARIO_NAMESPACES["operating-namespace"]
TEAM = "eso-it-team-a"  # created by the test, after the ExternalSecretsConfig names it
CONTROLLER_SA = f"system:serviceaccount:{NAMESPACE}:external-secrets"


async def controller_may(kube: Kube, verb: str, resource: str, namespace: str,
                         group: str = "") -> bool:
    review = await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": CONTROLLER_SA,
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}",
                            "system:authenticated"],
                 "resourceAttributes": {"namespace": namespace, "verb": verb,
                                        "group": group, "resource": resource}}})
    return bool(review["status"].get("allowed"))


async def rights(kube: Kube) -> dict[str, bool]:
    return {
        "read secrets in the operating namespace": await controller_may(
            kube, "get", "secrets", TEAM),
        "write secrets in the operating namespace": await controller_may(
            kube, "create", "secrets", TEAM),
        "read secrets in another namespace": await controller_may(
            kube, "get", "secrets", USER_NAMESPACE),
        "list secrets cluster-wide": await controller_may(kube, "list", "secrets", ""),
        "watch externalsecrets in the operating namespace": await controller_may(
            kube, "watch", "externalsecrets", TEAM, "external-secrets.io"),
        "watch externalsecrets in another namespace": await controller_may(
            kube, "watch", "externalsecrets", USER_NAMESPACE, "external-secrets.io"),
    }


async def test_operating_namespace_grants_rights_there_and_nowhere_else(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    await start_operator()
    spec: dict[str, Any] = {"controllerConfig": {"namespace": NAMESPACE},
                            "appConfig": {"operatingNamespace": TEAM}}
    await esc.create(spec)

    # The operating namespace does not exist yet: Degraded naming it; the rest is installed.
    degraded = await wait_condition(esc, "Degraded", "True", reason="OperatingNamespaceNotFound")
    assert "spec.appConfig.operatingNamespace" in degraded["message"]
    assert f'namespace "{TEAM}" does not exist' in await esc.failure_message()
    found = await managed_objects(kube, NAMESPACE)
    controller = found[("Deployment", NAMESPACE, "external-secrets")]
    assert f"--namespace={TEAM}" in controller["spec"]["template"]["spec"]["containers"][0]["args"]

    # It appears: the namespace watch ends the wait; the Role and RoleBinding land there.
    await kube.apply(f"/api/v1/namespaces/{TEAM}",
                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}},
                     field_manager="integration-tests")
    await wait_condition(esc, "Ready", "True")
    for kind in ("roles", "rolebindings"):
        assert await kube.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{TEAM}/{kind}/"
                              "external-secrets-controller")
    assert await kube.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                          "external-secrets-controller") is None

    async def narrowed() -> None:
        assert await rights(kube) == {
            "read secrets in the operating namespace": True,
            "write secrets in the operating namespace": True,
            "read secrets in another namespace": False,
            "list secrets cluster-wide": False,
            "watch externalsecrets in the operating namespace": True,
            "watch externalsecrets in another namespace": False,
        }

    await eventually(narrowed)

    # operatingNamespace removed: cluster-wide rights again, the Role in TEAM is pruned.
    await esc.patch_spec({"appConfig": {"operatingNamespace": None}})
    await wait_condition(esc, "Ready", "True")

    async def widened() -> None:
        assert all((await rights(kube)).values())
        assert await kube.get(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{TEAM}/roles/"
                              "external-secrets-controller") is None

    await eventually(widened)
    await user_objects.assert_untouched(kube)
