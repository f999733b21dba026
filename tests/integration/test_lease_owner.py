"""The leader election Lease goes with the operator's Deployment (manager/runtime/leader.py).

OLM uninstalls the operator by deleting its Deployment; the leader releases the Lease on
SIGTERM, but a released Lease is still an object. Here the elector runs as the operator's
ServiceAccount with the shipped RBAC, and the simulated cluster's real
kube-controller-manager collects garbage:

- where the operator's Deployment exists, the Lease names it as owner (on creation, on
  taking a Lease written without an owner, as a release without it left one, and after the
  release on stop), and deleting the Deployment deletes the Lease;
- where it does not (the operator runs outside the cluster), the Lease has no owner.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from manager.client.kube import Kube
from manager.names import LEASE_NAME, OPERATOR_DEPLOYMENT
from manager.runtime.leader import LeaderElector, LeaseTiming
from tests.conftest import Cluster
from tests.integration.conftest import OPERATOR_NAMESPACE, eventually
from tests.integration.test_controller_rbac import service_account_kubeconfig

LEASES = f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases"
LEASE_PATH = f"{LEASES}/{LEASE_NAME}"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{OPERATOR_NAMESPACE}/deployments"
DEPLOYMENT_PATH = f"{DEPLOYMENTS}/{OPERATOR_DEPLOYMENT}"
TIMING = LeaseTiming(4, 3, 1)
FIELD_MANAGER = "integration-tests"


@pytest_asyncio.fixture(loop_scope="session")
async def operator_client(kube: Kube, cluster: Cluster, tmp_path: Path,
                          ) -> AsyncIterator[Kube]:
    """A client authenticated as the operator's ServiceAccount (the shipped RBAC only); no
    Lease and no operator Deployment before and after."""
    kubeconfig = await service_account_kubeconfig(kube, cluster, tmp_path)
    await kube.delete(LEASE_PATH)
    await kube.delete(DEPLOYMENT_PATH)
    client = Kube.connect(kubeconfig)
    try:
        yield client
    finally:
        await client.close()
        await kube.delete(LEASE_PATH)
        await kube.delete(DEPLOYMENT_PATH)


async def operator_deployment(kube: Kube) -> dict[str, Any]:
    """The operator's Deployment, as OLM would create it (no replicas: only its uid counts)."""
    labels = {"app.kubernetes.io/name": OPERATOR_DEPLOYMENT}
    return await kube.create(DEPLOYMENTS, {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": OPERATOR_DEPLOYMENT, "namespace": OPERATOR_NAMESPACE},
        "spec": {"replicas": 0, "selector": {"matchLabels": labels},
                 "template": {"metadata": {"labels": labels},
                              "spec": {"containers": [{"name": "manager",
                                                       "image": "example.invalid/operator"}]}}}},
        field_manager=FIELD_MANAGER)


def owners(lease: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    return [(o.get("apiVersion"), o.get("kind"), o.get("name"), o.get("uid"))
            for o in lease["metadata"].get("ownerReferences") or []]


async def test_the_lease_goes_with_the_operators_deployment(
        kube: Kube, operator_client: Kube) -> None:
    deployment = await operator_deployment(kube)
    expected = [("apps/v1", "Deployment", OPERATOR_DEPLOYMENT, deployment["metadata"]["uid"])]
    elector = LeaderElector(operator_client, OPERATOR_NAMESPACE, "lease-owner_1", TIMING)
    await elector.acquire()
    assert owners(await kube.request("GET", LEASE_PATH)) == expected
    await elector.release()  # a clean stop (SIGTERM): the Lease stays, free, still owned
    released = await kube.request("GET", LEASE_PATH)
    assert released["spec"].get("holderIdentity") in (None, "")
    assert owners(released) == expected

    await kube.delete(DEPLOYMENT_PATH)  # OLM's uninstall

    async def collected() -> None:
        exists = await kube.get(LEASE_PATH) is not None
        assert not exists, "the Lease is still there"

    await eventually(collected, 60)


async def test_a_lease_without_owner_gains_it_when_taken(
        kube: Kube, operator_client: Kube) -> None:
    """A Lease an earlier release left (free, no owner) gets the owner with the take."""
    await kube.create(LEASES, {
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": LEASE_NAME, "namespace": OPERATOR_NAMESPACE},
        "spec": {"holderIdentity": "", "leaseDurationSeconds": 1}}, field_manager=FIELD_MANAGER)
    deployment = await operator_deployment(kube)
    elector = LeaderElector(operator_client, OPERATOR_NAMESPACE, "lease-owner_2", TIMING)
    await elector.acquire()
    lease = await kube.request("GET", LEASE_PATH)
    assert lease["spec"]["holderIdentity"] == "lease-owner_2"
    assert owners(lease) == [("apps/v1", "Deployment", OPERATOR_DEPLOYMENT,
                              deployment["metadata"]["uid"])]
    await elector.release()


async def test_outside_the_cluster_the_lease_has_no_owner(
        kube: Kube, operator_client: Kube) -> None:
    elector = LeaderElector(operator_client, OPERATOR_NAMESPACE, "lease-owner_3", TIMING)
    await elector.acquire()
    assert owners(await kube.request("GET", LEASE_PATH)) == []
    await elector.release()
