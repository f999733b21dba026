"""The disruptions themselves, shared by the modules that run them with two webhook replicas
and with one. Each returns after the disruption is under way; `measured` (conftest) waits
until the stack is whole again."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from typing import Any

import pytest

from tests.disruption.conftest import (
    NAMESPACE,
    PODS,
    WEBHOOK_SELECTOR,
    Stack,
    pods,
)
from tests.waiting import eventually

# The container of each operand process, and its pods' label.
PROCESSES = {
    "webhook": ("webhook", WEBHOOK_SELECTOR),
    "controller": ("external-secrets", "app.kubernetes.io/name=external-secrets"),
    "cert-controller": ("cert-controller",
                        "app.kubernetes.io/name=external-secrets-cert-controller"),
}
KILLED_EXIT_CODE = 128 + signal.SIGKILL  # as a container runtime reports a SIGKILLed process
ROLL_BY_ANNOTATION = ("a change that rolls every Deployment: an annotation "
                      "(`controllerConfig.annotations`)")
ROLL_BY_RESOURCES = ("a change that rolls every Deployment: a resource change "
                     "(`appConfig.resources`)")
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"


def _status(pod: dict[str, Any], container: str) -> dict[str, Any]:
    statuses = pod["status"].get("containerStatuses") or []
    return next(s for s in statuses if s["name"] == container)


def _ready(pod: dict[str, Any]) -> bool:
    return any(c["type"] == "Ready" and c["status"] == "True"
               for c in pod["status"].get("conditions") or [])


async def drain_webhook_node(stack: Stack, notes: list[str]) -> str:
    """`kubectl drain` the node of a webhook pod (through the Eviction API, so the webhook's
    PodDisruptionBudget is honoured); returns the node, still cordoned."""
    webhook = (await pods(stack.kube, WEBHOOK_SELECTOR))[0]
    node = webhook["spec"]["nodeName"]
    on_node = [p["metadata"]["name"] for p in (await stack.kube.list(PODS))["items"]
               if p["spec"].get("nodeName") == node]
    notes.append(f"{len(on_node)} operand pods on {node}")
    started = time.monotonic()
    result = await asyncio.to_thread(
        stack.cluster.kubectl, "drain", node, "--ignore-daemonsets", "--delete-emptydir-data",
        "--timeout=120s", check=False)
    assert result.returncode == 0, f"drain failed: {result.stderr}"
    notes.append(f"drain took {time.monotonic() - started:.1f} s")
    evictions = result.stdout.count("evicted")
    assert evictions >= len(on_node), result.stdout
    return str(node)


async def kill_process(stack: Stack, which: str) -> dict[str, Any]:
    """SIGKILL the process of one pod of `which`; returns that pod as it was before."""
    container, selector = PROCESSES[which]
    cluster = stack.cluster.simulated
    if cluster is None:  # on another cluster the processes are in containers we cannot reach
        pytest.skip("SIGKILL of an operand process needs the simulated cluster's pod runner")
    before = {p["metadata"]["name"]: p for p in await pods(stack.kube, selector)}
    running = [p for p in cluster.processes(NAMESPACE, container) if p.pod in before]
    assert running, f"no running {which} process"
    os.kill(running[0].pid, signal.SIGKILL)
    return before[running[0].pod]


async def restarted_as_a_kubelet_would(stack: Stack, before: dict[str, Any],
                                       container: str, has_probe: bool) -> float:
    """The same pod (not replaced) has restarted the container once, reports the kill as
    exit code 137, and (with a readiness probe) was not Ready until the new process answered
    it. Returns how long the pod was seen not Ready."""
    path = f"{PODS}/{before['metadata']['name']}"
    restarts = _status(before, container)["restartCount"]
    not_ready_since: float | None = None
    not_ready = 0.0

    async def restarted() -> dict[str, Any]:
        nonlocal not_ready_since, not_ready
        pod = await stack.kube.get(path)
        assert pod is not None, "the pod was replaced"
        now = time.monotonic()
        if not _ready(pod):
            not_ready_since = not_ready_since or now
        elif not_ready_since is not None:
            not_ready, not_ready_since = now - not_ready_since, None
        status = _status(pod, container)
        assert status["restartCount"] == restarts + 1, status
        assert status["ready"], status
        assert _ready(pod), pod["status"]
        return pod

    pod = await eventually(restarted, 60, interval=0.05, what=f"{container} restarted")
    assert pod["metadata"]["uid"] == before["metadata"]["uid"]
    last = _status(pod, container)["lastState"]["terminated"]
    assert last["exitCode"] == KILLED_EXIT_CODE, last
    if has_probe:
        assert not_ready > 0, "the pod stayed Ready while its process was dead"
    return not_ready


async def roll_every_deployment(stack: Stack) -> dict[str, str]:
    """An annotation on the ESC, which lands on every pod template: every Deployment rolls.
    Returns each Deployment's template annotation as the test set it."""
    value = f"roll-{time.time_ns()}"
    await stack.esc.patch_spec({"controllerConfig": {"annotations": {"disruption/roll": value}}})

    async def rolled() -> dict[str, str]:
        deployments = (await stack.kube.list(f"/apis/apps/v1/namespaces/{NAMESPACE}/"
                                             "deployments"))["items"]
        found = {d["metadata"]["name"]: d["spec"]["template"]["metadata"].get(
            "annotations", {}).get("disruption/roll", "") for d in deployments}
        assert all(v == value for v in found.values()), found
        return found

    result: dict[str, str] = await eventually(rolled, 30, what="every template annotated")
    return result


async def change_resources(stack: Stack) -> str:
    """A new memory request for every operand container (`appConfig.resources`): every
    Deployment rolls. Returns the request set."""
    esc = await stack.esc.get()
    current = (((esc["spec"].get("appConfig") or {}).get("resources") or {})
               .get("requests") or {}).get("memory")
    memory = "72Mi" if current == "64Mi" else "64Mi"
    await stack.esc.patch_spec({"appConfig": {"resources": {
        "requests": {"cpu": "10m", "memory": memory}}}})

    async def changed() -> None:
        for deployment in (await stack.kube.list(DEPLOYMENTS))["items"]:
            for container in deployment["spec"]["template"]["spec"]["containers"]:
                requests = (container.get("resources") or {}).get("requests") or {}
                assert requests.get("memory") == memory, (
                    f"{deployment['metadata']['name']}/{container['name']}: {requests}")

    await eventually(changed, 30, what=f"every container to request {memory}")
    return memory
