"""Stores on a provider that external-secrets v2.9.0 dropped hold the upgrade to this release.

Release 0.2.0 ships external-secrets v1.3.2, whose SecretStores may use `alibaba` or
`device42`; this release ships v2.9.0, which has neither (manager/steps/removed_providers.py
reads both trees). The check that keeps such a store from breaking silently runs in the
release being upgraded *from*: 0.2.0 holds its OperatorCondition's `Upgradeable` False while a
store uses one, and OLM then keeps this release Pending (OLM's side of the gate:
tests/olm/test_upgrade_gate.py). So this test runs the previous release, as the upgrade test
does, with the previous release's CRDs, and deletes the stores as docs/upgrade.md tells the
administrator to; the gate opens only when the last one is gone. The check is off in this
release (its operand is v2.9.0): `applies()`, tests/unit/steps/test_removed_providers.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from devcluster.images import release_venv
from manager.client.kube import ApiError, Kube, install_crds
from manager.paths import REPO_ROOT
from manager.runtime.operator import load_crds
from tests.conftest import Cluster
from tests.e2e.operator_process import OperatorProcess
from tests.integration.test_upgrade_gate import operator_condition_api  # noqa: F401 (a fixture)
from tests.upgrade.snapshot import release_environment
from tests.upgrade.test_upgrade import previous_release, script  # noqa: F401 (a fixture)
from tests.waiting import eventually

NAMESPACE = "eso-upgrade-gate"  # where the operator "runs" (POD_NAMESPACE), as under OLM
APPS = "eso-upgrade-stores"
NAME = "external-secrets-operator.v0.2.0"
CONDITION = f"/apis/operators.coreos.com/v2/namespaces/{NAMESPACE}/operatorconditions/{NAME}"
STORES = "/apis/external-secrets.io/v1"
ALIBABA_PATH = f"{STORES}/namespaces/{APPS}/secretstores/alibaba-store"
DEVICE42_PATH = f"{STORES}/clustersecretstores/device42-store"
ALIBABA_NAMED = f"SecretStore {APPS}/alibaba-store (alibaba)"
DEVICE42_NAMED = "ClusterSecretStore device42-store (device42)"
FIELD_MANAGER = "upgrade-test"


def secret_key(name: str, key: str) -> dict[str, str]:
    return {"name": name, "key": key, "namespace": APPS}


ALIBABA = {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
           "metadata": {"name": "alibaba-store", "namespace": APPS},
           "spec": {"provider": {"alibaba": {"regionID": "cn-hangzhou", "auth": {"secretRef": {
               "accessKeyIDSecretRef": secret_key("alibaba", "id"),
               "accessKeySecretSecretRef": secret_key("alibaba", "secret")}}}}}}
DEVICE42 = {"apiVersion": "external-secrets.io/v1", "kind": "ClusterSecretStore",
            "metadata": {"name": "device42-store"},
            "spec": {"provider": {"device42": {"host": "device42.example", "auth": {
                "secretRef": {"credentials": secret_key("device42", "credentials")}}}}}}


async def namespace(kube: Kube, name: str) -> None:
    await kube.apply(f"/api/v1/namespaces/{name}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        field_manager=FIELD_MANAGER)


async def wait_gate(kube: Kube, status: str, reason: str) -> dict[str, Any]:
    async def check() -> dict[str, Any]:
        spec = (await kube.request("GET", CONDITION))["spec"]
        entries = [c for c in spec.get("conditions") or [] if c["type"] == "Upgradeable"]
        assert len(entries) == 1, spec
        entry = entries[0]
        assert (entry["status"], entry["reason"]) == (status, reason), entry
        return dict(entry)

    return await eventually(check, timeout=60, what=f"Upgradeable {status} ({reason})")


async def deleted(kube: Kube, path: str) -> None:
    try:
        await kube.delete(path)
    except ApiError as error:
        if error.status != 404:
            raise


def operand_crds(source: Path) -> list[dict[str, Any]]:
    """The external-secrets CRDs of a release (its own hack/fetch-crds.sh and pins): the
    operator installs them with the operand; the stores here come before any operand."""
    fetched = subprocess.run(["bash", str(source / "hack" / "fetch-crds.sh")],
                             capture_output=True, text=True, check=True, timeout=900)
    return load_crds(Path(fetched.stdout.strip()) / "external-secrets")


@pytest_asyncio.fixture(loop_scope="session")
async def previous_operator(cluster: Cluster, kube: Kube,
                            previous_release: tuple[str, Path],  # noqa: F811
                            operator_condition_api: None,  # noqa: F811
                            ) -> AsyncIterator[OperatorProcess]:
    """The previous release running as OLM would run it (its CRDs, its OperatorCondition);
    afterwards the stores are gone and this release's CRDs are back."""
    release, source = previous_release
    assert release == "v0.2.0", f"this test is about the upgrade from 0.2.0, not {release}"
    await asyncio.to_thread(script, "install-crds", str(source), cluster=cluster)
    await install_crds(kube, await asyncio.to_thread(operand_crds, source),
                       field_manager=FIELD_MANAGER)
    for name in (NAMESPACE, APPS):
        await namespace(kube, name)
    await kube.apply(CONDITION, {  # as OLM creates it: no conditions
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": NAME, "namespace": NAMESPACE}, "spec": {}},
        field_manager=FIELD_MANAGER)
    workdir = Path(tempfile.mkdtemp(prefix="eso-removed-"))
    environment = {**release_environment(source), "OPERATOR_CONDITION_NAME": NAME,
                   "POD_NAMESPACE": NAMESPACE}
    process = OperatorProcess(source, cluster.kubeconfig, workdir / "operator.log",
                              environment, name="the previous release",
                              python=str(release_venv(source) / "bin" / "python"))
    await asyncio.to_thread(process.start)
    try:
        yield process
    finally:
        problems = await asyncio.to_thread(process.stop_checked)
        for path in (ALIBABA_PATH, DEVICE42_PATH, CONDITION):
            await deleted(kube, path)
        await asyncio.to_thread(script, "install-crds", str(REPO_ROOT), cluster=cluster)
        await install_crds(kube, await asyncio.to_thread(operand_crds, REPO_ROOT),
                           field_manager=FIELD_MANAGER)
    assert problems == [], problems


async def test_the_previous_release_holds_the_upgrade_until_the_stores_are_gone(
        kube: Kube, previous_operator: OperatorProcess) -> None:
    await wait_gate(kube, "True", "AsExpected")
    await kube.create(f"{STORES}/namespaces/{APPS}/secretstores", ALIBABA,
                      field_manager=FIELD_MANAGER)
    await kube.create(f"{STORES}/clustersecretstores", DEVICE42, field_manager=FIELD_MANAGER)

    held = await wait_gate(kube, "False", "RemovedProviderInUse")
    message = held["message"]
    assert message.startswith(
        "2 stores use providers that external-secrets v2.9.0, the operand of the next release "
        f"(0.3.0), no longer has: {DEVICE42_NAMED}, {ALIBABA_NAMED}; "), message
    assert message.endswith("move it to a supported provider or delete it; then upgrade")

    # What docs/upgrade.md tells the administrator: move or delete each; one left still holds.
    await kube.delete(ALIBABA_PATH)

    async def one_left() -> None:
        entry = await wait_gate(kube, "False", "RemovedProviderInUse")
        assert DEVICE42_NAMED in entry["message"]
        assert "alibaba-store" not in entry["message"], entry

    await eventually(one_left, timeout=60, what="only the device42 store named")
    await kube.delete(DEVICE42_PATH)
    await wait_gate(kube, "True", "AsExpected")
