"""What every suite needs about the operand: whether it counts as installed, and removing it.

The simulated cluster has no bitwarden-sdk-server binary (its Go module is not served), so
with bitwarden on the operand can never be fully available there: the operator then reports
`Ready=False`, `WaitingForOperand`, `status.awaited` naming exactly that Deployment with its
pod waiting for `NoLocalBinary`. Suites that switch bitwarden on accept that state, and only
that state, as "installed" on the simulated cluster; on a real cluster they expect
`Ready=True`.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from manager.kube import Kube
from manager.uninstall import execute_uninstall, plan_uninstall

ESC_PATH = "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs/cluster"

def _ready(status: dict[str, Any] | None) -> dict[str, Any]:
    conditions = (status or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == "Ready"), {})


def awaits_only_bitwarden(status: dict[str, Any] | None, namespace: str) -> bool:
    """Not Ready, waiting for nothing but bitwarden-sdk-server's pod (`status.awaited`)."""
    ready = _ready(status)
    awaited = (status or {}).get("awaited") or []
    return (ready.get("status") == "False" and ready.get("reason") == "WaitingForOperand"
            and [item.get("object") for item in awaited]
            == [f"Deployment {namespace}/bitwarden-sdk-server"]
            and "NoLocalBinary" in awaited[0].get("message", ""))


def counts_as_installed(status: dict[str, Any] | None, namespace: str, *,
                        simulated: bool) -> bool:
    """Ready=True, or (simulated cluster) waiting for nothing but bitwarden-sdk-server."""
    if _ready(status).get("status") == "True":
        return True
    return simulated and awaits_only_bitwarden(status, namespace)


async def remove_operand(kube: Kube, timeout: float = 60.0) -> None:
    """Delete the ESC, then every object the operator created (as `uninstall --operand
    --yes` does), and wait until the operand's pods, and so its processes, are gone: the
    operand really runs, and two at once would fight over the cluster-scoped webhook
    configurations."""
    await kube.delete(ESC_PATH)
    deadline = time.monotonic() + timeout
    while await kube.get(ESC_PATH) is not None:
        assert time.monotonic() < deadline, "the ExternalSecretsConfig was not deleted"
        await asyncio.sleep(0.1)
    report = await execute_uninstall(kube, await plan_uninstall(kube))
    assert not report.errors, report.errors
    deployments = {(ref.namespace, ref.name) for ref in report.deleted
                   if ref.kind == "Deployment"}
    for namespace in {namespace for namespace, _ in deployments}:
        while left := [pod for pod in (await kube.list(
                f"/api/v1/namespaces/{namespace}/pods"))["items"]
                       if (namespace, _deployment_of(pod)) in deployments]:
            assert time.monotonic() < deadline, f"operand pods still running: {left}"
            await asyncio.sleep(0.2)


def _deployment_of(pod: dict[str, Any]) -> str | None:
    """The Deployment a pod belongs to: its ReplicaSet is named `<deployment>-<hash>`."""
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("kind") == "ReplicaSet":
            return str(owner["name"]).rsplit("-", 1)[0]
    return None
