"""The ExternalSecretsManager feature UnsafeAllowGenericTargets on a running installation: on,
the controller's Deployment gets --unsafe-allow-generic-targets and its ServiceAccount may
write ConfigMaps (cluster-wide, or in the operating namespace only), and the ESM status warns;
off, the flag and the RBAC are gone again (pruned) and so is the warning.

The API server's own authorizer answers what the controller may do (SubjectAccessReview).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from manager.client.kube import Kube
from manager.config import UNSAFE_ALLOW_GENERIC_TARGETS
from manager.names import GENERIC_TARGETS_ROLE
from manager.reporting.status import CONTROLLER_ESM
from tests.integration.conftest import (
    ESM_PATH,
    SCENARIO_NAMESPACES,
    USER_NAMESPACE,
    EscHandle,
    StartOperator,
    esc_events,
    esm_conditions,
    eventually,
    managed_objects,
    wait_condition,
)

NAMESPACE = SCENARIO_NAMESPACES["generic-targets"]
FLAG = "--unsafe-allow-generic-targets=true"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
CLUSTER_ROLE = f"{RBAC}/clusterroles/{GENERIC_TARGETS_ROLE}"
CLUSTER_BINDING = f"{RBAC}/clusterrolebindings/{GENERIC_TARGETS_ROLE}"
ROLE = f"{RBAC}/namespaces/{USER_NAMESPACE}/roles/{GENERIC_TARGETS_ROLE}"
BINDING = f"{RBAC}/namespaces/{USER_NAMESPACE}/rolebindings/{GENERIC_TARGETS_ROLE}"


async def set_feature(kube: Kube, enabled: str | None) -> None:
    features = ([{"name": UNSAFE_ALLOW_GENERIC_TARGETS, "enabled": enabled}]
                if enabled is not None else None)
    await kube.merge_patch(ESM_PATH, {"spec": {"features": features}},
                           field_manager="integration-tests")


@pytest_asyncio.fixture(loop_scope="session")
async def feature_reset(kube: Kube) -> AsyncIterator[None]:
    """The ESM outlives the test: leave it without the feature, as later tests expect."""
    yield
    await set_feature(kube, None)


async def controller_may(kube: Kube, verb: str, namespace: str) -> bool:
    """Whether the controller's ServiceAccount may `verb` ConfigMaps in `namespace`."""
    review = await kube.request("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
        "spec": {"user": f"system:serviceaccount:{NAMESPACE}:external-secrets",
                 "groups": ["system:serviceaccounts", f"system:serviceaccounts:{NAMESPACE}",
                            "system:authenticated"],
                 "resourceAttributes": {"namespace": namespace, "verb": verb,
                                        "resource": "configmaps"}}})
    return bool(review["status"].get("allowed"))


async def controller_args(kube: Kube) -> list[str]:
    found = await managed_objects(kube, NAMESPACE)
    deployment = found[("Deployment", NAMESPACE, "external-secrets")]
    args: list[str] = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def grants(role: dict[str, Any]) -> set[tuple[str, str]]:
    return {(resource, verb) for rule in role["rules"] for resource in rule["resources"]
            for verb in rule["verbs"]}


async def configmap_rights(kube: Kube) -> dict[str, bool]:
    return {verb: await controller_may(kube, verb, USER_NAMESPACE)
            for verb in ("get", "create", "update", "delete", "patch")}


READ_ONLY = {"get": True, "create": False, "update": False, "delete": False, "patch": False}
WRITE = {**READ_ONLY, "create": True, "update": True, "delete": True}


@pytest.mark.usefixtures("user_objects", "feature_reset")
async def test_generic_targets_on_then_narrowed_then_off(
        kube: Kube, esc: EscHandle, start_operator: StartOperator) -> None:
    operator = await start_operator()
    await set_feature(kube, None)
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True", timeout=60)
    assert FLAG not in await controller_args(kube)
    assert await kube.get(CLUSTER_ROLE) is None
    assert await configmap_rights(kube) == READ_ONLY

    # On: the flag, the ClusterRole and its binding, the right to write ConfigMaps anywhere.
    await set_feature(kube, "true")

    async def on() -> None:
        assert (await controller_args(kube)).count(FLAG) == 1
        role = await kube.get(CLUSTER_ROLE)
        assert role is not None
        assert grants(role) == {("configmaps", "create"), ("configmaps", "update"),
                                ("configmaps", "delete")}
        binding = await kube.get(CLUSTER_BINDING)
        assert binding is not None
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "external-secrets",
                                        "namespace": NAMESPACE}]
        assert await configmap_rights(kube) == WRITE
        assert await controller_may(kube, "create", "default")  # in every namespace

    await eventually(on, timeout=30)
    await wait_condition(esc, "Ready", "True", timeout=60)

    # The ESM says what it costs: Ready, not Degraded; the whole text in an Event.
    async def warned() -> dict[str, dict[str, Any]]:
        conditions = await esm_conditions(kube, CONTROLLER_ESM)
        assert conditions["Ready"]["reason"] == "GenericTargetsEnabled", conditions
        return conditions

    conditions = await eventually(warned, timeout=20)
    assert conditions["Ready"]["status"] == "True"
    assert conditions["Degraded"]["status"] == "False"
    assert "slower" in conditions["Ready"]["message"]
    uid = (await kube.request("GET", ESM_PATH))["metadata"]["uid"]

    async def event() -> str:
        notes = [e.get("note", "") for e in await esc_events(kube, uid)
                 if e["reason"] == "GenericTargetsEnabled"]
        assert notes, "no GenericTargetsEnabled Event about the ESM"
        return str(notes[-1])

    note = await eventually(event, timeout=20)
    assert f"ClusterRole {GENERIC_TARGETS_ROLE}" in note
    assert "unencrypted at rest" in note

    # operatingNamespace: a Role there replaces the ClusterRole (pruned).
    await esc.patch_spec({"appConfig": {"operatingNamespace": USER_NAMESPACE}})

    async def narrowed() -> None:
        assert await kube.get(CLUSTER_ROLE) is None
        assert await kube.get(CLUSTER_BINDING) is None
        role = await kube.get(ROLE)
        assert role is not None
        assert grants(role) == {("configmaps", "create"), ("configmaps", "update"),
                                ("configmaps", "delete")}
        assert await kube.get(BINDING) is not None
        assert await configmap_rights(kube) == WRITE
        assert not await controller_may(kube, "create", "default")
        assert FLAG in await controller_args(kube)

    await eventually(narrowed, timeout=30)
    await wait_condition(esc, "Ready", "True", timeout=60)

    # Off: the flag, the Role and its binding go; the warning too.
    await set_feature(kube, "false")

    async def off() -> None:
        assert FLAG not in await controller_args(kube)
        assert await kube.get(ROLE) is None
        assert await kube.get(BINDING) is None
        assert await kube.get(CLUSTER_ROLE) is None
        assert await configmap_rights(kube) == READ_ONLY
        assert not await controller_may(kube, "create", "default")
        conditions = await esm_conditions(kube, CONTROLLER_ESM)
        assert conditions["Ready"]["reason"] == "Observed", conditions

    await eventually(off, timeout=30)
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
