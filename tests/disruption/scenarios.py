"""The disruptions themselves, shared by the modules that run them with two webhook replicas
and with one. Each returns after the disruption is under way; `measured` (conftest) waits
until the stack is whole again."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from devcluster.runner import PRE_STOP_SCALE, pre_stop_sleep
from manager.client.kube import Kube
from tests.disruption.conftest import (
    NAMESPACE,
    PODS,
    WEBHOOK_SELECTOR,
    Kind,
    Stack,
    pods,
)
from tests.samplers import stopped
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


async def webhook_node(stack: Stack) -> tuple[str, Kind]:
    """The node of a webhook pod, the one to drain, and the kind of that drain: whether the
    controller's pod is there too (then a new controller waits for the lease)."""
    webhook = (await pods(stack.kube, WEBHOOK_SELECTOR))[0]
    node = str(webhook["spec"]["nodeName"])
    controllers = await pods(stack.kube, PROCESSES["controller"][1])
    moved = any(p["spec"].get("nodeName") == node for p in controllers)
    return node, Kind.NEW_CONTROLLER if moved else Kind.CONTROLLER_KEPT


async def drain(stack: Stack, node: str, notes: list[str]) -> None:
    """`kubectl drain` the node (through the Eviction API, so the webhook's
    PodDisruptionBudget is honoured); it stays cordoned."""
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


async def uncordon(stack: Stack, node: str) -> None:
    await asyncio.to_thread(stack.cluster.kubectl, "uncordon", node)


async def kill_process(stack: Stack, which: str) -> dict[str, Any]:
    """SIGKILL the process of one pod of `which`; returns that pod as it was before."""
    container, selector = PROCESSES[which]
    cluster = stack.cluster.simulated
    if cluster is None:  # on another cluster the processes are in containers we cannot reach
        pytest.skip("SIGKILL of an operand process needs the simulated cluster's pod runner")
    before = {p["metadata"]["name"]: p for p in await pods(stack.kube, selector)}
    running = [p for p in await asyncio.to_thread(cluster.processes, NAMESPACE, container)
               if p.pod in before]
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


# --- a webhook pod's termination: the endpoints and the preStop sleep ---------------------------

WEBHOOK_SERVICE = "external-secrets-webhook"


def _ready_addresses(endpoint_slice: dict[str, Any]) -> set[str]:
    """The addresses kube-apiserver may dial for a webhook: k8s.io/apiserver's
    proxy.ResolveEndpoint takes an endpoint whose `ready` condition is true or unset."""
    return {endpoint["addresses"][0] for endpoint in endpoint_slice.get("endpoints") or []
            if (endpoint.get("conditions") or {}).get("ready") is not False}


class ReadyEndpoints:
    """Follows the EndpointSlices of a Service, as kube-apiserver's own informer does, and
    notes when (time.monotonic) each address stopped being a ready endpoint."""

    def __init__(self, kube: Kube, namespace: str, service: str):
        self.kube = kube
        self.path = f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"
        self.selector = f"kubernetes.io/service-name={service}"
        self.left: dict[str, float] = {}
        self._slices: dict[str, set[str]] = {}
        self._task: asyncio.Task[None] | None = None

    @property
    def ready(self) -> set[str]:
        return set().union(*self._slices.values())

    async def __aenter__(self) -> ReadyEndpoints:
        listing = await self.kube.list(self.path, label_selector=self.selector)
        for item in listing["items"]:
            self._slices[item["metadata"]["name"]] = _ready_addresses(item)
        self._task = asyncio.create_task(self._follow(listing["metadata"]["resourceVersion"]))
        return self

    async def __aexit__(self, *_: object) -> None:
        await stopped(self._task)

    async def _follow(self, version: str) -> None:
        async for event in self.kube.watch(self.path, resource_version=version,
                                           label_selector=self.selector):
            now, before = time.monotonic(), self.ready
            if event.type == "BOOKMARK":
                continue
            name = event.object["metadata"]["name"]
            if event.type == "DELETED":
                self._slices.pop(name, None)
            else:
                self._slices[name] = _ready_addresses(event.object)
            for address in before - self.ready:
                self.left.setdefault(address, now)
        raise AssertionError("the watch of the EndpointSlices ended")

    async def gone(self, address: str, timeout: float = 30.0) -> float:
        """When `address` stopped being a ready endpoint (waits for it)."""
        async def left() -> float:
            assert self._task is not None
            if self._task.done():
                self._task.result()  # the watch's own error
            assert address in self.left, f"{address} is still a ready endpoint"
            return self.left[address]

        return await eventually(left, timeout, interval=0.01,
                                what=f"{address} to leave the EndpointSlices")


def pre_stop_seconds(stack: Stack, pod: dict[str, Any]) -> float:
    """The pod's preStop sleep as it runs here: the simulated cluster's pod runner shortens
    it (devcluster/runner.py PRE_STOP_SCALE), a kubelet does not."""
    seconds = max(pre_stop_sleep(container) for container in pod["spec"]["containers"])
    return seconds * PRE_STOP_SCALE if stack.cluster.simulated is not None else seconds


async def process_of(stack: Stack, pod: str, container: str) -> int | None:
    """The pid of `container`'s process in `pod` (None off the simulated cluster)."""
    cluster = stack.cluster.simulated
    if cluster is None:
        return None
    [process] = [p for p in await asyncio.to_thread(cluster.processes, NAMESPACE, container)
                 if p.pod == pod]
    return process.pid


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie has ended


async def ended(pid: int, timeout: float = 30.0) -> float:
    """When (time.monotonic) process `pid` was first seen gone (waits for it)."""
    async def gone() -> float:
        assert not _alive(pid), f"process {pid} still runs"
        return time.monotonic()

    return await eventually(gone, timeout, interval=0.01, what=f"process {pid} to end")
