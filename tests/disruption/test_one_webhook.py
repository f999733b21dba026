"""The same disruptions with one webhook replica (the default: no PodDisruptionBudget is
rendered for it): what an administrator who keeps the default gets. The figures are
measured, not bounded (docs/resilience.md); what is asserted is that the cluster behaved as a
real one would and the stack came back whole."""

from __future__ import annotations

from tests.disruption.conftest import NAMESPACE, WEBHOOK_SELECTOR, Stack, measured, pods
from tests.disruption.scenarios import (
    ROLL_BY_ANNOTATION,
    drain_webhook_node,
    kill_process,
    restarted_as_a_kubelet_would,
    roll_every_deployment,
)

WEBHOOK_REPLICAS = 1


async def test_no_budget_for_one_replica(stack: Stack) -> None:
    budgets = await stack.kube.list(f"/apis/policy/v1/namespaces/{NAMESPACE}/"
                                    "poddisruptionbudgets")
    assert budgets["items"] == []


async def test_draining_the_node_of_the_webhook(stack: Stack) -> None:
    async with measured(stack, "`kubectl drain` of the webhook's node") as notes:
        node = await drain_webhook_node(stack, notes)
    try:
        webhooks = await pods(stack.kube, WEBHOOK_SELECTOR)
        assert len(webhooks) == 1
        assert webhooks[0]["spec"]["nodeName"] != node
    finally:
        stack.cluster.kubectl("uncordon", node)


async def test_sigkill_of_the_webhook_process(stack: Stack) -> None:
    async with measured(stack, "SIGKILL of the webhook process") as notes:
        before = await kill_process(stack, "webhook")
        seconds = await restarted_as_a_kubelet_would(stack, before, "webhook", has_probe=True)
        notes.append(f"the pod not Ready for {seconds:.1f} s")


async def test_rolling_every_deployment(stack: Stack) -> None:
    async with measured(stack, ROLL_BY_ANNOTATION):
        await roll_every_deployment(stack)
