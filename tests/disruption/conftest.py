"""The disruption suite: the stack keeps admitting and syncing while the cluster changes under it.

One operand install serves a whole module (installing it costs about 15 s; each scenario then
disrupts it and waits until it has recovered): the operator runs in-process
(tests/integration's OperatorThread), the operand really runs (the pod runner), and each
module sets how many webhook replicas it wants (`WEBHOOK_REPLICAS` in the module).

During each scenario the samplers run and the figures are taken as
tests/disruption/figures.py says (`measure`): refused admissions, harm to the synced Secret,
sync gaps, syncing again, Ready not True or unreadable, whole again. No synced Secret may ever
be harmed, every figure but the refusals is held to the bounds of the scenario's kind, and no
pass of the operator may crash (checked after each scenario and when the module ends); how
many admissions may be refused is each test's to say (zero with two webhook replicas).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import pytest_asyncio

from manager.client.kube import Kube
from manager.runtime.operator import OperatorOptions
from tests.conftest import Cluster
from tests.disruption import figures
from tests.disruption.figures import (  # re-exported for the test modules
    FIGURES,
    Figures,
    Kind,
    Watched,
    admissions_refused,
    assert_no_admission_refused,
    measure,
)
from tests.integration import conftest as integration
from tests.integration.conftest import (
    EscHandle,
    OperatorThread,
    remove_operand_webhooks,
)
from tests.operand import remove_operand
from tests.waiting import eventually

# The integration suite's fixtures, registered here too.
crd_dir = integration.crd_dir
operator_crds = integration.operator_crds
operand_crds = integration.operand_crds

NAMESPACE = "eso-disruption"
USER_NAMESPACE = "eso-disruption-user"
FIELD_MANAGER = "disruption-tests"
SYNCED = "disruption-synced"
STORES = f"/apis/external-secrets.io/v1/namespaces/{USER_NAMESPACE}/secretstores"
EXTERNAL_SECRETS = f"/apis/external-secrets.io/v1/namespaces/{USER_NAMESPACE}/externalsecrets"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
WEBHOOK_SELECTOR = "app.kubernetes.io/name=external-secrets-webhook"
__all__ = ["FIGURES", "Figures", "Kind", "admissions_refused", "assert_no_admission_refused"]


@dataclass
class Stack:
    """The installed stack a module disrupts."""

    kube: Kube
    cluster: Cluster
    esc: EscHandle
    operator: OperatorThread
    webhook_replicas: int


# --- the operand's state and one scenario -----------------------------------------------------


def watched(stack: Stack) -> Watched:
    return Watched(stack.kube, stack.esc, NAMESPACE, USER_NAMESPACE, SYNCED, SYNCED)


async def deployments_whole(kube: Kube) -> None:
    await figures.deployments_whole(kube, NAMESPACE)


async def wait_whole(stack: Stack, timeout: float = 90.0) -> None:
    await figures.wait_whole(watched(stack), timeout)


async def pods(kube: Kube, selector: str) -> list[dict[str, Any]]:
    listing = await kube.list(PODS, label_selector=selector)
    return [p for p in listing["items"] if not p["metadata"].get("deletionTimestamp")]


@contextlib.asynccontextmanager
async def measured(stack: Stack, scenario: str, kind: Kind) -> AsyncIterator[list[str]]:
    """The disruption in the body, measured and held to the bounds of `kind`
    (tests/disruption/figures.py: `measure`); then no pass of the operator may have crashed."""
    async with measure(watched(stack), scenario, kind=kind) as notes:
        yield notes
    stack.operator.assert_healthy()


# --- the installed stack, once per module -----------------------------------------------------


def _store() -> dict[str, Any]:
    return {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": "disruption-store", "namespace": USER_NAMESPACE},
            "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v1"}]}}}}


def _external_secret() -> dict[str, Any]:
    # Refreshed every second, so a stalled controller shows as a gap in status.refreshTime.
    return {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": SYNCED, "namespace": USER_NAMESPACE},
            "spec": {"refreshInterval": "1s",
                     "secretStoreRef": {"name": "disruption-store", "kind": "SecretStore"},
                     "target": {"name": SYNCED},
                     "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}}


async def _user_objects(kube: Kube) -> None:
    """The store and the ExternalSecret, admitted by the real webhook; then the synced Secret."""
    await kube.apply(f"/api/v1/namespaces/{USER_NAMESPACE}",
                     {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": USER_NAMESPACE}}, field_manager=FIELD_MANAGER)

    async def create() -> None:
        for collection, body in ((STORES, _store()), (EXTERNAL_SECRETS, _external_secret())):
            await kube.apply(f"{collection}/{body['metadata']['name']}", body,
                             field_manager=FIELD_MANAGER)

    await eventually(create, 60, what="the webhook to admit the user objects")

    async def synced() -> None:
        secret = await kube.get(f"/api/v1/namespaces/{USER_NAMESPACE}/secrets/{SYNCED}")
        assert secret is not None, "not synced yet"
        assert (secret.get("data") or {}).get("k"), "synced without its key"

    await eventually(synced, 60, what="the synced Secret")


async def _remove_user_objects(kube: Kube) -> None:
    for path in (f"{EXTERNAL_SECRETS}/{SYNCED}", f"{STORES}/disruption-store"):
        with contextlib.suppress(Exception):  # the webhook may be gone already
            await kube.delete(path)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def stack(request: pytest.FixtureRequest, cluster: Cluster, kube: Kube,
                operator_crds: None, operand_crds: None) -> AsyncIterator[Stack]:
    """The operator and an operand with the module's webhook replicas, installed once."""
    replicas = int(request.module.WEBHOOK_REPLICAS)
    await remove_operand_webhooks(kube)
    operator = await OperatorThread(OperatorOptions(
        kubeconfig=str(cluster.kubeconfig), resync_seconds=3600.0)).start()
    esc = EscHandle(kube)
    stack = Stack(kube, cluster, esc, operator, replicas)
    try:
        await esc.create({"controllerConfig": {"namespace": NAMESPACE, "componentConfigs": [
            {"componentName": "Webhook", "deploymentConfigs": {"replicas": replicas}}]}})
        await wait_whole(stack, timeout=120)
        await _user_objects(kube)
        yield stack
    finally:
        await _remove_user_objects(kube)
        await remove_operand(kube)
        crashes = operator.crashes()  # before stop(), whose own failure would hide them
        await operator.stop()
        for node in await _nodes(kube):  # a failed drain must not leave a node cordoned
            await asyncio.to_thread(cluster.kubectl, "uncordon", node, check=False)
    assert not crashes, "a pass of the operator crashed:\n" + "\n".join(crashes)


async def _nodes(kube: Kube) -> list[str]:
    return [n["metadata"]["name"] for n in (await kube.list("/api/v1/nodes"))["items"]]
