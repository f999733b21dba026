"""The upgrade gate, obeyed by the real OLM (docs/olm.md, "The upgrade gate").

The current release is installed from a catalog; its operator writes Upgradeable into the
spec of the OperatorCondition OLM created for its CSV, with the permissions of the Role OLM
created for exactly that object (the bundle grants none: 0 Forbidden in its log). With an
ExternalSecretsConfig whose managementState is Unmanaged the gate says False; the catalog then
gains a rebuild of the current tree at a higher version (devcluster/catalog.py `rebuild`), and
OLM keeps the new CSV Pending with reason OperatorConditionNotUpgradeable and the operator's
Deployment as it was. That must hold when OLM checks again, not only at its first check:
olm-operator checks the gate whenever it syncs the Pending CSV, and writes the CSV's status
only when its verdict changes, so the test makes it check and say so (it overwrites the CSV's
status message; only OLM's sync writes the verdict back), polling the OperatorCondition and the
CSV every second meanwhile. Once the administrator deletes the ExternalSecretsConfig the gate
says True, and the upgrade proceeds. Unmanaged keeps the test lean: nothing of the operand is
installed.

Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

from devcluster import catalog
from manager import __version__
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.e2e.operator_process import assert_log_clean
from tests.olm.conftest import CSVS, FIELD_MANAGER, NAMESPACE, OlmCluster
from tests.upgrade.test_upgrade import ESC_PATH, ESM_PATH
from tests.waiting import eventually

CONDITIONS = f"/apis/operators.coreos.com/v2/namespaces/{NAMESPACE}/operatorconditions"
OPERATOR_DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{identity.DEPLOYMENT}"
_MAJOR, _MINOR, _PATCH = (int(part) for part in __version__.split("-")[0].split("."))
NEXT_VERSION = f"{_MAJOR}.{_MINOR}.{_PATCH + 1}-gate.1"
HELD_FOR = 15.0  # seconds at least that the next CSV is watched Pending
RECHECK_TIMEOUT = 60.0  # seconds for OLM to answer the touch of the CSV's status
NOT_UPGRADEABLE = "OperatorConditionNotUpgradeable"
TOUCH = "overwritten by the test: OLM writes its verdict back when it checks again"


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


@dataclass(frozen=True)
class Observation:
    """The gate and the held CSV, as one poll saw them."""

    at: float  # time.monotonic()
    written: str  # Upgradeable as the operator wrote it (spec)
    seen: str  # Upgradeable as OLM copied it (status: what OLM's check reads)
    phase: str
    reason: str
    message: str
    updated: str  # the CSV's status.lastUpdateTime


async def observe(cluster: OlmCluster, current: catalog.Release, following: catalog.Release,
                  ) -> Observation:
    condition = await cluster.kube.request("GET", f"{CONDITIONS}/{current.name}")
    status = (await cluster.kube.request("GET", f"{CSVS}/{following.name}")).get("status") or {}
    return Observation(
        time.monotonic(),
        upgradeable(condition["spec"].get("conditions") or [])["status"],
        upgradeable((condition.get("status") or {}).get("conditions") or [])["status"],
        status.get("phase", ""), status.get("reason", ""), status.get("message", ""),
        status.get("lastUpdateTime", ""))


async def held_through_a_recheck(cluster: OlmCluster, current: catalog.Release,
                                 following: catalog.Release, verdict: str,
                                 ) -> list[Observation]:
    """Every observation, one a second, for HELD_FOR seconds at least and until OLM has
    checked the gate again: the CSV's status message is overwritten first, and only OLM's sync
    of the Pending CSV, which checks the gate, writes `verdict` back. Each one must see
    Upgradeable False (written and seen) and the CSV Pending for the gate."""
    touched = await cluster.kube.merge_patch(f"{CSVS}/{following.name}/status", {
        "status": {"message": TOUCH}}, field_manager=FIELD_MANAGER)
    assert touched["status"]["message"] == TOUCH, touched["status"]
    cluster.mark(f"CSV {following.name}: status message overwritten by the test")
    touched_at, observations = time.monotonic(), list[Observation]()
    while True:
        now = await observe(cluster, current, following)
        observations.append(now)
        assert (now.written, now.seen, now.phase, now.reason) == (
            "False", "False", "Pending", NOT_UPGRADEABLE), observations
        assert now.message in (TOUCH, verdict), observations
        if now.at - touched_at >= HELD_FOR and rechecked(observations, verdict):
            return observations
        assert now.at - touched_at < RECHECK_TIMEOUT, (
            f"OLM did not check the gate again: {observations}")
        await asyncio.sleep(1.0)


def olm_syncs(cluster: OlmCluster, csv: str) -> int:
    """How many syncs of the Pending CSV `csv` olm-operator has logged so far: here each ends
    with a line naming it (`couldn't ensure RBAC in target namespaces ... phase=Pending`, as
    its AllNamespaces group asks for no roles), after the gate was checked."""
    log = (cluster.simulated.workdir / "olm-operator.log").read_text(errors="replace")
    return sum(f"csv={csv} " in line and "phase=Pending" in line for line in log.splitlines())


def rechecked(observations: list[Observation], verdict: str) -> Observation | None:
    """The first observation of OLM's verdict written back after the touch."""
    return next((o for o in observations if o.message == verdict), None)


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

    # OLM's grant: a Role for that one object; the bundle asks only for the list and watch
    # of the gate's watch, in the operator's namespace, and never for a write.
    role = await kube.request("GET", f"/apis/rbac.authorization.k8s.io/v1/namespaces/"
                              f"{NAMESPACE}/roles/{current.name}")
    assert role["rules"] == [{"verbs": ["get", "update", "patch"],
                              "apiGroups": ["operators.coreos.com"],
                              "resources": ["operatorconditions"],
                              "resourceNames": [current.name]}], role["rules"]
    install = current.csv["spec"]["install"]["spec"]
    asked = [(kind, rule) for kind in ("permissions", "clusterPermissions")
             for permission in install[kind] for rule in permission["rules"]
             if "operatorconditions" in rule.get("resources", [])]
    assert asked == [("permissions", {"apiGroups": ["operators.coreos.com"],
                                      "resources": ["operatorconditions"],
                                      "verbs": ["list", "watch"]})], asked

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
        assert (status.get("phase"), status.get("reason")) == ("Pending", NOT_UPGRADEABLE), status
        return dict(status)

    status = await eventually(pending, 120, what=f"CSV {following.name} held Pending")
    cluster.mark(f"CSV {following.name} Pending: {NOT_UPGRADEABLE}")
    assert held["message"] in status["message"], status
    syncs = olm_syncs(cluster, following.name)
    observations = await held_through_a_recheck(cluster, current, following, status["message"])
    syncs = olm_syncs(cluster, following.name) - syncs
    recheck = rechecked(observations, status["message"])
    assert recheck is not None
    cluster.mark("OLM checked the gate again: Pending, its verdict written back (lastUpdateTime "
                 f"{status['lastUpdateTime']} -> {recheck.updated})", at=recheck.at)
    still = await kube.request("GET", OPERATOR_DEPLOYMENT)
    assert still["metadata"]["generation"] == deployment["metadata"]["generation"]
    assert {p.pod for p in cluster.simulated.processes(NAMESPACE, identity.CONTAINER)} == (
        operator_pods)
    replaced = await kube.request("GET", f"{CSVS}/{current.name}")  # Replacing, yet running
    # Its log while its pod exists (operator_log finds a release's pods by their image).
    assert_log_clean(cluster.operator_log(current), f"{current.name}'s operator", forbidden=True)
    cluster.mark(f"Upgradeable False and {following.name} Pending in all {len(observations)} "
                 f"polls over {observations[-1].at - observations[0].at:.0f} s (olm-operator "
                 f"logged {syncs} syncs of it meanwhile); {current.name} "
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
    assert_log_clean(cluster.operator_log(following), f"{following.name}'s operator",
                     forbidden=True)
