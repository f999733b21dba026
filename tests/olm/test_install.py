"""Install and uninstall through OLM: the current bundle, from a catalog, on a fresh cluster.

An administrator creates an OperatorGroup (AllNamespaces) and a Subscription; OLM unpacks
the bundle with its Job, installs the CRDs and the CSV, and runs the operator's Deployment
with the CSV's permissions. The operator creates ExternalSecretsManager/cluster; the
administrator creates ExternalSecretsConfig/cluster; the operand becomes Available and the
real external-secrets controller syncs a user's secret. Then the administrator removes the
operator through OLM (Subscription and CSV): the operand keeps running and syncing, and
`python -m manager uninstall --operand --yes` removes it.

In between, the cluster-wide proxy as OpenShift delivers it: the cluster runs in OpenShift
mode (conftest.py), its `proxies.config.openshift.io/cluster` status gets a proxy, the real
OLM copies it into the operator's Deployment, the operator passes it on to the operand's
controller by the documented precedence (ESC, then ESM, then its environment) with the
cluster's noProxy completed, and emptying the status takes it away everywhere. The proxy is
a listener of this test that counts connections, reachable from every pod started after it:
none of the operator's or the operand's API traffic reaches it.

Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio

from devcluster import catalog, olm
from devcluster.controlplane import KUBERNETES_SERVICE
from devcluster.netns import socket_of
from manager.client.kube import Kube
from manager.names import LEASE_NAME
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.e2e.operator_process import assert_log_clean
from tests.olm.conftest import (
    FIELD_MANAGER,
    NAMESPACE,
    OPERAND_NAMESPACE,
    STORE,
    OlmCluster,
    uninstall_through_olm,
)
from tests.proxy_listener import CountingListener, counting_listener
from tests.upgrade.test_upgrade import (
    ESC_PATH,
    ESM_PATH,
    ready_for_current_generation,
    synced_value,
)
from tests.waiting import eventually

OPENSHIFT = True  # OpenShift's config API, served before OLM starts (conftest.py)

OPERAND_DEPLOYMENTS = ("external-secrets", "external-secrets-webhook",
                       "external-secrets-cert-controller")
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
OPERATOR_DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{identity.DEPLOYMENT}"
OPERAND_DEPLOYMENT = f"/apis/apps/v1/namespaces/{OPERAND_NAMESPACE}/deployments/{{}}"
CLUSTER_PROXY = "/apis/config.openshift.io/v1/proxies/cluster"
# The proxy as the pods reach it (a documentation address, relayed to the test's listener).
PROXY_ADDRESS = ("192.0.2.10", 3128)
PROXY_URL = f"http://{PROXY_ADDRESS[0]}:{PROXY_ADDRESS[1]}"
# The status as OpenShift's cluster-network-operator writes it: the administrator's noProxy
# (vault.example.test) with the cluster's own networks and domains, but here not the
# API server's ClusterIP.
CLUSTER_NO_PROXY = ".cluster.local,.svc,10.245.0.0/16,127.0.0.1,localhost,vault.example.test"
# The operand's NO_PROXY: the cluster's, then what it lacks to stay in the cluster.
OPERAND_NO_PROXY = f"{CLUSTER_NO_PROXY},{KUBERNETES_SERVICE[0]},kubernetes.default.svc"
ESM_PROXY = {"httpProxy": "http://esm-proxy.example.test:3128", "noProxy": "esm.example.test"}
PROXY_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy")


@dataclass
class Installed:
    olm: OlmCluster
    release: catalog.Release
    csv: dict[str, Any]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def installed(olm_cluster: OlmCluster) -> AsyncIterator[Installed]:
    """The current release installed through OLM, configured, syncing a user's secret."""
    kube = olm_cluster.kube
    for name in ("externalsecretsconfigs.operator.openshift.io",
                 "externalsecrets.external-secrets.io"):
        assert await kube.get(f"{CRD}/{name}") is None, f"CRD {name} exists before the install"
    [release] = await olm_cluster.publish(REPO_ROOT)
    olm_cluster.mark("catalog served")
    await olm_cluster.subscribe(release)
    olm_cluster.mark("Subscription created")
    csv = await olm_cluster.succeeded(release)
    olm_cluster.mark(f"CSV {release.name} Succeeded")
    await eventually(lambda: kube.request("GET", ESM_PATH), 120,
                     what="the operator to create the ESM")
    olm_cluster.mark("ExternalSecretsManager created by the operator")
    await olm_cluster.configure()
    yield Installed(olm_cluster, release, csv)


async def test_olm_installs_the_bundle_and_the_operator_runs_with_its_permissions(
        installed: Installed) -> None:
    cluster, release, csv = installed.olm, installed.release, installed.csv
    kube = cluster.kube
    print(f"\ninstalled {release.name} through OLM:\n{cluster.timeline()}")

    # OLM unpacked the bundle image with its Job: util and pull, in order, then extract.
    jobs = (await kube.list(f"/apis/batch/v1/namespaces/{olm.NAMESPACE}/jobs"))["items"]
    [job] = [j for j in jobs if release.bundle_image in
             [c["image"] for c in j["spec"]["template"]["spec"]["initContainers"]]]
    assert job["status"].get("succeeded") == 1, job["status"]
    pods = (await kube.list(f"/api/v1/namespaces/{olm.NAMESPACE}/pods",
                            label_selector=f"job-name={job['metadata']['name']}"))["items"]
    [pod] = [p for p in pods if p["status"]["phase"] == "Succeeded"]
    init = [(s["name"], s["state"]["terminated"]) for s in pod["status"]["initContainerStatuses"]]
    assert [name for name, _ in init] == ["util", "pull"]
    assert all(state["exitCode"] == 0 for _, state in init), init
    assert init[0][1]["finishedAt"] <= init[1][1]["startedAt"], init
    assert pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 0
    print(f"  checked: unpack Job {job['metadata']['name']} complete: util, pull, extract")

    # The operator is the Deployment of the CSV, run as its pod with the pod's token.
    [process] = cluster.simulated.processes(NAMESPACE, identity.CONTAINER)
    assert process.argv[1:] == ("-m", "manager", "run",
                                f"--liveness=http://0.0.0.0:{identity.HEALTH_PORT}/healthz",
                                f"--metrics-addr=:{identity.METRICS_PORT}",
                                "--metrics-secure",
                                f"--metrics-cert-file={identity.METRICS_TLS_DIR}/tls.crt",
                                f"--metrics-key-file={identity.METRICS_TLS_DIR}/tls.key",
                                "--leader-elect")
    assert process.env["OPERATOR_CONDITION_NAME"] == release.name  # OLM injects it
    assert process.env["OPERATOR_IMAGE_VERSION"] == identity.OPERATOR_VERSION
    log = cluster.operator_log(release)
    assert "action=create result=created kind=ExternalSecretsManager" in log, log[-3000:]
    # No service CA here: the optional Secret stays empty, the pod starts anyway and serves
    # /metrics with a self-signed certificate.
    assert "action=metrics-certificate source=self-signed" in log, log[:3000]
    assert_log_clean(log, f"{release.name}'s operator", forbidden=True)
    print("  checked: the operator runs from this tree as the CSV's pod; no Forbidden, crashed "
          f"pass or traceback in {len(log.splitlines())} log lines")
    # It leads through the Lease in its namespace, with the CSV's namespaced permissions.
    assert "action=leader result=gained" in log, log[:3000]
    lease = await kube.request("GET", f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/"
                               f"leases/{LEASE_NAME}")
    assert lease["spec"]["holderIdentity"].startswith(f"{process.env['POD_NAME']}_"), lease
    print(f"  checked: it holds the Lease {LEASE_NAME} as {lease['spec']['holderIdentity']}")

    # Every image that runs is one the CSV declares (a mirror of relatedImages suffices).
    related = {entry["image"] for entry in csv["spec"].get("relatedImages") or []}
    running = set()
    for namespace in (NAMESPACE, OPERAND_NAMESPACE):
        for item in (await kube.list(f"/api/v1/namespaces/{namespace}/pods"))["items"]:
            running |= {c["image"] for c in item["spec"]["containers"]}
    assert running <= related, running - related
    print(f"  checked: the {len(running)} images running are in the CSV's relatedImages")

    # The operand is Available and syncing (Ready=True says so; the secret shows it).
    for name in OPERAND_DEPLOYMENTS:
        deployment = await kube.request(
            "GET", f"/apis/apps/v1/namespaces/{OPERAND_NAMESPACE}/deployments/{name}")
        available = {c["type"]: c["status"] for c in deployment["status"]["conditions"]}
        assert available.get("Available") == "True", (name, deployment["status"])
    await synced_value(kube, "v")
    print("  checked: ESM created by the operator; ESC Ready=True; the operand's "
          f"{len(OPERAND_DEPLOYMENTS)} Deployments Available; the user's secret synced")


def proxy_env(deployment: dict[str, Any], container: str) -> dict[str, str]:
    """The proxy variables of `container` in a Deployment's pod template."""
    [spec] = [c for c in deployment["spec"]["template"]["spec"]["containers"]
              if c["name"] == container]
    return {e["name"]: e.get("value", "") for e in spec.get("env") or []
            if e["name"] in PROXY_NAMES}


def operand_proxy(http: str | None, https: str | None, no_proxy: str) -> dict[str, str]:
    """What the operand's controller gets (configuration.md, "Proxy")."""
    found = {"NO_PROXY": no_proxy, "no_proxy": no_proxy}
    for name, value in (("HTTP_PROXY", http), ("HTTPS_PROXY", https)):
        if value:
            found |= {name: value, name.lower(): value}
    return found


# The controller's proxy from the operator's environment, that is from the cluster proxy.
FROM_ENVIRONMENT = operand_proxy(PROXY_URL, PROXY_URL, OPERAND_NO_PROXY)


async def operator_runs_with(cluster: OlmCluster, wanted: dict[str, str]) -> None:
    """Until OLM wrote `wanted` into the operator's Deployment and its one pod runs with it."""
    async def check() -> None:
        deployment = await cluster.kube.request("GET", OPERATOR_DEPLOYMENT)
        assert proxy_env(deployment, identity.CONTAINER) == wanted, deployment["metadata"]
        processes = cluster.simulated.processes(NAMESPACE, identity.CONTAINER)
        assert [{k: v for k, v in p.env.items() if k in PROXY_NAMES} for p in processes] == [
            wanted], [p.pod for p in processes]

    await eventually(check, 120, interval=0.5, what=f"the operator to run with {wanted}")


async def operand_renders(kube: Kube, wanted: dict[str, str]) -> None:
    """Until the operator wrote `wanted` into the controller's Deployment (and no proxy into
    the webhook's or the cert-controller's)."""
    async def check() -> None:
        deployment = await kube.request("GET", OPERAND_DEPLOYMENT.format("external-secrets"))
        assert proxy_env(deployment, "external-secrets") == wanted
        for name in ("external-secrets-webhook", "external-secrets-cert-controller"):
            other = await kube.request("GET", OPERAND_DEPLOYMENT.format(name))
            assert not proxy_env(other, other["spec"]["template"]["spec"]["containers"][0][
                "name"]), name

    await eventually(check, 60, interval=0.5, what=f"the operand's controller with {wanted}")


async def operand_runs_with(cluster: OlmCluster, wanted: dict[str, str]) -> None:
    """Until every running controller process has `wanted` and the ESC is Ready again."""
    await operand_renders(cluster.kube, wanted)

    async def check() -> None:
        processes = cluster.simulated.processes(OPERAND_NAMESPACE, "external-secrets")
        assert processes
        assert all({k: v for k, v in p.env.items() if k in PROXY_NAMES} == wanted
                   for p in processes), [p.pod for p in processes]

    await eventually(check, 120, interval=0.5, what=f"the controller to run with {wanted}")
    await ready_for_current_generation(cluster.kube)


def connect_from_pod(pid: int, address: tuple[str, int]) -> None:
    """One TCP connection to `address` from the network namespace of process `pid`."""
    probe = socket_of(pid)
    with probe:
        probe.settimeout(5)
        probe.connect(address)


async def test_the_cluster_proxy_reaches_the_operator_through_olm_and_the_operand_through_it(
        installed: Installed) -> None:
    cluster = installed.olm
    async with counting_listener() as proxy:
        cluster.simulated.add_egress(PROXY_ADDRESS, (proxy.host, proxy.port))
        try:
            await cluster_proxy_set(cluster, proxy)
            await proxies_of_the_specs_come_first(cluster.kube)
            cluster.mark("precedence: ESM over the environment, ESC over both, then back")
            await cluster_proxy_cleared(cluster, proxy)
        finally:
            cluster.simulated.remove_egress(PROXY_ADDRESS)
    print(f"  checked: cleared, it left the operator and the operand\n{cluster.timeline()}")


async def cluster_proxy_set(cluster: OlmCluster, proxy: CountingListener) -> None:
    """OLM injects the Proxy's status into the operator, the operator passes it on; no API
    traffic reaches the proxy."""
    kube = cluster.kube
    await kube.merge_patch(CLUSTER_PROXY, {"spec": {
        "httpProxy": PROXY_URL, "httpsProxy": PROXY_URL, "noProxy": "vault.example.test"}},
        field_manager=FIELD_MANAGER)  # the administrator's
    await kube.merge_patch(f"{CLUSTER_PROXY}/status", {"status": {  # the network operator's
        "httpProxy": PROXY_URL, "httpsProxy": PROXY_URL, "noProxy": CLUSTER_NO_PROXY}},
        field_manager=FIELD_MANAGER)
    cluster.mark("cluster proxy set (Proxy cluster status)")

    # OLM injects the status into the operator's Deployment; the new pod runs with it.
    await operator_runs_with(cluster, {"HTTP_PROXY": PROXY_URL, "HTTPS_PROXY": PROXY_URL,
                                       "NO_PROXY": CLUSTER_NO_PROXY})
    cluster.mark("OLM injected it: the operator's new pod runs with it")
    await operand_runs_with(cluster, FROM_ENVIRONMENT)
    cluster.mark("the operand's controller runs with it, NO_PROXY completed; ESC Ready")
    await kube.merge_patch(STORE, {"spec": {"provider": {"fake": {"data": [
        {"key": "k", "value": "with-the-cluster-proxy"}]}}}}, field_manager=FIELD_MANAGER)
    await eventually(lambda: synced_value(kube, "with-the-cluster-proxy"), 60,
                     what="the operand to sync with the proxy set")
    cluster.mark("the operand still syncs (its API traffic bypasses the proxy)")
    assert proxy.connections == 0, f"{proxy.connections} connections reached the proxy"
    # The proxy is reachable from the operator's pod: no connection is a fact, not luck.
    [process] = cluster.simulated.processes(NAMESPACE, identity.CONTAINER)
    await asyncio.to_thread(connect_from_pod, process.pid, PROXY_ADDRESS)

    async def control_seen() -> None:
        assert proxy.connections == 1, proxy.connections

    await eventually(control_seen, 10, what="the control connection")
    print("\n  checked: OLM injected the cluster proxy, the operand runs with it; 0 "
          "connections to the proxy from either (1 from this test's control)")



async def proxies_of_the_specs_come_first(kube: Kube) -> None:
    """The ESM's proxy hides the environment's, an empty ESC proxy both (the Deployment the
    operator writes; the pods roll meanwhile)."""
    await kube.merge_patch(ESM_PATH, {"spec": {"globalConfig": {"proxy": ESM_PROXY}}},
                           field_manager=FIELD_MANAGER)
    await operand_renders(kube, operand_proxy(
        ESM_PROXY["httpProxy"], None, f"{ESM_PROXY['noProxy']},{KUBERNETES_SERVICE[0]},"
        "kubernetes.default.svc,.svc,.cluster.local,localhost,127.0.0.1"))
    await kube.merge_patch(ESC_PATH, {"spec": {"appConfig": {"proxy": {}}}},
                           field_manager=FIELD_MANAGER)
    await operand_renders(kube, {})
    await kube.merge_patch(ESC_PATH, {"spec": {"appConfig": {"proxy": None}}},
                           field_manager=FIELD_MANAGER)
    await kube.merge_patch(ESM_PATH, {"spec": {"globalConfig": {"proxy": None}}},
                           field_manager=FIELD_MANAGER)
    await operand_renders(kube, FROM_ENVIRONMENT)


async def cluster_proxy_cleared(cluster: OlmCluster, proxy: CountingListener) -> None:
    """Emptied, the cluster proxy leaves the operator (through OLM), then the operand."""
    kube = cluster.kube
    await kube.merge_patch(f"{CLUSTER_PROXY}/status", {"status": {
        "httpProxy": None, "httpsProxy": None, "noProxy": None}},
        field_manager=FIELD_MANAGER)
    await kube.merge_patch(CLUSTER_PROXY, {"spec": {
        "httpProxy": None, "httpsProxy": None, "noProxy": None}},
        field_manager=FIELD_MANAGER)
    cluster.mark("cluster proxy cleared")
    await operator_runs_with(cluster, {})
    cluster.mark("OLM removed it from the operator's Deployment; its new pod runs")
    await operand_runs_with(cluster, {})
    assert await kube.get(f"/api/v1/namespaces/{OPERAND_NAMESPACE}/configmaps/"
                          "external-secrets-trusted-ca-bundle") is None
    cluster.mark("the operand's controller runs without it; ESC Ready")
    assert proxy.connections == 1, f"{proxy.connections - 1} connections reached the proxy"


async def test_uninstall_through_olm_keeps_the_operand_until_the_uninstall_command(
        installed: Installed) -> None:
    await uninstall_through_olm(installed.olm, installed.release)
    print(installed.olm.timeline())
