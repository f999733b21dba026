"""`make demo`: the operator at work on a simulated cluster, then exit.

Starts the simulated cluster (devcluster: control plane, controllers, two kwok nodes, the
pod runner), installs the CRDs OLM would install, runs the operator in this process,
creates `ExternalSecretsConfig/cluster` with `spec: {}`, shows the Deployments becoming
available and the ESC turning Ready, then syncs a secret through the real external-secrets
controller and prints what the operator created. Run it inside the loopback-only network
namespace (`make demo` does).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp

from devcluster import controlplane, crds
from devcluster.cluster import SimulatedCluster
from manager.logs import configure_logging
from manager.runtime.operator import OperatorOptions, serve

MANAGED = "app.kubernetes.io/managed-by=external-secrets-operator"
KINDS = ("namespaces,serviceaccounts,clusterroles,clusterrolebindings,roles,rolebindings,"
         "secrets,services,deployments,networkpolicies,validatingwebhookconfigurations")
USER_OBJECTS = """
apiVersion: v1
kind: Namespace
metadata: {name: demo-team}
---
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata: {name: demo, namespace: demo-team}
spec:
  provider:
    fake:
      data: [{key: /demo/db-password, value: not-a-real-password}]
---
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata: {name: db, namespace: demo-team}
spec:
  refreshInterval: 10s
  secretStoreRef: {name: demo, kind: SecretStore}
  target: {name: db-credentials}
  data: [{secretKey: password, remoteRef: {key: /demo/db-password}}]
"""
# On loopback: the pods' port relays hold <podIP>:8080 in this network namespace.
METRICS_PORT = 8080
DEMO_METRICS = ("eso_operator_passes_total", "eso_operator_pass_duration_seconds_count",
                'eso_operator_api_requests_total{verb="apply",resource="deployments"}',
                'eso_operator_object_writes_total{action="created",kind="Deployment"}',
                'eso_operator_managed_objects{kind="Deployment"}',
                'eso_operator_condition{controller="",resource="ExternalSecretsConfig"',
                "process_resident_memory_bytes")


class Demo:
    def __init__(self, cluster: SimulatedCluster):
        self.cluster = cluster

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        plane = self.cluster.plane
        return subprocess.run([str(plane.kubectl), f"--kubeconfig={plane.kubeconfig}", *args],
                              input=stdin, capture_output=True, text=True, check=True).stdout

    def ready(self) -> dict[str, str] | None:
        esc = json.loads(self.kubectl("get", "esc", "cluster", "-o", "json"))
        conditions = {c["type"]: c for c in esc.get("status", {}).get("conditions", [])}
        return conditions.get("Ready")

    async def watch_until_ready(self, timeout: float = 120) -> float:
        """Print the Deployments whenever their availability changes, until Ready=True."""
        started, shown = time.monotonic(), ""
        while time.monotonic() - started < timeout:
            deployments = self.kubectl("get", "deployments", "-n", "external-secrets", "-o",
                                       "custom-columns=NAME:.metadata.name,"
                                       "UP-TO-DATE:.status.updatedReplicas,"
                                       "AVAILABLE:.status.availableReplicas")
            if deployments and deployments != shown:
                say(f"{time.monotonic() - started:5.1f} s: kubectl get deployments "
                    "-n external-secrets")
                print(deployments, end="")
                shown = deployments
            ready = self.ready()
            if ready and ready["status"] == "True":
                return time.monotonic() - started
            await asyncio.sleep(0.2)
        raise TimeoutError("ExternalSecretsConfig/cluster did not become Ready")

    async def wait_synced(self, timeout: float = 60) -> None:
        started = time.monotonic()
        while time.monotonic() - started < timeout:
            status = json.loads(self.kubectl("get", "externalsecret", "db", "-n", "demo-team",
                                             "-o", "json")).get("status", {})
            if any(c["type"] == "Ready" and c["status"] == "True"
                   for c in status.get("conditions", [])):
                return
            await asyncio.sleep(0.2)
        raise TimeoutError("the ExternalSecret did not sync")

    async def run(self) -> None:
        stop = asyncio.Event()
        operator = asyncio.create_task(serve(
            OperatorOptions(kubeconfig=str(self.cluster.kubeconfig),
                            # plain HTTP on loopback, for the curl it prints
                            metrics_addr=f"127.0.0.1:{METRICS_PORT}", metrics_secure=False),
            stop_flag=stop))
        try:
            say("kubectl apply: ExternalSecretsConfig/cluster with spec: {}")
            print(self.kubectl("apply", "-f", "-", stdin="apiVersion: operator.openshift.io/"
                               "v1alpha1\nkind: ExternalSecretsConfig\nmetadata:\n  name: "
                               "cluster\nspec: {}\n"), end="")
            seconds = await self.watch_until_ready()
            say(f"Ready after {seconds:.1f} s: kubectl get esc,esm")
            print(self.kubectl("get", "esc,esm"), end="")
            say("a SecretStore (fake provider) and an ExternalSecret, through the real webhook")
            print(self.kubectl("apply", "-f", "-", stdin=USER_OBJECTS), end="")
            await self.wait_synced()
            print(self.kubectl("get", "externalsecret", "-n", "demo-team"), end="")
            keys = json.loads(self.kubectl("get", "secret", "db-credentials", "-n", "demo-team",
                                           "-o", "json"))["data"]
            print(f"secret/db-credentials keys: {sorted(keys)}")
            say(f"objects the operator manages (-l {MANAGED})")
            print(self.kubectl("get", KINDS, "-A", "-l", MANAGED), end="")
            say("ExternalSecretsManager status (one entry per controller)")
            esm = json.loads(self.kubectl("get", "esm", "cluster", "-o", "json"))
            for entry in esm.get("status", {}).get("controllerStatuses", []):
                states = ", ".join(f"{c['type']}={c['status']}"
                                   for c in entry.get("conditions", []))
                print(f"{entry['name']}: {states}")
            say("events on the ESC")
            print(self.kubectl("get", "events", "-n", "default", "--field-selector",
                               "involvedObject.kind=ExternalSecretsConfig"), end="")
            say(f"a few of the operator's metrics: curl http://127.0.0.1:{METRICS_PORT}/metrics")
            print(await metric_lines(), end="")
        finally:
            stop.set()
            await operator


async def metric_lines() -> str:
    """The operator's /metrics, as Prometheus scrapes it, cut to the lines worth a look."""
    async with aiohttp.ClientSession() as session, session.get(
            f"http://127.0.0.1:{METRICS_PORT}/metrics") as response:
        text = await response.text()
    shown = [line for line in text.splitlines() if line.startswith(DEMO_METRICS)
             and not line.endswith(" 0.0")]
    return "\n".join(shown) + "\n"


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


def main() -> int:
    configure_logging()
    controlplane.require_loopback_only_network()
    with tempfile.TemporaryDirectory(prefix="eso-demo-") as workdir:
        started = time.monotonic()
        with SimulatedCluster(Path(workdir)) as cluster:
            crds.install(cluster.api, crds.all_crds())
            say(f"simulated cluster ready in {time.monotonic() - started:.1f} s: "
                f"kube-apiserver {cluster.plane.version} at {cluster.plane.server}, "
                "2 kwok nodes, the operand's real binaries run by the pod runner")
            asyncio.run(Demo(cluster).run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
