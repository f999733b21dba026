"""The operator installed, upgraded and removed by the real OLM, on a simulated cluster.

Each module gets a fresh simulated cluster started with OLM (devcluster/olm.py): olm-operator
and catalog-operator built from OLM's Go module, a file-based catalog served by `opm serve`
(devcluster/catalog.py), and the pod runner running every pod OLM and the operator create:
the bundle's unpack Job (init containers, then `opm alpha bundle extract`), the operator's
Deployment (`python -m manager run` from the release's own source tree, with the pod's
arguments, environment and ServiceAccount token: only the permissions its CSV grants; or,
for a release given `pull_operator_image`, the real image from a registry, with podman:
test_install_image.py) and the operand. The cluster is fresh so that nothing but the
bundle provides the CRDs and the RBAC: whatever the bundle lacks fails these tests.

A module that sets `OPENSHIFT = True` gets its cluster in the simulated cluster's OpenShift
mode: OpenShift's config API (APIServer, Proxy and their `cluster` objects) is served before
OLM starts, because olm-operator looks for it once, at its start, and only then reads the
cluster proxy (`proxies.config.openshift.io/cluster`, its status) into the Deployments of the
CSVs. olm-operator applies a change of that proxy when it next checks each CSV, at its
wake-up interval (`--interval`, 5 min by default, with 20 % jitter); such a cluster runs it
with OPENSHIFT_OLM_INTERVAL, so a test sees the change within seconds.

The operator pods' logs are checked as every suite checks its operators': after each test,
a crashed pass or a traceback logged by any release's operator during it fails the test
(`new_log_problems`, the hook `pytest_runtest_call`); the tests also check the log of the
release they install for forbidden requests (the pod runs with exactly its CSV's grants).

On an existing cluster (USE_EXISTING_CLUSTER=1) these tests are skipped: they need images
the simulated cluster maps to local source trees (a real cluster would need the bundle and
operator images in a registry; docs/olm.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from devcluster import catalog, controlplane, olm
from devcluster import images as image_map
from devcluster.cluster import SimulatedCluster
from manager.client.kube import Kube
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.disruption.figures import Watched
from tests.e2e.operator_process import (
    LogChecker,
    pytest_runtest_call,  # noqa: F401 (a hook: the operator's log after each test)
)
from tests.integration.conftest import EscHandle
from tests.upgrade import test_upgrade as scenario
from tests.upgrade.snapshot import take_snapshot
from tests.upgrade.test_upgrade import (
    ESC_PATH,
    SYNCED,
    USER_EXTERNAL_SECRET,
    create_user_objects,
    ready_for_current_generation,
    script,
    synced_value,
)
from tests.waiting import eventually

# Away from the session cluster's pod addresses: both may run at once in this namespace.
POD_CIDR = "10.245.0.0/16"
OPENSHIFT_OLM_INTERVAL = "15s"
NAMESPACE = identity.NAMESPACE
OPERATORS = "/apis/operators.coreos.com"
CSVS = f"{OPERATORS}/v1alpha1/namespaces/{NAMESPACE}/clusterserviceversions"
SUBSCRIPTION = (f"{OPERATORS}/v1alpha1/namespaces/{NAMESPACE}/subscriptions/"
                f"{identity.PACKAGE}")
FIELD_MANAGER = "olm-tests"
OPERAND_NAMESPACE = scenario.NAMESPACE
STORE = f"/apis/external-secrets.io/v1/namespaces/{OPERAND_NAMESPACE}/secretstores/team-store"
# The upgrade scenario's settings without bitwarden-sdk-server. It runs here, but the OLM
# scenarios are about the external-secrets Deployments: configure() creates the user's
# objects (bitwarden's TLS Secret among them) only once the ESC is Ready, and
# test_upgrade.py expects every operand Deployment to roll onto a rebuilt external-secrets
# image. bitwarden-sdk-server across an upgrade is tests/upgrade's (the same spec, with it).
ESC_SPEC: dict[str, Any] = {**scenario.ESC_SPEC, "appConfig": {
    key: value for key, value in scenario.ESC_SPEC["appConfig"].items()
    if key != "bitwardenSecretManagerProvider"}}


@dataclass(frozen=True)
class Catalog:
    releases: list[catalog.Release]
    directory: Path


@dataclass
class OlmCluster:
    """A simulated cluster with OLM, and what a test does with it as an administrator."""

    simulated: SimulatedCluster
    kube: Kube
    workdir: Path
    marks: dict[str, float] = field(default_factory=dict)
    user_objects: dict[str, dict[str, Any]] = field(default_factory=dict)
    _releases: dict[Path, catalog.Release] = field(default_factory=dict)
    _environments: dict[Path, Path] = field(default_factory=dict)
    _pulled: dict[Path, str] = field(default_factory=dict)
    _catalogs: int = 0
    _log_checker: LogChecker = field(default_factory=LogChecker)

    def mark(self, event: str, at: float | None = None) -> None:
        """Record when (time.monotonic(), now by default) `event` happened (the timeline the
        tests print)."""
        self.marks[event] = time.monotonic() if at is None else at

    def timeline(self) -> str:
        start = min(self.marks.values())
        return "\n".join(f"  {moment - start:6.1f} s  {event}"
                         for event, moment in sorted(self.marks.items(), key=lambda e: e[1]))

    async def publish(self, *sources: Path) -> list[catalog.Release]:
        """Serve a catalog of the releases in `sources` (oldest first)."""
        built = await self.build_catalog(*sources)
        await self.serve(built)
        return built.releases

    async def build_catalog(self, *sources: Path) -> Catalog:
        """A catalog of the releases in `sources` (oldest first), not served yet (what
        building a catalog image is: no cluster sees it)."""
        releases = [await asyncio.to_thread(self._release, source) for source in sources]
        self._catalogs += 1
        directory = self.workdir / "catalogs" / str(self._catalogs)
        _, opm_bin = olm.binaries()
        await asyncio.to_thread(catalog.write, releases, directory, opm_bin / "opm")
        return Catalog(releases, directory)

    async def serve(self, built: Catalog) -> None:
        """Serve `built` in place of the catalog served so far (a new catalog image)."""
        image_map.add(self.simulated.images_file, catalog.images(built.releases))
        await asyncio.to_thread(olm.publish, self.simulated.api, self.simulated.workdir,
                                built.directory)

    async def serve_image(self, built: Catalog, image: str) -> None:
        """Serve `built` from its catalog image `image` (a reference in a registry): the
        CatalogSource names the image, OLM runs it as a registry pod, and the pod runner runs
        that pod from the image with podman (test_catalog_image.py)."""
        image_map.add(self.simulated.images_file, catalog.images(built.releases))
        await asyncio.to_thread(olm.publish_image, self.simulated.api, self.simulated.workdir,
                                image)

    async def rebuilt(self, version: str, operand_image: str | None = None) -> Path:
        """A release built from the current tree at `version` (devcluster/catalog.py
        `rebuild`): the next release after the current one, where the code does not change."""
        directory = self.workdir / "rebuilt" / version
        await asyncio.to_thread(catalog.rebuild, REPO_ROOT, directory, version, operand_image)
        self._environments[directory] = Path(sys.prefix)  # the current tree's dependencies
        return directory

    def pull_operator_image(self, source: Path, image: str) -> None:
        """The release in `source` ships the real operator image `image` (a reference in a
        registry): its bundle names it, and its pod runs it with podman."""
        self._pulled[source] = image

    async def prepared(self, source: Path) -> catalog.Release:
        """The release of `source` (its bundle directory written), before any catalog."""
        return await asyncio.to_thread(self._release, source)

    def push_bundle_image(self, source: Path, image: str) -> None:
        """The release of `source` ships its bundle as `image` (in a registry, by digest):
        catalogs built from now on name it, and the unpack Job runs it with podman."""
        self._releases[source] = dataclasses.replace(self._releases[source],
                                                     pushed_bundle=image)

    def release(self, source: Path) -> catalog.Release:
        """The release of `source` as a catalog built before holds it."""
        return self._releases[source]

    def _release(self, source: Path) -> catalog.Release:
        if source not in self._releases:
            directory = self.workdir / "bundles" / str(len(self._releases))
            self._releases[source] = catalog.prepare(
                source, directory, self._environments.get(source),
                operator_image=self._pulled.get(source))
        return self._releases[source]

    async def operator_passed(self, release: catalog.Release, timeout: float = 60.0) -> None:
        """Until the operator of `release` has logged a finished pass over the operand."""
        async def passed() -> None:
            # Files and a blocking API read: off the event loop, where the samplers run.
            log = await asyncio.to_thread(self.operator_log, release)
            assert "action=pass" in log, f"{release.name}: no pass yet"

        await eventually(passed, timeout, what=f"a pass of {release.name}'s operator")

    def watched(self) -> Watched:
        """The operand and the user's synced secret, as the disruption samplers watch them."""
        return Watched(self.kube, EscHandle(self.kube), OPERAND_NAMESPACE, OPERAND_NAMESPACE,
                       USER_EXTERNAL_SECRET, SYNCED)

    async def subscribe(self, release: catalog.Release) -> None:
        """What an administrator applies: the namespace, an OperatorGroup for all
        namespaces, a Subscription to the catalog's default channel."""
        annotations = release.annotations
        await self.kube.apply(f"/api/v1/namespaces/{NAMESPACE}", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
            field_manager=FIELD_MANAGER)
        await self.kube.apply(
            f"{OPERATORS}/v1/namespaces/{NAMESPACE}/operatorgroups/{identity.PACKAGE}", {
                "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
                "metadata": {"name": identity.PACKAGE, "namespace": NAMESPACE},
                "spec": {}}, field_manager=FIELD_MANAGER)
        await self.kube.apply(SUBSCRIPTION, {
            "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
            "metadata": {"name": identity.PACKAGE, "namespace": NAMESPACE},
            "spec": {"name": annotations[f"{catalog.ANNOTATIONS}.package.v1"],
                     "channel": annotations[f"{catalog.ANNOTATIONS}.channel.default.v1"],
                     "source": olm.CATALOG_SOURCE, "sourceNamespace": olm.NAMESPACE,
                     "installPlanApproval": "Automatic"}}, field_manager=FIELD_MANAGER)

    async def succeeded(self, release: catalog.Release, timeout: float = 180.0,
                        ) -> dict[str, Any]:
        """Until the Subscription has installed `release` and its CSV is Succeeded."""
        async def check() -> dict[str, Any]:
            subscription = await self.kube.request("GET", SUBSCRIPTION)
            installed = (subscription.get("status") or {}).get("installedCSV")
            assert installed == release.name, subscription.get("status")
            csv = await self.kube.request("GET", f"{CSVS}/{release.name}")
            assert (csv.get("status") or {}).get("phase") == "Succeeded", csv.get("status")
            return csv

        return await eventually(check, timeout, what=f"CSV {release.name} Succeeded")

    async def configure(self) -> None:
        """The administrator's ExternalSecretsConfig, Ready; a user's secret synced by the
        operand (the upgrade scenario's SecretStore and ExternalSecret)."""
        await self.kube.create(ESC_PATH.rsplit("/", 1)[0], {
            "apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
            "metadata": {"name": "cluster"}, "spec": ESC_SPEC}, field_manager=FIELD_MANAGER)
        self.mark("ExternalSecretsConfig created")
        await ready_for_current_generation(self.kube)
        self.mark("ExternalSecretsConfig Ready=True")
        self.user_objects = await create_user_objects(self.kube)
        await eventually(lambda: synced_value(self.kube, "v"), 120,
                         what="the user's secret to sync")
        self.mark("user's secret synced")

    def operator_log(self, release: catalog.Release) -> str:
        """The output of the operator pods that ran `release`'s image."""
        pods = self.simulated.logs(NAMESPACE, identity.CONTAINER)
        return "".join(pods[name] for name in sorted(pods)
                       if self._pod_image(name) in release.operator_images)

    def new_log_problems(self) -> list[str]:
        """What the operator pods of every release logged since the last call that a healthy
        operator never logs (`log_problems`: a crashed pass, a traceback)."""
        pods = self.simulated.logs(NAMESPACE, identity.CONTAINER)
        return self._log_checker.new_problems({f"pod {name}": log for name, log in pods.items()})

    def _pod_image(self, name: str) -> str:
        pod = self.simulated.api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}") or {}
        containers = (pod.get("spec") or {}).get("containers") or [{}]
        return str(containers[0].get("image", ""))


async def uninstall_through_olm(cluster: OlmCluster, release: catalog.Release) -> None:
    """The administrator removes the operator of `release` through OLM (Subscription and
    CSV): the operand keeps running and syncing; then, as documented, the ESC goes and
    `python -m manager uninstall --operand --yes` removes the operand, not the user's
    objects (test_install.py)."""
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
          " operand objects, and kept the namespace with the user's objects")


@pytest.fixture(scope="module")
def previous_release(olm_workdir: Path) -> Iterator[tuple[str, Path]]:
    """(tag, source tree) of the previous release: a git worktree, removed afterwards."""
    worktree = olm_workdir / "previous"
    release = script("checkout", str(worktree))
    yield release.split()[0], worktree
    script("remove", str(worktree))


@pytest.fixture(scope="module")
def olm_workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if os.environ.get("USE_EXISTING_CLUSTER") == "1":
        pytest.skip("OLM's tests run on the simulated cluster only (docs/olm.md: on a real "
                    "cluster, push the images and install from the catalog)")
    return tmp_path_factory.mktemp("olm")


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def olm_cluster(olm_workdir: Path, request: pytest.FixtureRequest,
                      ) -> AsyncIterator[OlmCluster]:
    async for cluster in started_cluster(olm_workdir,
                                         bool(getattr(request.module, "OPENSHIFT", False))):
        yield cluster


async def started_cluster(olm_workdir: Path, openshift: bool = False,
                          olm_images: tuple[str, str] | None = None,
                          ) -> AsyncIterator[OlmCluster]:
    """A fresh cluster with OLM for a module (`olm_images`: SimulatedCluster.olm_images);
    stopped after the module."""
    controlplane.require_loopback_only_network()
    simulated = SimulatedCluster(olm_workdir / "cluster", olm=True, pod_cidr=POD_CIDR,
                                 openshift=openshift, olm_images=olm_images,
                                 olm_interval=OPENSHIFT_OLM_INTERVAL if openshift else None)
    started = time.monotonic()
    await asyncio.to_thread(simulated.start)
    kube = Kube.connect(simulated.kubeconfig)
    cluster = OlmCluster(simulated, kube, olm_workdir, {"cluster start": started})
    cluster.mark("cluster and OLM working")
    try:
        yield cluster
    finally:
        await kube.close()
        await asyncio.to_thread(simulated.stop)
        print(f"\nOLM cluster logs: {simulated.workdir}")
