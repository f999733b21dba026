"""Disruptions with two webhook replicas and their PodDisruptionBudget (maxUnavailable 1):
what an administrator who follows docs/resilience.md gets. Figures: docs/resilience.md."""

from __future__ import annotations

import asyncio
import time

import pytest

from manager.kube import ApiError
from tests.disruption.conftest import (
    FIGURES,
    NAMESPACE,
    PODS,
    WEBHOOK_SELECTOR,
    Stack,
    admissions_refused,
    measured,
    pods,
)
from tests.disruption.scenarios import (
    PROCESSES,
    ROLL_BY_ANNOTATION,
    ROLL_BY_RESOURCES,
    change_resources,
    drain_webhook_node,
    kill_process,
    restarted_as_a_kubelet_would,
    roll_every_deployment,
)
from tests.waiting import eventually

WEBHOOK_REPLICAS = 2
BUDGET = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/external-secrets-webhook"


async def test_the_budget_is_filled_by_the_disruption_controller(stack: Stack) -> None:
    """kube-controller-manager's disruption controller runs: without it every eviction
    would be refused (a budget without status allows none)."""
    await budget_allows_one(stack)


async def budget_allows_one(stack: Stack) -> None:
    """Until the budget's status, written by the disruption controller, allows one eviction
    of the two pods. It lags the pods: a replacement Ready after the scenario before is
    counted only when the controller next syncs the budget."""
    async def filled() -> None:
        budget = await stack.kube.get(BUDGET)
        assert budget is not None
        status = budget.get("status") or {}
        assert status.get("expectedPods") == 2, status
        assert status.get("currentHealthy") == 2, status
        assert status.get("disruptionsAllowed") == 1, status

    await eventually(filled, 30, what="the budget's status")


async def test_draining_the_node_of_a_webhook(stack: Stack) -> None:
    async with measured(stack, "`kubectl drain` of the node holding a webhook pod") as notes:
        node = await drain_webhook_node(stack, notes)
    assert admissions_refused() == 0
    try:
        left = [p["metadata"]["name"] for p in (await stack.kube.list(PODS))["items"]
                if p["spec"].get("nodeName") == node]
        assert not left, f"pods still on the drained node {node}: {left}"
        webhooks = await pods(stack.kube, WEBHOOK_SELECTOR)
        assert len(webhooks) == 2
        assert all(p["spec"]["nodeName"] != node for p in webhooks)
        if stack.cluster.simulated is not None:  # the pod runner moved the processes
            running = {p.pod for p in stack.cluster.simulated.processes(NAMESPACE, "webhook")}
            assert running == {p["metadata"]["name"] for p in webhooks}, "processes not moved"
        cordoned = await stack.kube.get(f"/api/v1/nodes/{node}")
        assert cordoned is not None
        assert cordoned["spec"].get("unschedulable") is True
    finally:
        stack.cluster.kubectl("uncordon", node)
    uncordoned = await stack.kube.get(f"/api/v1/nodes/{node}")
    assert uncordoned is not None
    assert not uncordoned["spec"].get("unschedulable")


async def test_an_eviction_beyond_the_budget_is_refused(stack: Stack) -> None:
    """Both webhook pods evicted at once: the budget lets one go and refuses the other (429)
    until the first one's replacement is Ready, as kubectl drain then retries."""
    await budget_allows_one(stack)
    async with measured(stack, "both webhook pods evicted at once") as notes:
        first, second = [p["metadata"]["name"] for p in await pods(stack.kube, WEBHOOK_SELECTOR)]
        await evict(stack, first)
        with pytest.raises(ApiError) as refused:
            await evict(stack, second)
        assert refused.value.status == 429, refused.value
        assert "disruption budget" in refused.value.message, refused.value.message
        notes.append("the second eviction answered 429 until the first one's replacement was "
                     "Ready")

        async def evicted() -> None:
            await evict(stack, second)

        await eventually(evicted, 60, what="the budget to allow the second eviction")
    assert admissions_refused() == 0


async def evict(stack: Stack, pod: str) -> None:
    await stack.kube.request("POST", f"{PODS}/{pod}/eviction", body={
        "apiVersion": "policy/v1", "kind": "Eviction",
        "metadata": {"name": pod, "namespace": NAMESPACE}})


async def test_sigkill_of_a_webhook_process(stack: Stack) -> None:
    """No bound on refusals: a request in flight on the killed process, or sent to it before
    its endpoint is gone, is refused whatever the rendering (docs/resilience.md)."""
    async with measured(stack, "SIGKILL of one webhook process") as notes:
        before = await kill_process(stack, "webhook")
        seconds = await restarted_as_a_kubelet_would(stack, before, "webhook", has_probe=True)
        notes.append(f"that pod not Ready for {seconds:.1f} s")


async def test_sigkill_of_the_controller_process(stack: Stack) -> None:
    async with measured(stack, "SIGKILL of the controller process") as notes:
        before = await kill_process(stack, "controller")
        await restarted_as_a_kubelet_would(stack, before, PROCESSES["controller"][0],
                                           has_probe=False)
        notes.append("no readiness probe")
    assert admissions_refused() == 0


async def test_sigkill_of_the_cert_controller_process(stack: Stack) -> None:
    async with measured(stack, "SIGKILL of the cert-controller process") as notes:
        before = await kill_process(stack, "cert-controller")
        seconds = await restarted_as_a_kubelet_would(stack, before, "cert-controller",
                                                     has_probe=True)
        notes.append(f"that pod not Ready for {seconds:.1f} s")
    assert admissions_refused() == 0


async def test_rolling_every_deployment(stack: Stack) -> None:
    before = {p["metadata"]["uid"] for p in (await stack.kube.list(PODS))["items"]}
    async with measured(stack, ROLL_BY_ANNOTATION):
        await roll_every_deployment(stack)
    assert admissions_refused() == 0
    after = {p["metadata"]["uid"] for p in (await stack.kube.list(PODS))["items"]}
    assert not before & after, "a pod was not replaced"


async def test_a_resource_change_rolls_every_deployment(stack: Stack) -> None:
    before = {p["metadata"]["uid"] for p in (await stack.kube.list(PODS))["items"]}
    async with measured(stack, ROLL_BY_RESOURCES) as notes:
        memory = await change_resources(stack)
        notes.append(f"memory request {memory}")
    assert admissions_refused() == 0
    after = {p["metadata"]["uid"] for p in (await stack.kube.list(PODS))["items"]}
    assert not before & after, "a pod was not replaced"


async def test_a_kube_apiserver_restart(stack: Stack) -> None:
    """kube-apiserver stopped (SIGTERM), down 2 s, started again on the same etcd: writes
    fail while it is down (counted as refused, with no answer from the server); once it is
    back the webhook admits again, the operand needs no restart, the synced Secret is intact."""
    plane = stack.cluster.local
    if plane is None:
        pytest.skip("restarting kube-apiserver needs the simulated cluster's control plane")
    before = {p["metadata"]["uid"] for p in (await stack.kube.list(PODS))["items"]}
    restarts = await restart_counts(stack)
    processes = running_processes(stack)
    async with measured(stack, "kube-apiserver stopped, down 2 s, started again") as notes:
        started = time.monotonic()
        await asyncio.to_thread(plane.restart_apiserver, 2.0, 1.0)
        notes.append(f"serving again after {time.monotonic() - started:.1f} s; Ready "
                     "unreadable while it was down")
    answers = FIGURES[-1].admissions.answers
    by_webhook = sum(n for answer, n in answers.items() if "calling webhook" in answer)
    restarted = {name: count - restarts.get(name, 0)
                 for name, count in (await restart_counts(stack)).items()}
    FIGURES[-1].notes.append(f"{by_webhook} refused by a webhook call; container restarts "
                             f"{restarted}")
    print(f"FIGURES   {FIGURES[-1].notes[-1]}")
    after = {p["metadata"]["uid"] for p in (await stack.kube.list(PODS))["items"]}
    assert after == before, "operand pods were replaced"
    # As with a kubelet, an unreachable API server stops no container: the same processes.
    assert running_processes(stack) == processes


async def restart_counts(stack: Stack) -> dict[str, int]:
    """restartCount of every operand container, by container name (summed over pods)."""
    counts: dict[str, int] = {}
    for pod in (await stack.kube.list(PODS))["items"]:
        for status in pod["status"].get("containerStatuses") or []:
            counts[status["name"]] = counts.get(status["name"], 0) + status["restartCount"]
    return counts


def running_processes(stack: Stack) -> dict[str, set[int]]:
    """The pids of every operand container's processes, by container name."""
    assert stack.cluster.simulated is not None
    return {container: {p.pid for p in stack.cluster.simulated.processes(NAMESPACE, container)}
            for container, _ in PROCESSES.values()}
