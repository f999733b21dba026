"""A waiting operand costs no requests (issue 24): while the operand waits for something that
never happens by itself, the operator sends nothing to the API server, and when it happens
the watches, not a retry or the resync, turn the ESC Ready.

The wait: the operator's operand image is one the simulated cluster has no binary for, so
every operand container waits (`NoLocalBinary`) as it would for an image that cannot be
pulled. The fix: the image becomes runnable and the pods are deleted; the simulated kubelet
does not retry a missing binary (a real one retries its pull), and the ReplicaSets replace
them. Everything after that (pods Ready, Deployments available, the cert-controller filling
the webhooks' caBundle) reaches the operator through its watches only.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from devcluster import images as image_map
from manager.controllers.watches import UNRESOLVED_RECHECK_MAX
from manager.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import (
    MANAGED,
    SCENARIO_NAMESPACES,
    WEBHOOKS,
    EscHandle,
    OperatorThread,
    StartOperator,
    wait_condition,
)
from tests.waiting import eventually

NAMESPACE = SCENARIO_NAMESPACES["waiting"]
IMAGE = "registry.example/eso-it/external-secrets-never-pulled:v0"
QUIET_SECONDS = 40.0  # longer than the old Progressing retry cap (30 s)


async def requests_settle(operator: OperatorThread, quiet: float, timeout: float = 60.0,
                          ) -> None:
    """Until the operator has sent no request for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    count, since = len(operator.log.requests), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, operator.log.requests[count:]
        await asyncio.sleep(0.2)
        if len(operator.log.requests) != count:
            count, since = len(operator.log.requests), time.monotonic()


async def test_the_api_server_bumps_a_webhook_configurations_generation_for_its_ca_bundle(
        kube: Kube) -> None:
    """The watch of the webhook configurations notices a caBundle change through
    metadata.generation (watches.fingerprint): the real server must bump it. The
    configuration is the test's own and matches no request (no rules)."""
    name = "eso-it-generation-probe"
    body = {"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration", "metadata": {"name": name},
            "webhooks": [{"name": "probe.eso-it.example", "sideEffects": "None",
                          "admissionReviewVersions": ["v1"], "rules": [],
                          "clientConfig": {"url": "https://127.0.0.1:1/never"}}]}
    await kube.delete(f"{WEBHOOKS}/{name}")
    created = await kube.create(WEBHOOKS, body, field_manager="integration-tests")
    try:
        patched = await kube.request(
            "PATCH", f"{WEBHOOKS}/{name}",
            body=[{"op": "add", "path": "/webhooks/0/clientConfig/caBundle",
                   "value": "Y2E="}], content_type="application/json-patch+json")
        assert patched["metadata"]["generation"] == created["metadata"]["generation"] + 1
    finally:
        await kube.delete(f"{WEBHOOKS}/{name}")


async def test_a_waiting_operand_costs_no_requests_and_its_end_wakes_the_operator(
        cluster: Cluster, kube: Kube, start_operator: StartOperator, esc: EscHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    if cluster.simulated is None:
        pytest.skip("needs the simulated cluster's image map (an image that never runs)")
    monkeypatch.setenv("RELATED_IMAGE_EXTERNAL_SECRETS", IMAGE)
    operator = await start_operator()  # resync 3600 s: only a watch can end the wait
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})

    # Waiting, and status.awaited follows the pods (their watch: no retry reads them).
    async def waiting() -> list[dict[str, Any]]:
        await wait_condition(esc, "Progressing", "True", reason="WaitingForOperand")
        awaited = (await esc.get()).get("status", {}).get("awaited") or []
        assert any("NoLocalBinary" in item.get("message", "") for item in awaited), awaited
        return awaited

    await eventually(waiting, 60)
    await operator.wait_idle(quiet=3.0)
    # The watches of kinds not served here (cert-manager's, the Prometheus Operator's) ask
    # discovery a few times after start-up, then wait for their CRD (watches.FIRST_RECHECK).
    await requests_settle(operator, quiet=UNRESOLVED_RECHECK_MAX + 1)

    # Nothing changes: no request at all, for longer than the old retry cap.
    requests, passes = len(operator.log.requests), operator.passes
    started = time.monotonic()
    await asyncio.sleep(QUIET_SECONDS)
    quiet = time.monotonic() - started
    sent = operator.log.requests[requests:]
    print(f"waiting: {len(sent)} requests and {operator.passes - passes} passes "
          f"in {quiet:.1f} s")
    assert sent == [], sent
    assert operator.passes == passes, operator.log.pass_reasons()

    # The image becomes runnable: the operand starts, and the watches turn the ESC Ready.
    path = cluster.simulated.images_file
    operand = image_map.find(image_map.load(path), image_map.OPERAND_REPOSITORY)
    assert operand is not None
    image_map.add(path, {IMAGE: operand})
    pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    for pod in (await kube.list(pods, label_selector=MANAGED)).get("items") or []:
        await kube.delete(f"{pods}/{pod['metadata']['name']}")
    started = time.monotonic()
    await wait_condition(esc, "Ready", "True", timeout=120)
    print(f"ready {time.monotonic() - started:.1f} s after the pods were replaced")
    reasons = [r for n, r in operator.log.pass_reasons().items() if n > passes]
    assert reasons, "no pass ran"
    assert not [r for r in reasons if "retry" in r.split(",") or "periodic resync" in r], reasons
