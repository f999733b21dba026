"""The disruption suite: the stack keeps admitting and syncing while the cluster changes under it.

One operand install serves a whole module (installing it costs about 15 s; each scenario then
disrupts it and waits until it has recovered): the operator runs in-process
(tests/integration's OperatorThread), the operand really runs (the pod runner), and each
module sets how many webhook replicas it wants (`WEBHOOK_REPLICAS` in the module).

During each scenario three samplers run (tests/samplers.py and `Recovery` below):
- AdmissionSampler: a dry-run SecretStore create through the webhook every 200 ms;
- SyncSampler: the synced Secret must never be deleted or lose its key; with the
  ExternalSecret refreshed every second, `Recovery` also records the longest time during which
  its `status.refreshTime` did not move (a sync gap: the controller was not syncing);
- `Recovery`: the ESC's Ready condition, and when every operand Deployment is whole again.

A scenario ends when every operand Deployment is whole (its wanted replicas updated and
available, no pod terminating), the ESC is Ready and the controller has synced since then;
refusals in a 1 s tail after that count too. No synced Secret may ever be harmed; how many
admissions may be refused is each test's to say (zero with two webhook replicas).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
import pytest_asyncio

from manager.kube import ApiError, Kube
from manager.operator import OperatorOptions
from tests.conftest import Cluster
from tests.integration import conftest as integration
from tests.integration.conftest import (
    EscHandle,
    OperatorThread,
    remove_operand_webhooks,
    wait_condition,
)
from tests.operand import remove_operand
from tests.samplers import AdmissionFigures, AdmissionSampler, SyncSampler
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
TAIL_SECONDS = 1.0
SAMPLE_INTERVAL = 0.05  # finer than the day-2 sampler: a disruption's window can be short


@dataclass
class Stack:
    """The installed stack a module disrupts."""

    kube: Kube
    cluster: Cluster
    esc: EscHandle
    operator: OperatorThread
    webhook_replicas: int


# --- watching recovery ------------------------------------------------------------------------


@dataclass
class Recovery:
    """Polls the ESC's Ready condition and the ExternalSecret's refreshTime every `interval`."""

    kube: Kube
    esc: EscHandle
    interval: float = 0.2
    not_ready: float = 0.0
    """Seconds during which Ready was not True."""
    last_not_ready: float | None = None
    """When (time.monotonic) Ready was last seen not True."""
    longest_sync_gap: float = 0.0
    """Longest time the ExternalSecret's refreshTime did not advance (1 s refresh interval)."""
    sync_after: float = float("inf")
    """A moment (time.time): `synced()` waits for a refresh whose refreshTime (whole seconds)
    is later, so written by a controller that runs now."""
    synced_again: float | None = None
    """When (time.monotonic) the first refresh after `sync_after` was seen."""
    _refresh: tuple[str, float] = ("", 0.0)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Recovery:
        self._refresh = (await self._refresh_time(), time.monotonic())
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._note_sync(await self._refresh_time(), time.monotonic())

    async def _refresh_time(self) -> str:
        found = await self.kube.get(f"{EXTERNAL_SECRETS}/{SYNCED}")
        return str(((found or {}).get("status") or {}).get("refreshTime") or "")

    def _note_sync(self, refreshed: str, now: float) -> None:
        last, since = self._refresh
        self.longest_sync_gap = max(self.longest_sync_gap, now - since)
        if refreshed != last:
            self._refresh = (refreshed, now)
            if self.synced_again is None and refreshed and datetime.fromisoformat(
                    refreshed.replace("Z", "+00:00")).timestamp() > self.sync_after:
                self.synced_again = now

    async def synced_from_now(self, timeout: float = 60.0) -> None:
        """Wait until the controller has written a refresh after this moment: the longest sync
        gap then covers the whole stall (a replaced controller waits for the lease)."""
        self.sync_after, self.synced_again = time.time(), None

        async def refreshed() -> None:
            assert self.synced_again is not None, "no sync since the stack was whole"

        await eventually(refreshed, timeout, what="a sync after the disruption")

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self._poll(started)
            except ApiError as error:  # the API server itself is down: nothing to read
                if not error.transient:
                    raise
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def _poll(self, started: float) -> None:
        ready = await self.esc.condition("Ready")
        if ready is None or ready["status"] != "True":
            self.not_ready += self.interval
            self.last_not_ready = started
        self._note_sync(await self._refresh_time(), time.monotonic())


@dataclass
class Figures:
    """What one scenario measured (printed, and collected for docs/resilience.md)."""

    scenario: str
    admissions: AdmissionFigures
    harm: list[str]
    not_ready: float
    sync_gap: float
    whole_after: float
    """Seconds from the disruption to every Deployment whole again and Ready=True."""
    notes: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return (f"{self.scenario}: {self.admissions}; synced Secret harmed {len(self.harm)}x; "
                f"longest sync gap {self.sync_gap:.1f} s; Ready not True for "
                f"{self.not_ready:.1f} s; whole again after {self.whole_after:.1f} s"
                + (f" ({'; '.join(self.notes)})" if self.notes else ""))


FIGURES: list[Figures] = []


def admissions_refused() -> int:
    """Admissions refused during the scenario that just ended."""
    return FIGURES[-1].admissions.refused


# --- the operand's state ----------------------------------------------------------------------


async def deployments_whole(kube: Kube) -> None:
    """Every operand Deployment runs exactly its wanted replicas, all updated and available,
    and no old pod is left (terminating pods count in status.replicas)."""
    for deployment in (await kube.list(DEPLOYMENTS))["items"]:
        name, status = deployment["metadata"]["name"], deployment.get("status") or {}
        if name == "bitwarden-sdk-server":
            continue
        wanted = deployment["spec"]["replicas"]
        assert status.get("observedGeneration") == deployment["metadata"]["generation"], name
        for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
            assert status.get(key) == wanted, f"{name}: {key} {status.get(key)} != {wanted}"
    pods = (await kube.list(PODS))["items"]
    terminating = [p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")]
    assert not terminating, f"pods still terminating: {terminating}"


async def wait_whole(stack: Stack, timeout: float = 90.0) -> None:
    await eventually(lambda: deployments_whole(stack.kube), timeout, what="the operand whole")
    await wait_condition(stack.esc, "Ready", "True", timeout=timeout)


async def pods(kube: Kube, selector: str) -> list[dict[str, Any]]:
    listing = await kube.list(PODS, label_selector=selector)
    return [p for p in listing["items"] if not p["metadata"].get("deletionTimestamp")]


# --- one scenario -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def measured(stack: Stack, scenario: str) -> AsyncIterator[list[str]]:
    """Run the body (the disruption) with every sampler running, then wait until the stack is
    whole again; record the figures. Yields a list the body may add notes to."""
    sync = SyncSampler(stack.kube, USER_NAMESPACE, SYNCED, "k")
    await sync.start()
    notes: list[str] = []
    try:
        async with AdmissionSampler(stack.kube, USER_NAMESPACE, interval=SAMPLE_INTERVAL,
                                    ) as admissions, Recovery(stack.kube, stack.esc) as recovery:
            started = time.monotonic()
            yield notes
            await wait_whole(stack)
            whole = time.monotonic() - started
            await recovery.synced_from_now()
            await asyncio.sleep(TAIL_SECONDS)  # refusals right after "whole" count too
    except BaseException:
        await sync.discard()
        raise
    await sync.stop()
    figures = Figures(scenario, admissions.figures, list(sync.harm), recovery.not_ready,
                      recovery.longest_sync_gap, whole, notes)
    FIGURES.append(figures)
    print(f"\nFIGURES {figures}")
    assert not figures.harm, figures.harm


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
        await operator.stop()
        for node in await _nodes(kube):  # a failed drain must not leave a node cordoned
            cluster.kubectl("uncordon", node, check=False)


async def _nodes(kube: Kube) -> list[str]:
    return [n["metadata"]["name"] for n in (await kube.list("/api/v1/nodes"))["items"]]
