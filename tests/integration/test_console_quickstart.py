"""The operator's ConsoleQuickStart (manager/sidetasks/console_quickstart.py) through the real
API server: nothing while the console's API is not served; once OpenShift's ConsoleQuickStart
CRD (pinned openshift/api) is installed, the object is created, accepted by the CRD's schema
field for field, owned by the ExternalSecretsConfig CRD, and a second pass writes nothing; an
object of that name that someone else made is left alone and reported. The side task runs
as the operator's ServiceAccount with the shipped RBAC (its one rule, by name)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio
from prometheus_client import REGISTRY

from manager.apply.discovery import Discovery
from manager.client.kube import CRD_COLLECTION, Kube, install_crds
from manager.olm import quickstart
from manager.sidetasks.console_quickstart import ESC_CRD, ConsoleQuickStart, desired
from tests.conftest import Cluster
from tests.console_crds import quickstart_crd
from tests.integration.conftest import StartOperator, eventually
from tests.integration.test_controller_rbac import service_account_kubeconfig

PATH = f"/apis/console.openshift.io/v1/consolequickstarts/{quickstart.NAME}"


def applies() -> float:
    """Server-side applies of ConsoleQuickStarts sent by this process."""
    return REGISTRY.get_sample_value("eso_operator_api_requests_total", {
        "verb": "apply", "resource": "consolequickstarts"}) or 0.0


@pytest_asyncio.fixture(loop_scope="session")
async def as_operator(kube: Kube, cluster: Cluster, tmp_path: Path) -> AsyncIterator[Kube]:
    """A client authenticated as the operator's ServiceAccount; afterwards the console's CRD
    (and so the object) is gone again."""
    client = Kube.connect(await service_account_kubeconfig(kube, cluster, tmp_path))
    yield client
    await client.close()
    await kube.delete(f"{CRD_COLLECTION}/{quickstart.CRD}")

    async def gone() -> None:
        assert await kube.get(f"{CRD_COLLECTION}/{quickstart.CRD}") is None

    await eventually(gone, timeout=30)


async def test_the_quickstart_appears_with_the_consoles_api(kube: Kube, as_operator: Kube,
                                                            operator_crds: None) -> None:
    # Plain Kubernetes: nothing to do, and no error.
    assert await ConsoleQuickStart(as_operator, Discovery(as_operator)).reconcile() is None
    assert await kube.get(f"{CRD_COLLECTION}/{quickstart.CRD}") is None

    await install_crds(kube, [quickstart_crd()], field_manager="console-operator")
    task = ConsoleQuickStart(as_operator, Discovery(as_operator))
    before = applies()
    assert await task.reconcile() is None
    assert applies() == before + 1
    live = await kube.request("GET", PATH)
    # The API server kept every field: none unknown to the schema, none refused.
    owner = await kube.request("GET", f"{CRD_COLLECTION}/{ESC_CRD}")
    assert live["spec"] == desired(owner["metadata"]["uid"])["spec"]
    [reference] = live["metadata"]["ownerReferences"]
    assert (reference["kind"], reference["name"], reference["uid"]) == (
        "CustomResourceDefinition", ESC_CRD, owner["metadata"]["uid"])
    assert "app.kubernetes.io/managed-by" not in live["metadata"]["labels"]  # not the operand's

    # Steady: read, nothing written.
    assert await task.reconcile() is None
    assert applies() == before + 1

    # Drift (someone edits the tour) is written back.
    await kube.merge_patch(PATH, {"spec": {"durationMinutes": 99}}, field_manager="someone")
    assert await task.reconcile() is None
    assert (await kube.request("GET", PATH))["spec"]["durationMinutes"] == \
        desired(None)["spec"]["durationMinutes"]

    # Someone else's object of that name: left alone, and said.
    await kube.delete(PATH)
    theirs = {**desired(None), "metadata": {"name": quickstart.NAME}}
    theirs["spec"] = {**theirs["spec"], "displayName": "theirs"}
    await kube.apply(PATH, theirs, field_manager="someone")
    version = (await kube.request("GET", PATH))["metadata"]["resourceVersion"]
    note = await task.reconcile()
    assert note is not None
    assert "managed by field managers someone" in note
    live = await kube.request("GET", PATH)
    assert live["metadata"]["resourceVersion"] == version
    assert live["spec"]["displayName"] == "theirs"


@pytest_asyncio.fixture(loop_scope="session")
async def quickstart_crd_removed(kube: Kube) -> AsyncIterator[None]:
    yield
    await kube.delete(f"{CRD_COLLECTION}/{quickstart.CRD}")


async def test_the_crd_arrival_applies_the_quickstart(kube: Kube, start_operator: StartOperator,
                                                      quickstart_crd_removed: None) -> None:
    operator = await start_operator()
    await operator.wait_idle()
    assert await kube.get(f"{CRD_COLLECTION}/{quickstart.CRD}") is None
    before = operator.passes
    await install_crds(kube, [quickstart_crd()], field_manager="console-operator")

    async def applied() -> None:
        assert await kube.get(PATH) is not None

    await eventually(applied, timeout=20)
    await operator.wait_woken(before, "CustomResourceDefinition consolequickstarts")
