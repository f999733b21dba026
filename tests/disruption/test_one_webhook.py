"""The same disruptions with one webhook replica (the default: no PodDisruptionBudget is
rendered for it): what an administrator who keeps the default gets. How many admissions are
refused is measured, not bounded (docs/resilience.md), but a SIGKILL of the only webhook
process must refuse some: that is the positive control that the admission sampler reaches the
webhook at all. What is asserted besides is that the cluster behaved as a real one would and
the stack came back whole within the bounds of each scenario's kind."""

from __future__ import annotations

import pytest

from tests.disruption.conftest import (
    NAMESPACE,
    WEBHOOK_SELECTOR,
    Kind,
    Stack,
    admissions_refused,
    measured,
    pods,
)
from tests.disruption.scenarios import (
    ROLL_BY_ANNOTATION,
    drain,
    kill_process,
    restarted_as_a_kubelet_would,
    roll_every_deployment,
    uncordon,
    webhook_node,
)

# Bounds on time and on refusals: run after the busiest neighbours (hack/run-tests.py).
pytestmark = pytest.mark.timing

WEBHOOK_REPLICAS = 1


async def test_no_budget_for_one_replica(stack: Stack) -> None:
    budgets = await stack.kube.list(f"/apis/policy/v1/namespaces/{NAMESPACE}/"
                                    "poddisruptionbudgets")
    assert budgets["items"] == []


async def test_draining_the_node_of_the_webhook(stack: Stack) -> None:
    node, kind = await webhook_node(stack)
    try:
        async with measured(stack, "`kubectl drain` of the webhook's node", kind) as notes:
            await drain(stack, node, notes)
        webhooks = await pods(stack.kube, WEBHOOK_SELECTOR)
        assert len(webhooks) == 1
        assert webhooks[0]["spec"]["nodeName"] != node
    finally:
        await uncordon(stack, node)


async def test_sigkill_of_the_webhook_process(stack: Stack) -> None:
    async with measured(stack, "SIGKILL of the webhook process", Kind.CONTROLLER_KEPT) as notes:
        before = await kill_process(stack, "webhook")
        seconds = await restarted_as_a_kubelet_would(stack, before, "webhook", has_probe=True)
        notes.append(f"the pod not Ready for {seconds:.1f} s")
    # The positive control: with the only webhook process dead, admissions must be refused
    # (45 of 97 in the last measured run). None refused means the sampler did not reach it.
    assert admissions_refused() > 0


async def test_rolling_every_deployment(stack: Stack) -> None:
    async with measured(stack, ROLL_BY_ANNOTATION, Kind.NEW_CONTROLLER):
        await roll_every_deployment(stack)
