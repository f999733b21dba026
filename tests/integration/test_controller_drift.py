"""Drift repair through the label-selected watches (the periodic resync is an hour away in
these tests), and globalConfig changes reaching every managed object."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import pytest
import pytest_asyncio

from manager.apply.results import ObjectRef
from manager.client.kube import Kube
from tests.integration.conftest import (
    ESM_PATH,
    SCENARIO_NAMESPACES,
    EscHandle,
    OperatorThread,
    StartOperator,
    UserObjects,
    eventually,
    managed_objects,
    wait_condition,
)

NAMESPACE = SCENARIO_NAMESPACES["drift"]
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/external-secrets"
REPAIR_SECONDS = 10.0
# The reason a watch event of that Deployment gives a pass (manager.runtime.watches).
CHURNED_REASON = "modified Deployment external-secrets"


@pytest_asyncio.fixture(loop_scope="session")
async def installed(kube: Kube, esc: EscHandle, start_operator: StartOperator,
                    user_objects: UserObjects) -> AsyncIterator[OperatorThread]:
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True")
    await operator.wait_idle()
    yield operator
    await kube.merge_patch(ESM_PATH, {"spec": {"globalConfig": None}},
                           field_manager="integration-tests")
    await user_objects.assert_untouched(kube)


async def test_deleted_deployment_is_recreated(kube: Kube, installed: OperatorThread) -> None:
    before = await kube.request("GET", DEPLOYMENT)
    await kube.delete(DEPLOYMENT)
    started = time.monotonic()

    async def recreated() -> dict[str, Any]:
        live = await kube.get(DEPLOYMENT)
        assert live is not None
        assert live["metadata"]["uid"] != before["metadata"]["uid"]
        return live

    live = await eventually(recreated, timeout=REPAIR_SECONDS)
    assert time.monotonic() - started < REPAIR_SECONDS
    assert live["spec"]["template"]["spec"]["containers"][0]["args"] == \
        before["spec"]["template"]["spec"]["containers"][0]["args"]


async def test_edited_container_arg_is_reverted(kube: Kube, installed: OperatorThread) -> None:
    live = await kube.request("GET", DEPLOYMENT)
    args = live["spec"]["template"]["spec"]["containers"][0]["args"]
    edited = [*args[:-1], "--edited-by-someone=true"]
    await kube.request("PATCH", DEPLOYMENT, content_type="application/json-patch+json",
                       body=[{"op": "replace",
                              "path": "/spec/template/spec/containers/0/args",
                              "value": edited}])
    assert (await kube.request("GET", DEPLOYMENT))["spec"]["template"]["spec"][
        "containers"][0]["args"] == edited

    async def reverted() -> None:
        now = await kube.request("GET", DEPLOYMENT)
        assert now["spec"]["template"]["spec"]["containers"][0]["args"] == args

    await eventually(reverted, timeout=REPAIR_SECONDS)


async def test_esm_label_reaches_every_managed_object(kube: Kube,
                                                      installed: OperatorThread) -> None:
    await kube.merge_patch(ESM_PATH, {"spec": {"globalConfig": {"labels": {"team": "secrets"}}}},
                           field_manager="integration-tests")

    async def labelled(present: bool) -> int:
        objects = await managed_objects(kube, NAMESPACE)
        assert len(objects) > 20
        for key, obj in objects.items():
            labels = obj["metadata"].get("labels") or {}
            assert (labels.get("team") == "secrets") is present, key
            if obj["kind"] == "Deployment":
                template = obj["spec"]["template"]["metadata"].get("labels") or {}
                assert (template.get("team") == "secrets") is present, key
        return len(objects)

    await eventually(lambda: labelled(True), timeout=REPAIR_SECONDS)

    await kube.merge_patch(ESM_PATH, {"spec": {"globalConfig": None}},
                           field_manager="integration-tests")
    await eventually(lambda: labelled(False), timeout=REPAIR_SECONDS)


async def test_foreign_labels_and_status_churn_cause_no_writes(
        kube: Kube, installed: OperatorThread, caplog: pytest.LogCaptureFixture) -> None:
    """A label someone else adds is theirs (not reverted), and it makes the operator write
    nothing. Status churn that Ready does not depend on (the messages and times of a
    Deployment's conditions, rewritten on the status subresource) does not even start a pass,
    and nothing is written either."""
    caplog.set_level(logging.INFO, logger="manager.runtime.worker")
    await installed.wait_idle()
    installed.log.forget_requests()
    before = installed.passes
    await kube.request("PATCH", DEPLOYMENT, content_type="application/merge-patch+json",
                       body={"metadata": {"labels": {"owner": "someone-else"}}})
    await eventually(lambda: _assert_passes_after(installed, before + 1),
                     timeout=REPAIR_SECONDS)
    await installed.wait_idle()
    assert installed.log.writes() == [], json.dumps(installed.log.writes())
    live = await kube.request("GET", DEPLOYMENT)
    assert live["metadata"]["labels"]["owner"] == "someone-else"

    # Status churn: every condition's message and times change, nothing Ready reads does.
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    conditions = [{**condition, "message": f"churn: {condition.get('message', '')}",
                   "lastUpdateTime": now} for condition in live["status"]["conditions"]]
    assert conditions, live["status"]
    first_record = len(caplog.records)
    churned = await kube.request("PATCH", f"{DEPLOYMENT}/status",
                                 content_type="application/merge-patch+json",
                                 body={"status": {"conditions": conditions}})
    assert churned["metadata"]["resourceVersion"] != live["metadata"]["resourceVersion"]
    assert churned["metadata"]["generation"] == live["metadata"]["generation"]

    async def seen_by_the_watch() -> None:  # so the absence of a pass below means something
        runtime = installed.runtime
        assert runtime is not None
        cached = runtime.cache.get(ObjectRef.of(live))
        assert cached is not None
        assert int(cached["metadata"]["resourceVersion"]) >= \
            int(churned["metadata"]["resourceVersion"]), cached["metadata"]

    await eventually(seen_by_the_watch, timeout=REPAIR_SECONDS)
    await installed.wait_idle()
    woken = [record.getMessage() for record in caplog.records[first_record:]
             if "action=pass " in record.getMessage()
             and CHURNED_REASON in record.getMessage().rpartition("reasons=")[2].split(",")]
    assert woken == []
    assert installed.log.writes() == [], json.dumps(installed.log.writes())
    after = await kube.request("GET", DEPLOYMENT)
    assert after["metadata"]["generation"] == live["metadata"]["generation"]


async def _assert_passes_after(operator: OperatorThread, minimum: int) -> None:
    """The change woke the operator: a pass ran after it (from its cache, maybe reading
    nothing at all)."""
    assert operator.passes >= minimum, "no pass has looked yet"


@pytest.mark.timing  # a burst is one only if the API server answers it faster than a pass
async def test_a_burst_of_changes_is_coalesced(kube: Kube, installed: OperatorThread) -> None:
    """Ten changes to managed objects in a burst cause one pass (two if the burst straddles
    the start of a pass), not ten. On a loaded machine the API server spreads the ten over
    more than a pass (3 passes at load average 10, beside three other lanes)."""
    await installed.wait_idle()
    before = installed.passes
    services = f"/api/v1/namespaces/{NAMESPACE}/services"
    await asyncio.gather(*(
        kube.request("PATCH", f"{services}/{name}", content_type="application/merge-patch+json",
                     body={"metadata": {"annotations": {"burst": str(i)}}})
        for i, name in enumerate(["external-secrets-webhook", "external-secrets-metrics"] * 5)))
    await installed.wait_idle()
    assert 1 <= installed.passes - before <= 2
