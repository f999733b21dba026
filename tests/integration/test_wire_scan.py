"""A wire scan of the installed operand (issue 37 item 6): every port every operand process
listens on, declared or not, handshaken from inside its pod's network namespace
(tests/tls_scan.py), bitwarden-sdk-server included. On plain Kubernetes the profile is
Intermediate: the webhook must accept exactly TLS 1.2 and 1.3 and, below 1.3, only suites
of that profile; every other listener is named in docs/operations.md ("TLS profile"): the
metrics and probe ports speak plain HTTP, and bitwarden-sdk-server, which has no TLS
settings, serves Go's defaults. A listener nobody declared in the pod's spec fails the test,
unless it is one of `UNDECLARED`. Run with `-s` for the table.
"""

from __future__ import annotations

import asyncio

import pytest

from manager.client.kube import Kube
from manager.tls_profile import CIPHERS, INTERMEDIATE
from tests.conftest import Cluster
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    USE_EXISTING_CLUSTER,
    EscHandle,
    StartOperator,
    install_with_bitwarden,
)
from tests.tls_scan import PortScan, scan_pod

NAMESPACE = SCENARIO_NAMESPACES["wire-scan"]
WEBHOOK_PORT = 10250
BITWARDEN_PORT = 9998
UNDECLARED = {8082: "the controller's health server (`--live-addr`, default `:8082`), which "
                    "no probe uses"}
"""Ports an operand process listens on that its pod spec does not declare, and why."""

pytestmark = pytest.mark.skipif(USE_EXISTING_CLUSTER, reason="enters the pods' network "
                                "namespaces of the simulated cluster")


def declared_ports(pod: dict[str, object]) -> set[int]:
    spec = pod["spec"]
    assert isinstance(spec, dict)
    return {port["containerPort"] for container in spec["containers"]
            for port in container.get("ports") or []}


async def scans(cluster: Cluster, kube: Kube) -> dict[str, tuple[set[int], list[PortScan]]]:
    """Per pod: its declared ports and the scan of what its processes listen on."""
    assert cluster.simulated is not None
    found = {}
    for pod in (await kube.list(f"/api/v1/namespaces/{NAMESPACE}/pods"))["items"]:
        name = pod["metadata"]["name"]
        pids = {process.pid for container in pod["spec"]["containers"]
                for process in await asyncio.to_thread(cluster.simulated.processes, NAMESPACE,
                                                       container["name"])
                if process.pod == name}
        assert pids, f"no process of pod {name}"
        found[name] = (declared_ports(pod), await asyncio.to_thread(scan_pod, pids))
    return found


async def test_every_operand_port_on_the_wire(
        cluster: Cluster, kube: Kube, esc: EscHandle, start_operator: StartOperator) -> None:
    await start_operator()
    await install_with_bitwarden(kube, esc, NAMESPACE)

    found = await scans(cluster, kube)
    for pod, (_, ports) in sorted(found.items()):
        for port in ports:
            print(f"wire scan: {pod} {port}")  # with -s
    assert len(found) == 4, sorted(found)  # controller, webhook, cert-controller, bitwarden
    listeners = {port.port: port for _, ports in found.values() for port in ports}
    undeclared = {port.port for declared, ports in found.values() for port in ports
                  if port.port not in declared}
    assert undeclared == set(UNDECLARED), (undeclared, found)

    webhook = listeners[WEBHOOK_PORT]
    assert webhook.versions == ("VersionTLS12", "VersionTLS13"), webhook
    allowed = {name for name in INTERMEDIATE.ciphers if name in CIPHERS}
    assert webhook.suites, webhook
    assert set(webhook.suites) <= allowed, webhook
    assert listeners[BITWARDEN_PORT].tls, listeners[BITWARDEN_PORT]
    plain = {port for port, scan in listeners.items() if not scan.tls}
    assert plain == set(listeners) - {WEBHOOK_PORT, BITWARDEN_PORT}, listeners
