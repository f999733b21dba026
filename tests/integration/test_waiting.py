"""A waiting operand costs no requests (issue 24): while the operand waits for something that
never happens by itself, the operator sends nothing to the API server, and when it happens
the watches, not a retry or the resync, turn the ESC Ready.

The wait: the operator's operand image is one the simulated cluster has no binary for, so
every operand container waits (`NoLocalBinary`) as it would for an image that cannot be
pulled. The fix: the image becomes runnable and the pods are deleted; the simulated kubelet
does not retry a missing binary (a real one retries its pull), and the ReplicaSets replace
them. Everything after that (pods Ready, Deployments available, the cert-controller filling
the webhooks' caBundle) reaches the operator through its watches only.

Two inputs have a test of their own, because the fix above also moves Deployments: a change
seen only on a pod (a crash-looping container restarting, while its Deployment's status
stays) reaches the operator through the pod watch alone; and a stale caBundle turns the
ESC Degraded when its grace runs out, through the one recheck the pass asked for
(`Readiness.until`), with nothing else happening.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from devcluster import images as image_map
from manager.client.kube import Kube
from manager.runtime.watches import UNRESOLVED_RECHECK_MAX
from manager.steps import readiness
from tests.certificates import self_signed_ca
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
# Each test has an image of its own: the image map outlives a test (the session's cluster).
CRASHING_IMAGE = "registry.example/eso-it/external-secrets-crashing:v0"
STALE_CA_IMAGE = "registry.example/eso-it/external-secrets-stale-ca:v0"
QUIET_SECONDS = 40.0  # longer than the old Progressing retry cap (30 s)
# readiness.TRUST_GRACE_SECONDS (120 s), shortened for the test; long enough that a loaded
# machine has seen the stale CA and gone idle well before it runs out (15 s did not, once).
GRACE_SECONDS = 25.0
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
# The local command for CRASHING_IMAGE, given the pod's args: the webhook and the
# cert-controller (first arg `webhook`, `certcontroller`) fail at once, the controller runs.
CRASH_LOOP = ("/bin/sh", "-c",
              'case "$1" in webhook|certcontroller) exit 1;; esac; exec sleep 3600', "sh")


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
    # Degraded is written during its pass, whose log line comes when the pass ends.
    await operator.wait_until(lambda: operator.passes > passes, 10,
                              "the pass that wrote Degraded to end")
    reasons = [r for n, r in operator.log.pass_reasons().items() if n > passes]
    assert reasons, "no pass ran"
    assert not [r for r in reasons if "retry" in r.split(",") or "periodic resync" in r], reasons


def not_retried(operator: OperatorThread, after: int) -> list[str]:
    """The reasons of the passes after pass `after`, none of them a retry or the resync."""
    reasons = [r for n, r in operator.log.pass_reasons().items() if n > after]
    assert not [r for r in reasons if "retry" in r.split(",") or "periodic resync" in r], reasons
    return reasons


async def versions(kube: Kube, *paths: str) -> dict[str, str]:
    """The resourceVersion of every object of the collections `paths` (by name)."""
    found = {}
    for path in paths:
        for item in (await kube.list(path, label_selector=MANAGED)).get("items") or []:
            found[item["metadata"]["name"]] = item["metadata"]["resourceVersion"]
    return found


async def test_a_change_seen_only_on_a_pod_wakes_the_operator(
        cluster: Cluster, kube: Kube, start_operator: StartOperator, esc: EscHandle,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The webhook's and the cert-controller's containers exit at once (CRASH_LOOP): the
    simulated kubelet restarts them with a growing back-off, so their pods change (restart
    count, CrashLoopBackOff) while their Deployments, once rolled out, keep the same status
    (their readiness probes never pass, so no replica becomes ready). The controller's
    container keeps running (it has no probe: ready, its Deployment available), so that no
    Deployment moves. Each restart reaches the operator through the pod watch only, and
    status.awaited follows it; without the pod watch it stays as the last Deployment change
    left it."""
    if cluster.simulated is None:
        pytest.skip("needs the simulated cluster's image map (an image that crashes)")
    image_map.add(cluster.simulated.images_file, {CRASHING_IMAGE: image_map.ImageEntry(
        image_map.OPERAND_ENTRYPOINT, CRASH_LOOP, image_map.NOBODY)})
    monkeypatch.setenv("RELATED_IMAGE_EXTERNAL_SECRETS", CRASHING_IMAGE)
    operator = await start_operator()  # resync 3600 s: no pass comes by itself
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})

    async def awaited() -> list[dict[str, Any]]:
        await wait_condition(esc, "Progressing", "True", reason="WaitingForOperand")
        items: list[dict[str, Any]] = (await esc.get())["status"].get("awaited") or []
        assert any("restarted" in item.get("message", "") for item in items), items
        return items

    await eventually(awaited, 60)
    # A window in which status.awaited changed, only passes for pods ran, and the
    # Deployments and webhook configurations kept their resourceVersions: no watch but the
    # pods' had anything to say. (A Deployment still settling spoils a window: try again.)
    for _ in range(8):
        passes = operator.passes  # before `before`: the pass that changes it comes later
        before = await awaited()
        others = await versions(kube, DEPLOYMENTS, WEBHOOKS)

        async def changed(before: list[dict[str, Any]] = before) -> list[dict[str, Any]]:
            now = await awaited()
            assert now != before, now
            return now

        after = await eventually(changed, 45)
        reasons = not_retried(operator, passes)
        parts = [part for reason in reasons for part in reason.split(",")]
        if (await versions(kube, DEPLOYMENTS, WEBHOOKS) == others and parts
                and all(part.split(" ")[1:2] == ["Pod"] for part in parts)):
            break
        print(f"a window spoilt by other changes: {reasons}")
    else:
        raise AssertionError("status.awaited never changed through pods alone")
    print(f"awaited before: {[i['message'] for i in before]}")
    print(f"awaited after:  {[i['message'] for i in after]}")
    print(f"passes: {reasons}")


async def test_a_stale_ca_bundle_turns_degraded_when_its_grace_runs_out(
        *, cluster: Cluster, kube: Kube, start_operator: StartOperator, esc: EscHandle,
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The operand never runs (its image has no binary here), so no cert-controller fixes
    anything; the test plays the cert-controller that wrote the serving Secret and someone
    who planted another CA in the webhooks' caBundle. The operator waits for the caBundle
    (Progressing) and asks for one recheck when its grace runs out: that pass, and no other
    event, turns the ESC Degraded (WebhookCABundleStale). The grace is shortened by setting
    readiness.TRUST_GRACE_SECONDS, which the in-process operator reads at every pass, as
    test_certificate_lifetimes does with ca_overlap.OVERLAP_SECONDS."""
    if cluster.simulated is None:
        pytest.skip("needs the simulated cluster's image map (an image that never runs)")
    monkeypatch.setattr(readiness, "TRUST_GRACE_SECONDS", GRACE_SECONDS)
    monkeypatch.setenv("RELATED_IMAGE_EXTERNAL_SECRETS", STALE_CA_IMAGE)
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Progressing", "True", reason="WaitingForOperand", timeout=60)
    await operator.wait_idle(quiet=3.0)

    secret = f"/api/v1/namespaces/{NAMESPACE}/secrets/external-secrets-webhook"
    await kube.merge_patch(secret, {"data": {"ca.crt": self_signed_ca(tmp_path, "served")}},
                           field_manager="integration-tests")
    planted = self_signed_ca(tmp_path, "planted")
    names = []
    for item in (await kube.list(WEBHOOKS, label_selector=MANAGED)).get("items") or []:
        names.append(item["metadata"]["name"])
        await kube.request("PATCH", f"{WEBHOOKS}/{item['metadata']['name']}", body=[
            {"op": "add", "path": f"/webhooks/{i}/clientConfig/caBundle", "value": planted}
            for i in range(len(item["webhooks"]))], content_type="application/json-patch+json")
    written = time.time()
    assert len(names) == 2, names

    async def stale_awaited() -> None:
        items = (await esc.get())["status"].get("awaited") or []
        assert any("does not include the CA" in i.get("message", "") for i in items), items

    await eventually(stale_awaited, 30)
    await operator.wait_idle(quiet=3.0)
    # Read before Degraded: a recheck pass that ends in between is then counted, not lost.
    passes = operator.passes
    assert (await esc.condition("Degraded") or {}).get("status") == "False"
    degraded = await wait_condition(esc, "Degraded", "True", reason="WebhookCABundleStale",
                                    timeout=GRACE_SECONDS + 30)
    print(f"Degraded {time.time() - written:.1f} s after the caBundle was planted")
    assert degraded["message"].startswith("ValidatingWebhookConfiguration "), degraded
    assert time.time() - written >= GRACE_SECONDS - 1  # not before its grace ran out
    # Degraded is written during its pass, whose log line comes when the pass ends.
    await operator.wait_until(lambda: operator.passes > passes, 10,
                              "the pass that wrote Degraded to end")
    reasons = [r for n, r in operator.log.pass_reasons().items() if n > passes]
    assert reasons, "no pass ran"
    assert reasons[0] == "recheck", reasons
