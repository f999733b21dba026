"""Restarts write nothing; deleting the ExternalSecretsConfig stops management and leaves the
operand running."""

from __future__ import annotations

import json
import re
from collections import Counter
from typing import Any
from urllib.parse import urlsplit

from manager.client.kube import Kube
from manager.reporting.status import ESC_DELETED_SUMMARY
from manager.runtime.worker import STANDING_WATCHES
from tests.integration.conftest import (
    ESC_API,
    ESM_PATH,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    esm_conditions,
    eventually,
    managed_objects,
    wait_condition,
)

NAMESPACE = SCENARIO_NAMESPACES["restart"]


async def snapshot(kube: Kube) -> dict[Any, str]:
    """resourceVersion of every managed object, the ESC and the ESM."""
    versions: dict[Any, str] = {
        key: obj["metadata"]["resourceVersion"]
        for key, obj in (await managed_objects(kube, NAMESPACE)).items()}
    for path in (f"{ESC_API}/cluster", ESM_PATH):
        versions[path] = (await kube.request("GET", path))["metadata"]["resourceVersion"]
    return versions


async def test_restart_over_an_installed_stack_writes_nothing(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    first = await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True")
    await first.wait_idle()
    assert first.log.writes(), "the first operator installed the operand"
    await first.stop()
    before = await snapshot(kube)

    second = await start_operator()
    await second.wait_idle(quiet=2.0)
    runtime = second.runtime
    assert runtime is not None
    assert runtime.last_pass is not None
    assert runtime.last_pass.result == "Ready"
    # It did look: the Deployments were read (listed by the standing watch, or one by one),
    # every managed kind is watched.
    reads = [url.split("?")[0] for method, url in second.log.requests if method == "GET"]
    assert any(url.endswith(("/apps/v1/deployments", "/deployments/external-secrets-webhook"))
               for url in reads), reads
    assert len(runtime.watcher.specs) >= 13
    assert second.log.writes() == [], json.dumps(second.log.writes(), indent=1)
    assert_discovery_asked_once(second.log.requests)
    assert await snapshot(kube) == before
    await user_objects.assert_untouched(kube)


BUILT_IN_GROUP_VERSION = re.compile(
    r"/api/v1|/apis/(apps|rbac\.authorization\.k8s\.io|apiextensions\.k8s\.io|"
    r"admissionregistration\.k8s\.io|networking\.k8s\.io|policy|coordination\.k8s\.io)/v1")
# kopf scans these once at start-up, with its own client, for its own watches (Namespaces,
# CRDs, webhook configurations), which the operator switches off (runtime/handlers.py).
KOPF_SCANS = {"/api/v1", "/apis/apiextensions.k8s.io/v1",
              "/apis/admissionregistration.k8s.io/v1"}


def assert_discovery_asked_once(requests: list[tuple[str, str]]) -> None:
    """A built-in API group's discovery document is fetched once: the watches and the first
    pass ask for it at once and share the answer, and no CRD's first listing makes the
    operator forget it (a CRD speaks only for its own group). CRD-served groups may be asked
    again: a kind that is not served yet is rechecked."""
    paths = Counter(urlsplit(url).path for method, url in requests if method == "GET")
    ours = {path: count - (path in KOPF_SCANS) for path, count in paths.items()
            if BUILT_IN_GROUP_VERSION.fullmatch(path)}
    assert len(ours) >= 5, paths
    assert set(ours.values()) == {1}, ours


async def test_deleting_the_esc_leaves_the_operand(kube: Kube, esc: EscHandle,
                                                  start_operator: StartOperator,
                                                  user_objects: UserObjects) -> None:
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True")
    await operator.wait_idle()
    before = {key: obj["metadata"]["uid"]
              for key, obj in (await managed_objects(kube, NAMESPACE)).items()}
    operator.log.forget_requests()

    await kube.delete(f"{ESC_API}/cluster")

    async def recorded() -> None:
        ready = (await esm_conditions(kube, "external-secrets-controller")).get("Ready")
        assert ready is not None, "no external-secrets-controller entry yet"
        assert ready["message"] == ESC_DELETED_SUMMARY

    await eventually(recorded)
    await operator.wait_idle()
    after = {key: obj["metadata"]["uid"]
             for key, obj in (await managed_objects(kube, NAMESPACE)).items()}
    assert after == before
    deletes = [url for method, url in operator.log.writes() if method == "DELETE"]
    assert deletes == []
    # Management stopped: only the standing watches remain (no dependency's), and drift is
    # no longer repaired although the child watches see it.
    runtime = operator.runtime
    assert runtime is not None
    assert runtime.watcher.specs == STANDING_WATCHES
    webhook = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/external-secrets-webhook"
    passes = operator.passes
    await kube.merge_patch(webhook, {"metadata": {"labels": {"app": "changed-by-hand"}}},
                           field_manager="test")
    await operator.wait_woken(passes, "modified Deployment external-secrets-webhook")
    live = await kube.request("GET", webhook)
    assert live["metadata"]["labels"]["app"] == "changed-by-hand"
    await user_objects.assert_untouched(kube)
