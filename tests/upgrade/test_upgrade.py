"""Upgrade from the previous release of this operator to the current code, in place.

The previous release comes from git (`hack/upgrade-test.sh previous`: the newest tag `v*`
not on HEAD, or hack/releases.txt) and is checked out into a temporary worktree outside the
repository. With it running, the test installs and configures the stack (an
ExternalSecretsConfig with settings for every component, bitwarden included, and labels in
the ExternalSecretsManager), next to a user's SecretStore, ExternalSecret and Secrets. Then
the previous release stops and the current code starts, as a Deployment with the
`Recreate` strategy replaces its pod. Afterwards:

- no operand object was deleted or re-created (every uid is unchanged), except an object the
  current code no longer renders (then the test says which);
- no Deployment rolled unless the pod template the current code renders differs from the
  previous release's (then the test says which and where);
- the ExternalSecretsConfig is Ready=True for its current generation, as written by the
  current code: a pass over an unchanged cluster writes nothing, by design, so to see the
  first pass of the new release end the test removes the status while no operator runs;
- the user's objects are untouched, and the secret the real external-secrets controller
  synced for them is never deleted or emptied across the upgrade (a watch alive from before
  the upgrade until after it: tests/samplers.py), and still follows its source afterwards;
- each release stopped cleanly (exit code 0 on SIGTERM), with no crashed pass and no
  traceback in its log.

Simulated cluster (default): both releases run out of cluster as processes (`python -m
manager run`) from their source trees, with the environment their Deployment manifests set;
the operand runs for real, bitwarden-sdk-server included (with the real key pair of the
user's TLS Secret), so both releases report Ready=True there as on a real cluster.
USE_EXISTING_CLUSTER=1 (`hack/upgrade-test.sh kind`): the previous release is already
deployed; the test replaces it with UPGRADE_CURRENT_IMAGE through the same script.

Run with `-s` (or `-rP`) to see the checks it performed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import pytest
import pytest_asyncio

from devcluster.images import release_venv
from manager.client.kube import Kube, install_crds
from manager.paths import REPO_ROOT
from manager.runtime.operator import load_crds
from tests.conftest import Cluster
from tests.e2e.operator_process import OperatorProcess, log_problems
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret
from tests.samplers import SyncSampler
from tests.upgrade.snapshot import (
    Renderings,
    Snapshot,
    judge,
    release_environment,
    render_release,
    take_snapshot,
)
from tests.waiting import eventually

SCRIPT = REPO_ROOT / "hack" / "upgrade-test.sh"
USE_EXISTING_CLUSTER = os.environ.get("USE_EXISTING_CLUSTER") == "1"
NAMESPACE = "eso-upgrade"
ESC_PATH = "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs/cluster"
ESM_PATH = "/apis/operator.openshift.io/v1alpha1/externalsecretsmanagers/cluster"
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
MANAGED = "app.kubernetes.io/managed-by=external-secrets-operator"
FIELD_MANAGER = "upgrade-test"
OPERATOR_NAMESPACE = "external-secrets-operator"
OPERATOR_DEPLOYMENT = "external-secrets-operator-controller-manager"
# Real pods pull images on a real cluster.
READY_TIMEOUT = 300.0 if USE_EXISTING_CLUSTER else 120.0

ESC_SPEC: dict[str, Any] = {
    "controllerConfig": {"namespace": NAMESPACE, "labels": {"team": "platform"}},
    "appConfig": {
        "logLevel": 3,
        "webhookConfig": {"certificateCheckInterval": "10m"},
        "resources": {"requests": {"cpu": "10m", "memory": "96Mi"},
                      "limits": {"cpu": "500m", "memory": "512Mi"}},
        "bitwardenSecretManagerProvider": {"enabled": "true",
                                           "secretRef": {"name": BITWARDEN_TLS_SECRET}},
    },
}
ESM_SPEC: dict[str, Any] = {"globalConfig": {"labels": {"example.com/environment": "upgrade"}}}

_T = TypeVar("_T")


# --- the script and the releases -------------------------------------------------------------


def script(*args: str, cluster: Cluster | None = None) -> str:
    environment = dict(os.environ)
    if cluster is not None:
        environment.update(KUBECTL=cluster.kubectl_path, KUBECONFIG=str(cluster.kubeconfig))
    result = subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True,
                            check=False, env=environment, timeout=900)
    if result.returncode != 0:
        pytest.fail(f"hack/upgrade-test.sh {' '.join(args)} failed:\n{result.stderr}",
                    pytrace=False)
    return result.stdout.strip()


class LocalReleases:
    """Both releases as operator processes, one after the other."""

    def __init__(self, cluster: Cluster, previous: Path, workdir: Path):
        self.cluster = cluster
        self.previous = previous
        self.workdir = workdir
        self.process: OperatorProcess | None = None
        self.problems: list[str] = []
        """Of the releases stopped: an exit code other than 0, crashed passes, tracebacks."""

    async def start_previous(self) -> None:
        script("install-crds", str(self.previous), cluster=self.cluster)
        await self._start(self.previous, "previous")

    async def stop_previous(self) -> None:
        await self.stop()

    async def start_current(self) -> None:
        script("install-crds", str(REPO_ROOT), cluster=self.cluster)
        await self._start(REPO_ROOT, "current")

    async def _start(self, source: Path, name: str) -> None:
        process = OperatorProcess(source, self.cluster.kubeconfig,
                                  self.workdir / f"operator-{name}.log",
                                  release_environment(source), name=f"the {name} release",
                                  python=str(release_venv(source) / "bin" / "python"))
        self.process = await asyncio.to_thread(process.start)

    async def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            self.problems += await asyncio.to_thread(process.stop_checked)

    def logs(self) -> str:
        return "\n".join(f"--- {path.name}\n{path.read_text(errors='replace')[-6000:]}"
                         for path in sorted(self.workdir.glob("operator-*.log")))


class DeployedReleases:
    """The operator Deployment: the previous image is running; the current one replaces it."""

    def __init__(self, cluster: Cluster):
        self.cluster = cluster
        self.problems: list[str] = []
        """Crashed passes and tracebacks in each release's pod log, read before it stops
        (no exit code: the pods are the Deployment's)."""
        self._read: set[str] = set()
        self.image = os.environ.get("UPGRADE_CURRENT_IMAGE", "")
        if not self.image:
            pytest.fail("USE_EXISTING_CLUSTER=1 needs UPGRADE_CURRENT_IMAGE (and the previous "
                        "release deployed): run it through `hack/upgrade-test.sh kind`",
                        pytrace=False)

    async def start_previous(self) -> None:
        await asyncio.to_thread(self.cluster.kubectl, "-n", OPERATOR_NAMESPACE, "rollout",
                                "status", f"deployment/{OPERATOR_DEPLOYMENT}", "--timeout=300s")

    async def stop_previous(self) -> None:
        """What the Recreate strategy does first: no operator pod is left running."""
        await self._check_log("the previous release")
        await asyncio.to_thread(self.cluster.kubectl, "-n", OPERATOR_NAMESPACE, "scale",
                                f"deployment/{OPERATOR_DEPLOYMENT}", "--replicas=0")
        deadline = time.monotonic() + 180
        while (await asyncio.to_thread(
                self.cluster.kubectl, "-n", OPERATOR_NAMESPACE, "get", "pods", "-o", "name",
                "-l", "app=external-secrets-operator")).stdout.strip():
            assert time.monotonic() < deadline, "the previous operator pod did not stop"
            await asyncio.sleep(1)

    async def start_current(self) -> None:
        await asyncio.to_thread(script, "deploy", str(REPO_ROOT), self.image,
                                cluster=self.cluster)

    async def stop(self) -> None:
        await self._check_log("the current release")

    async def _check_log(self, release: str) -> None:
        """The problems in the log of the operator pod running `release` (read once)."""
        if release in self._read:
            return
        self._read.add(release)
        result = await asyncio.to_thread(self.cluster.kubectl, "-n", OPERATOR_NAMESPACE, "logs",
                                         f"deployment/{OPERATOR_DEPLOYMENT}", check=False)
        self.problems += [f"{release}: {problem}" for problem in log_problems(result.stdout)]

    def logs(self) -> str:
        result = self.cluster.kubectl("-n", OPERATOR_NAMESPACE, "logs",
                                      f"deployment/{OPERATOR_DEPLOYMENT}", "--tail=200",
                                      check=False)
        return result.stdout + result.stderr


# --- waiting ---------------------------------------------------------------------------------


async def ready_for_current_generation(kube: Kube) -> dict[str, Any]:
    """Ready=True for the ESC's generation (bitwarden-sdk-server available too)."""
    async def check() -> dict[str, Any]:
        esc = await kube.request("GET", ESC_PATH)
        conditions = {c["type"]: c for c in (esc.get("status") or {}).get("conditions") or []}
        ready = conditions.get("Ready")
        assert ready is not None, f"no Ready condition: {esc.get('status')}"
        assert ready.get("observedGeneration") == esc["metadata"]["generation"], ready
        assert ready["status"] == "True", ready
        return esc

    return await eventually(check, READY_TIMEOUT,
                            what="ExternalSecretsConfig Ready=True for its generation")


async def settled(kube: Kube, quiet: float = 3.0, timeout: float = 60.0) -> Snapshot:
    """A snapshot that no longer changes: the operator has finished its passes."""
    deadline = time.monotonic() + timeout
    last = await take_snapshot(kube, NAMESPACE)
    while True:
        await asyncio.sleep(quiet)
        current = await take_snapshot(kube, NAMESPACE)
        if current.versions() == last.versions():
            return current
        assert time.monotonic() < deadline, "the operand kept changing"
        last = current


# --- the user's objects ----------------------------------------------------------------------


def user_objects() -> list[tuple[str, dict[str, Any]]]:
    base = f"/namespaces/{NAMESPACE}"
    return [
        (f"/api/v1{base}/secrets",  # a real key pair: bitwarden-sdk-server serves it
         {**bitwarden_tls_secret(NAMESPACE, string_data=True), "type": "kubernetes.io/tls"}),
        (f"/api/v1{base}/secrets",
         {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "team-credentials"},
          "stringData": {"token": "not-for-the-operator"}}),
        (f"/apis/external-secrets.io/v1{base}/secretstores",
         {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
          "metadata": {"name": "team-store"},
          "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}}}),
        (f"/apis/external-secrets.io/v1{base}/externalsecrets",
         {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
          "metadata": {"name": USER_EXTERNAL_SECRET},
          "spec": {"secretStoreRef": {"name": "team-store", "kind": "SecretStore"},
                   "refreshInterval": "2s", "target": {"name": SYNCED},
                   "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}}),
    ]


SYNCED = "team-synced"
USER_EXTERNAL_SECRET = "team-secret"  # writes SYNCED every 2 s
SYNCED_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/{SYNCED}"


def synced_sampler(kube: Kube, namespace: str = NAMESPACE) -> SyncSampler:
    """The user's synced Secret, watched: never to be deleted or emptied across the upgrade."""
    return SyncSampler(kube, namespace, SYNCED, "k")


async def synced_value(kube: Kube, expected: str) -> None:
    secret = await kube.request("GET", SYNCED_PATH)
    assert base64.b64decode((secret.get("data") or {}).get("k", "")).decode() == expected


async def create_user_objects(kube: Kube) -> dict[str, dict[str, Any]]:
    """The namespace and the user's objects, created before any webhook configuration of the
    operand exists (here, nothing would serve it); path -> object as created."""
    if not USE_EXISTING_CLUSTER:  # left behind by other suites of this test session
        for item in (await kube.list(WEBHOOKS, label_selector=MANAGED)).get("items") or []:
            await kube.delete(f"{WEBHOOKS}/{item['metadata']['name']}")
    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}",
                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                     field_manager=FIELD_MANAGER)
    created = {}
    for collection, body in user_objects():
        path = f"{collection}/{body['metadata']['name']}"
        create = partial(kube.create, collection, body, field_manager=FIELD_MANAGER)
        # Retried until the API server's webhook cache has caught up with the deletions.
        created[path] = await eventually(create, 30, what=f"creating {path}")
    return created


async def assert_user_objects_untouched(kube: Kube, created: dict[str, dict[str, Any]]) -> None:
    for path, original in created.items():
        live = await kube.get(path)
        assert live is not None, f"user object {path} was deleted"
        assert live["metadata"]["uid"] == original["metadata"]["uid"], f"{path} re-created"
        assert live.get("spec") == original.get("spec"), f"{path} changed"
        assert live.get("data") == original.get("data"), f"{path} changed"


# --- the test --------------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def previous_release(cluster: Cluster) -> AsyncIterator[tuple[str, Path]]:
    """(release, source tree) of the previous release; a worktree removed afterwards."""
    if USE_EXISTING_CLUSTER:
        source = os.environ.get("UPGRADE_PREVIOUS_SOURCE")
        if not source:
            pytest.fail("USE_EXISTING_CLUSTER=1 needs UPGRADE_PREVIOUS_SOURCE: run it through "
                        "`hack/upgrade-test.sh kind`", pytrace=False)
        yield os.environ.get("UPGRADE_PREVIOUS_RELEASE", "the previous release"), Path(source)
        return
    workdir = Path(tempfile.mkdtemp(prefix="eso-upgrade-"))
    worktree = workdir / "previous"
    try:
        release = await asyncio.to_thread(script, "checkout", str(worktree))
        yield release.split()[0], worktree
    finally:
        if worktree.exists():
            await asyncio.to_thread(script, "remove", str(worktree))
        with contextlib.suppress(OSError):
            workdir.rmdir()


async def test_upgrade_keeps_every_object_and_rolls_only_changed_templates(
        cluster: Cluster, admin: Kube, previous_release: tuple[str, Path],
        tmp_path: Path) -> None:
    release, previous_source = previous_release
    print(f"\nupgrade from {release} ({previous_source}) to the current code ({REPO_ROOT})")
    assert await admin.get(ESC_PATH) is None, (
        "ExternalSecretsConfig/cluster exists; the upgrade test installs its own")
    releases = DeployedReleases(cluster) if USE_EXISTING_CLUSTER else LocalReleases(
        cluster, previous_source, tmp_path)
    if not USE_EXISTING_CLUSTER:
        fetched = await asyncio.to_thread(
            subprocess.run, ["bash", str(REPO_ROOT / "hack" / "fetch-crds.sh")],
            capture_output=True, text=True, check=True, timeout=900)
        crd_dir = Path(fetched.stdout.strip().splitlines()[-1])
        await install_crds(admin, load_crds(crd_dir / "external-secrets"),
                           field_manager=FIELD_MANAGER)
    created = await create_user_objects(admin)
    original_esm: dict[str, Any] | None = None
    sampler = synced_sampler(admin)
    try:
        # The previous release installs and configures the stack.
        await releases.start_previous()
        esm = await eventually(lambda: admin.request("GET", ESM_PATH), 60, what="the ESM")
        original_esm = esm.get("spec") or {}
        await admin.merge_patch(ESM_PATH, {"spec": ESM_SPEC}, field_manager=FIELD_MANAGER)
        await admin.create(ESC_PATH.rsplit("/", 1)[0], {
            "apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
            "metadata": {"name": "cluster"}, "spec": ESC_SPEC}, field_manager=FIELD_MANAGER)
        await ready_for_current_generation(admin)

        async def esm_labels_landed() -> None:
            deployment = await admin.request(
                "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/external-secrets")
            labels = deployment["spec"]["template"]["metadata"]["labels"]
            assert labels.get("example.com/environment") == "upgrade", labels

        await eventually(esm_labels_landed, 120, what="the ESM labels on the pod templates")
        # The operand syncs the user's secret; it must survive the upgrade untouched.
        await eventually(lambda: synced_value(admin, "v"), 120, what="the user's secret to sync")
        await sampler.start()
        before = await settled(admin)
        esc_before = await admin.request("GET", ESC_PATH)
        assert len(before.deployments) == 4, sorted(before.deployments)

        # The upgrade: the previous release stops, its status goes, the current code starts.
        await releases.stop_previous()
        await admin.merge_patch(f"{ESC_PATH}/status", {"status": None},
                                field_manager=FIELD_MANAGER)
        await releases.start_current()
        esc_after = await ready_for_current_generation(admin)
        after = await settled(admin)

        # The verdict.
        assert esc_after["metadata"]["uid"] == esc_before["metadata"]["uid"]
        assert esc_after["metadata"]["generation"] == esc_before["metadata"]["generation"]
        degraded = [c for c in esc_after["status"]["conditions"] if c["type"] == "Degraded"]
        assert [c["status"] for c in degraded] == ["False"], esc_after["status"]
        previous = render_release(previous_source, ESC_SPEC, ESM_SPEC,
                                  release_environment(previous_source))
        current = render_release(REPO_ROOT, ESC_SPEC, ESM_SPEC, release_environment(REPO_ROOT))
        verdict = judge(before, after, Renderings(release, previous, current))
        for note in verdict.notes:
            print(f"  checked: {note}")
        await assert_user_objects_untouched(admin, created)
        print(f"  checked: {len(created)} user objects untouched (uid, spec, data)")
        # The sync still works after the upgrade: the store's value changes, so does the
        # Secret; and across the whole upgrade it was never deleted or emptied.
        store = f"/apis/external-secrets.io/v1/namespaces/{NAMESPACE}/secretstores/team-store"
        await admin.merge_patch(store, {"spec": {"provider": {"fake": {"data": [
            {"key": "k", "value": "after-the-upgrade"}]}}}}, field_manager=FIELD_MANAGER)
        await eventually(lambda: synced_value(admin, "after-the-upgrade"), 30,
                         what="the synced Secret to follow its store")
        await sampler.stop(expect_value="after-the-upgrade")
        assert not sampler.harm, sampler.harm
        print(f"  checked: the synced Secret was never deleted or emptied (watched throughout: "
              f"{sampler.summary()}) and follows its store after the upgrade")
        print("  checked: ExternalSecretsConfig Ready=True (bitwarden-sdk-server too) for "
              f"generation {esc_after['metadata']['generation']}, written by the current code")
        assert not verdict.problems, "\n".join(verdict.problems) + "\n" + releases.logs()
        await releases.stop()
        assert not releases.problems, "\n".join(releases.problems)
        stopped = "" if USE_EXISTING_CLUSTER else "both releases stopped with exit code 0, "
        print(f"  checked: {stopped}no pass crashed and no traceback in either release's log")
    except BaseException:
        print(releases.logs(), file=sys.stderr)
        raise
    finally:
        await sampler.discard()
        await releases.stop()
        await _clean_up(cluster, admin, original_esm)


async def _clean_up(cluster: Cluster, admin: Kube, original_esm: dict[str, Any] | None) -> None:
    """On the local control plane, leave nothing that later suites of the session would trip
    over: no ESC, the ESM's spec as it was, no operand (its webhooks have no server here)."""
    if USE_EXISTING_CLUSTER:
        return
    await admin.delete(ESC_PATH)
    if original_esm is not None:
        await admin.request("PATCH", ESM_PATH, body=[
            {"op": "replace", "path": "/spec", "value": original_esm}],
            content_type="application/json-patch+json")
    await asyncio.to_thread(
        subprocess.run, [sys.executable, "-m", "manager", "uninstall", "--operand", "--yes",
                         f"--namespace={NAMESPACE}", f"--kubeconfig={cluster.kubeconfig}"],
        cwd=REPO_ROOT, capture_output=True, check=False, timeout=180)
