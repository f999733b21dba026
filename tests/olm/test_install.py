"""Install and uninstall through OLM: the current bundle, from a catalog, on a fresh cluster.

An administrator creates an OperatorGroup (AllNamespaces) and a Subscription; OLM unpacks
the bundle with its Job, installs the CRDs and the CSV, and runs the operator's Deployment
with the CSV's permissions. The operator creates ExternalSecretsManager/cluster; the
administrator creates ExternalSecretsConfig/cluster; the operand becomes Available and the
real external-secrets controller syncs a user's secret. Then the administrator removes the
operator through OLM (Subscription and CSV): the operand keeps running and syncing, and
`python -m manager uninstall --operand --yes` removes it.

Run with `-s` to see the timeline.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest_asyncio

from devcluster import catalog, olm
from manager.leader import LEASE_NAME
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.olm.conftest import (
    CSVS,
    FIELD_MANAGER,
    NAMESPACE,
    OPERAND_NAMESPACE,
    SUBSCRIPTION,
    OlmCluster,
)
from tests.upgrade.snapshot import take_snapshot
from tests.upgrade.test_upgrade import ESC_PATH, ESM_PATH, synced_value
from tests.waiting import eventually

OPERAND_DEPLOYMENTS = ("external-secrets", "external-secrets-webhook",
                       "external-secrets-cert-controller")
STORE = f"/apis/external-secrets.io/v1/namespaces/{OPERAND_NAMESPACE}/secretstores/team-store"
CRD = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


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
    forbidden = [line for line in log.splitlines() if "forbidden" in line.lower()]
    assert not forbidden, "\n".join(forbidden)
    print("  checked: the operator runs from this tree as the CSV's pod, 0 Forbidden in "
          f"{len(log.splitlines())} log lines")
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


async def test_uninstall_through_olm_keeps_the_operand_until_the_uninstall_command(
        installed: Installed) -> None:
    cluster, release = installed.olm, installed.release
    kube = cluster.kube
    operand = await take_snapshot(kube, OPERAND_NAMESPACE)
    assert operand.deployments, "no operand to keep"

    await kube.delete(SUBSCRIPTION)
    await kube.delete(f"{CSVS}/{release.name}")

    async def operator_gone() -> None:
        deployment = (f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/"
                      f"{identity.DEPLOYMENT}")
        assert await kube.get(deployment) is None, "the operator's Deployment is still there"
        assert not cluster.simulated.processes(NAMESPACE, identity.CONTAINER)

    await eventually(operator_gone, 120, what="OLM to remove the operator")
    cluster.mark("operator removed through OLM")

    # The operand keeps running without the operator: same objects, and it still syncs.
    kept = await take_snapshot(kube, OPERAND_NAMESPACE)
    assert {key: uid for key, (uid, _) in kept.objects.items()} == {
        key: uid for key, (uid, _) in operand.objects.items()}
    await kube.merge_patch(STORE, {"spec": {"provider": {"fake": {"data": [
        {"key": "k", "value": "without-the-operator"}]}}}}, field_manager=FIELD_MANAGER)
    await eventually(lambda: synced_value(kube, "without-the-operator"), 30,
                     what="the operand to keep syncing")
    print(f"\n  checked: after the OLM uninstall the {len(kept.objects)} operand objects are "
          "unchanged and the operand still syncs")

    # The documented removal: the ESC goes (nothing manages the operand), then the command.
    await kube.delete(ESC_PATH)
    result = await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "manager", "uninstall", "--operand", "--yes",
                         f"--kubeconfig={cluster.simulated.kubeconfig}"],
        cwd=REPO_ROOT, capture_output=True, text=True, check=False, timeout=180)
    assert result.returncode == 0, result.stdout + result.stderr

    async def operand_gone() -> None:
        left = await take_snapshot(kube, OPERAND_NAMESPACE)
        # The Namespace stays: it holds the user's objects, which are never deleted.
        assert list(left.objects) == [("Namespace", "", OPERAND_NAMESPACE)], sorted(left.objects)

    await eventually(operand_gone, 60, what="the operand to be removed")
    await synced_value(kube, "without-the-operator")
    cluster.mark("operand removed by `manager uninstall --operand --yes`")
    print(f"  checked: `manager uninstall --operand --yes` removed the {len(operand.objects) - 1}"
          f" operand objects, and kept the namespace with the user's objects\n"
          f"{cluster.timeline()}")
