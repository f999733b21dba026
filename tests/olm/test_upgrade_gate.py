"""The upgrade gate, obeyed by the real OLM (docs/olm.md, "The upgrade gate").

The current release is installed from a catalog; its operator writes Upgradeable into the
spec of the OperatorCondition OLM created for its CSV, with the permissions of the Role OLM
created for exactly that object (the bundle grants none: 0 Forbidden in its log). With an
ExternalSecretsConfig whose managementState is Unmanaged the gate says False; the catalog then
gains a rebuild of the current tree at a higher version (devcluster/catalog.py `rebuild`), and
OLM keeps the new CSV Pending with reason OperatorConditionNotUpgradeable and the operator's
Deployment as it was. Once the administrator deletes the ExternalSecretsConfig the gate says
True, and the upgrade proceeds. Unmanaged keeps the test lean: nothing of the operand is
installed.

Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from devcluster import catalog
from manager import __version__
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.olm.conftest import CSVS, NAMESPACE, OlmCluster
from tests.upgrade.test_upgrade import ESC_PATH, ESM_PATH
from tests.waiting import eventually

CONDITIONS = f"/apis/operators.coreos.com/v2/namespaces/{NAMESPACE}/operatorconditions"
OPERATOR_DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{identity.DEPLOYMENT}"
_MAJOR, _MINOR, _PATCH = (int(part) for part in __version__.split("-")[0].split("."))
NEXT_VERSION = f"{_MAJOR}.{_MINOR}.{_PATCH + 1}-gate.1"
HELD_FOR = 15.0  # seconds the next CSV must stay Pending (OLM re-checks it about every 30 s)


def upgradeable(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    found = [c for c in conditions if c.get("type") == "Upgradeable"]
    assert len(found) == 1, conditions
    return found[0]


async def gate_seen_by_olm(cluster: OlmCluster, release: catalog.Release, status: str,
                           reason: str) -> dict[str, Any]:
    """Until the operator wrote Upgradeable `status` and OLM copied it to the status for the
    object's generation (what OLM's check reads)."""
    async def check() -> dict[str, Any]:
        condition = await cluster.kube.request("GET", f"{CONDITIONS}/{release.name}")
        spec = upgradeable(condition["spec"].get("conditions") or [])
        assert (spec["status"], spec["reason"]) == (status, reason), spec
        seen = upgradeable((condition.get("status") or {}).get("conditions") or [])
        assert seen["status"] == status, seen
        assert seen["observedGeneration"] == condition["metadata"]["generation"], condition
        return spec

    return await eventually(check, 120, what=f"Upgradeable {status} ({reason}) seen by OLM")


async def test_olm_holds_the_next_release_while_the_operator_is_not_upgradeable(
        olm_cluster: OlmCluster) -> None:
    cluster, kube = olm_cluster, olm_cluster.kube
    [current] = await cluster.publish(REPO_ROOT)
    await cluster.subscribe(current)
    await cluster.succeeded(current)
    cluster.mark(f"CSV {current.name} Succeeded")
    await eventually(lambda: kube.request("GET", ESM_PATH), 120,
                     what="the operator to create the ESM")
    await gate_seen_by_olm(cluster, current, "True", "AsExpected")
    cluster.mark("Upgradeable True (no ExternalSecretsConfig)")

    # Exactly OLM's grant: a Role for that one object; the bundle asks for nothing of it.
    role = await kube.request("GET", f"/apis/rbac.authorization.k8s.io/v1/namespaces/"
                              f"{NAMESPACE}/roles/{current.name}")
    assert role["rules"] == [{"verbs": ["get", "update", "patch"],
                              "apiGroups": ["operators.coreos.com"],
                              "resources": ["operatorconditions"],
                              "resourceNames": [current.name]}], role["rules"]
    assert not [rule for permission in current.csv["spec"]["install"]["spec"]["permissions"]
                + current.csv["spec"]["install"]["spec"]["clusterPermissions"]
                for rule in permission["rules"]
                if "operatorconditions" in rule.get("resources", [])]

    await kube.create(ESC_PATH.rsplit("/", 1)[0], {
        "apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
        "metadata": {"name": "cluster"}, "spec": {"managementState": "Unmanaged"}},
        field_manager="olm-tests")
    held = await gate_seen_by_olm(cluster, current, "False", "Unmanaged")
    cluster.mark("Upgradeable False: managementState Unmanaged")

    source = await cluster.rebuilt(NEXT_VERSION)
    cluster.mark(f"release {NEXT_VERSION} rebuilt from the current tree")
    [_, following] = await cluster.publish(REPO_ROOT, source)
    cluster.mark(f"catalog served: {current.name}, {following.name}")
    deployment = await kube.request("GET", OPERATOR_DEPLOYMENT)
    operator_pods = {p.pod for p in cluster.simulated.processes(NAMESPACE, identity.CONTAINER)}

    async def pending() -> dict[str, Any]:
        csv = await kube.request("GET", f"{CSVS}/{following.name}")
        status = csv.get("status") or {}
        assert (status.get("phase"), status.get("reason")) == (
            "Pending", "OperatorConditionNotUpgradeable"), status
        return dict(status)

    status = await eventually(pending, 120, what=f"CSV {following.name} held Pending")
    cluster.mark(f"CSV {following.name} Pending: OperatorConditionNotUpgradeable")
    assert held["message"] in status["message"], status
    held_until = time.monotonic() + HELD_FOR
    while time.monotonic() < held_until:
        await pending()
        await asyncio.sleep(1.0)
    still = await kube.request("GET", OPERATOR_DEPLOYMENT)
    assert still["metadata"]["generation"] == deployment["metadata"]["generation"]
    assert {p.pod for p in cluster.simulated.processes(NAMESPACE, identity.CONTAINER)} == (
        operator_pods)
    replaced = await kube.request("GET", f"{CSVS}/{current.name}")  # Replacing, yet running
    cluster.mark(f"still Pending {HELD_FOR:.0f} s later; {current.name} "
                 f"{replaced['status']['phase']}, its operator pod and Deployment unchanged")

    await kube.delete(ESC_PATH)  # the administrator's fix
    await gate_seen_by_olm(cluster, current, "True", "AsExpected")
    cluster.mark("ExternalSecretsConfig deleted: Upgradeable True")
    await cluster.succeeded(following)
    cluster.mark(f"CSV {following.name} Succeeded")
    await cluster.operator_passed(following)
    await gate_seen_by_olm(cluster, following, "True", "AsExpected")
    cluster.mark(f"{following.name}'s operator: Upgradeable True on its OperatorCondition")
    print(f"\nthe upgrade gate through OLM:\n{cluster.timeline()}")
    for release in (current, following):
        log = cluster.operator_log(release)
        forbidden = [line for line in log.splitlines() if "forbidden" in line.lower()]
        assert not forbidden, "\n".join(forbidden)
