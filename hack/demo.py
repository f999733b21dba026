"""`make demo`: the operator at work on a local control plane, then exit.

Starts etcd + kube-apiserver, installs the operator's CRDs, runs the operator in this
process, creates `ExternalSecretsConfig/cluster` with `spec: {}`, waits until it is Ready,
and prints what the operator created. Run it inside the loopback-only namespace
(`make demo` does).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time

from devcluster import controlplane
from manager.operator import OperatorOptions, configure_logging, install_operator_crds, serve

MANAGED = "app.kubernetes.io/managed-by=external-secrets-operator"
KINDS = ("namespaces,serviceaccounts,clusterroles,clusterrolebindings,roles,rolebindings,"
         "secrets,services,deployments,networkpolicies,validatingwebhookconfigurations")


def kubectl(plane: controlplane.LocalControlPlane, *args: str) -> str:
    return subprocess.run([str(plane.kubectl), f"--kubeconfig={plane.kubeconfig}", *args],
                          capture_output=True, text=True, check=True).stdout


def say(text: str) -> None:
    print(f"\n== {text}", flush=True)


async def wait_ready(plane: controlplane.LocalControlPlane, timeout: float = 60) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        esc = json.loads(kubectl(plane, "get", "esc", "cluster", "-o", "json"))
        ready = [c for c in esc.get("status", {}).get("conditions", []) if c["type"] == "Ready"]
        if ready and ready[0]["status"] == "True":
            return time.monotonic() - started
        await asyncio.sleep(0.1)
    raise TimeoutError("ExternalSecretsConfig/cluster did not become Ready")


async def demo(plane: controlplane.LocalControlPlane) -> None:
    await install_operator_crds(plane.kubeconfig)
    stop = asyncio.Event()
    operator = asyncio.create_task(serve(OperatorOptions(kubeconfig=str(plane.kubeconfig),
                                                         events_namespace="default"),
                                         stop_flag=stop))
    try:
        say("kubectl apply: ExternalSecretsConfig/cluster with spec: {}")
        print(subprocess.run(
            [str(plane.kubectl), f"--kubeconfig={plane.kubeconfig}", "apply", "-f", "-"],
            input="apiVersion: operator.openshift.io/v1alpha1\nkind: ExternalSecretsConfig\n"
                  "metadata:\n  name: cluster\nspec: {}\n",
            capture_output=True, text=True, check=True).stdout, end="")
        seconds = await wait_ready(plane)
        say(f"Ready after {seconds:.2f} s: kubectl get esc,esm")
        print(kubectl(plane, "get", "esc,esm"), end="")
        say(f"objects the operator manages (-l {MANAGED})")
        print(kubectl(plane, "get", KINDS, "-A", "-l", MANAGED), end="")
        say("ExternalSecretsManager status (one entry per controller)")
        esm = json.loads(kubectl(plane, "get", "esm", "cluster", "-o", "json"))
        for entry in esm.get("status", {}).get("controllerStatuses", []):
            states = ", ".join(f"{c['type']}={c['status']}" for c in entry.get("conditions", []))
            print(f"{entry['name']}: {states}")
        say("events on the ESC")
        print(kubectl(plane, "get", "events", "-n", "default",
                      "--field-selector", "involvedObject.kind=ExternalSecretsConfig"), end="")
    finally:
        stop.set()
        await operator


def main() -> int:
    configure_logging()
    controlplane.require_loopback_only_network()
    workdir = controlplane.temporary_workdir()
    with controlplane.LocalControlPlane(controlplane.ensure_binaries(), workdir) as plane:
        say(f"local control plane: kube-apiserver {plane.version} at {plane.server}")
        asyncio.run(demo(plane))
    return 0


if __name__ == "__main__":
    sys.exit(main())
