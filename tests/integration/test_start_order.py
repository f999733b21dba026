"""Start order does not matter: an ExternalSecretsConfig created after its CRD appeared is
reconciled within 3 s (DEADLINE), even when the CRD arrived after the operator started, or
was deleted and created again while it ran. A resync or a discovery poll would take an hour
or minutes; 2 s held on a quiet machine, the rest is room for a loaded one.

"Reconciled" is measured as the ESC's status conditions for its generation, which a pass
writes at its end. Tests run with a resync period of an hour, and each waits until the
operator is idle before creating the ESC, so only the watches can explain a pass in time.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from manager.apply import discovery as discovery_module
from manager.apply.discovery import Discovery
from manager.client.kube import CRD_COLLECTION, Kube, install_crds
from manager.client.watch_spec import WatchSpec
from manager.runtime.operator import CRDS_DIR, load_crds
from manager.runtime.watches import Watcher
from tests.integration.conftest import (
    ESC_API,
    ESM_PATH,
    EscHandle,
    StartOperator,
    UserObjects,
    eventually,
    wait_condition,
)

NAMESPACE = "eso-it-start-order"
# Reconciled by the watches, not by a resync or a discovery poll (an hour and minutes away).
# 2 s held on a quiet machine; the full suite on 2 shared cores measured 2.27 s once.
DEADLINE = 3.0
ESC_CRD = "externalsecretsconfigs.operator.openshift.io"


async def delete_crds(kube: Kube, names: list[str]) -> None:
    for name in names:
        await kube.delete(f"{CRD_COLLECTION}/{name}")

    async def gone() -> None:
        for name in names:
            assert await kube.get(f"{CRD_COLLECTION}/{name}") is None, name

    await eventually(gone, timeout=60)


async def install_operator_crds(kube: Kube) -> None:
    """Install the CRDs and wait until the API server serves both kinds."""
    await install_crds(kube, load_crds(CRDS_DIR), field_manager="integration-tests")

    async def served() -> None:
        await kube.list(ESC_API)
        await kube.list(ESM_PATH.rpartition("/")[0])

    await eventually(served, timeout=60)


@pytest_asyncio.fixture(loop_scope="session")
async def restore_crds(kube: Kube, user_objects: UserObjects) -> AsyncIterator[None]:
    """Whatever the test removed, the session's operator CRDs are back afterwards."""
    yield
    await install_operator_crds(kube)


async def seconds_until_reconciled(esc: EscHandle, spec: dict[str, Any]) -> float:
    started = time.monotonic()
    created = await esc.create(spec)
    generation = created["metadata"]["generation"]
    while time.monotonic() - started < 10:
        status = (await esc.get()).get("status") or {}
        if any(c.get("observedGeneration") == generation for c in status.get("conditions") or []):
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise AssertionError("the ExternalSecretsConfig was not reconciled within 10 s")


async def test_crds_created_after_the_operator_started(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, restore_crds: None) -> None:
    await delete_crds(kube, [crd["metadata"]["name"] for crd in load_crds(CRDS_DIR)])
    operator = await start_operator()
    await operator.wait_idle(quiet=1.0)  # its first passes fail: nothing to read yet
    await install_operator_crds(kube)
    await eventually(lambda: _exists(kube, ESM_PATH))  # the ESM, created once it can be
    await operator.wait_idle()

    elapsed = await seconds_until_reconciled(esc, {"controllerConfig": {"namespace": NAMESPACE}})
    assert elapsed <= DEADLINE, f"reconciled {elapsed:.2f} s after creation"
    await wait_condition(esc, "Ready", "True")


async def test_crd_deleted_and_created_again_while_the_operator_runs(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, restore_crds: None) -> None:
    operator = await start_operator()
    await operator.wait_idle()
    await delete_crds(kube, [ESC_CRD])
    await install_operator_crds(kube)
    await operator.wait_idle()

    elapsed = await seconds_until_reconciled(esc, {"controllerConfig": {"namespace": NAMESPACE}})
    assert elapsed <= DEADLINE, f"reconciled {elapsed:.2f} s after creation"
    await wait_condition(esc, "Ready", "True")


async def _exists(kube: Kube, path: str) -> None:
    assert await kube.get(path) is not None, path


async def test_a_watch_waiting_for_its_kind_asks_the_server_not_discoverys_memory(
        kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    """Discovery remembers an absent kind for ABSENT_TTL; a watch rechecking after its CRD
    appeared must not be answered from that memory (it was, for 5 s: the race above).
    No rediscover() here, so only the watch's own rechecks can find the kind. The kind is
    served before the watch starts: its rechecks stop at 8 s (then only a CRD event wakes
    it), so a server slow to publish the kind must not decide the outcome."""
    monkeypatch.setattr(discovery_module, "ABSENT_TTL", 3600.0)  # the memory outlives the test
    crd = _probe_crd()
    discovery = Discovery(kube)
    assert await discovery.resolve(PROBE_API, "Probe") is None  # remembered as absent
    events: list[str] = []
    watcher = Watcher(kube, discovery, lambda _spec, reason: events.append(reason))
    try:
        await install_crds(kube, [crd], field_manager="integration-tests")

        async def served() -> None:
            resources = await kube.request("GET", f"/apis/{PROBE_API}")
            assert any(r["kind"] == "Probe" for r in resources["resources"]), resources

        await eventually(served, timeout=30, what="the server to serve Probe")
        assert await discovery.resolve(PROBE_API, "Probe") is None  # still remembered absent
        watcher.set_specs([WatchSpec(PROBE_API, "Probe")])

        async def listed() -> None:
            assert any(reason.startswith("listed Probe") for reason in events), events

        await eventually(listed, timeout=5)  # the first recheck, 0.25 s in, asks the server
    finally:
        await watcher.stop()
        await kube.delete(f"{CRD_COLLECTION}/{crd['metadata']['name']}")


PROBE_API = "start-order.eso-it.example.com/v1"


def _probe_crd() -> dict[str, Any]:
    group, _, version = PROBE_API.partition("/")
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"probes.{group}"},
        "spec": {"group": group, "scope": "Cluster",
                 "names": {"plural": "probes", "singular": "probe", "kind": "Probe",
                           "listKind": "ProbeList"},
                 "versions": [{"name": version, "served": True, "storage": True,
                               "schema": {"openAPIV3Schema": {"type": "object"}}}]}}
