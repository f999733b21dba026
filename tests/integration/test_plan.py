"""`python -m manager plan`: what applying a spec would do, against the live cluster, through
server-side dry runs; it changes nothing, and exits non-zero on a spec the API server or the
operator would refuse."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from manager.apply import Action, Discovery
from manager.apply.cache import ObjectCache
from manager.client.kube import Kube
from manager.config import OperatorEnvironment
from manager.offline.plan import Plan, PlanRefusedError, make_plan
from manager.paths import REPO_ROOT
from manager.reporting.events import EventRecorder
from manager.runtime.reconciler import PassReport, Reconciler
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESC_API,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    wait_condition,
    wait_installed,
)
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret

BITWARDEN = {"bitwardenSecretManagerProvider": {"enabled": "true",
                                                "secretRef": {"name": BITWARDEN_TLS_SECRET}}}


def plan(cluster: Cluster, tmp_path: Path, spec: dict[str, Any],
         ) -> subprocess.CompletedProcess[str]:
    path = tmp_path / "esc.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "operator.openshift.io/v1alpha1",
                                    "kind": "ExternalSecretsConfig",
                                    "metadata": {"name": "cluster"}, "spec": spec}))
    return subprocess.run(
        [sys.executable, "-m", "manager", "plan", "-f", str(path),
         f"--kubeconfig={cluster.kubeconfig}"],
        cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        capture_output=True, text=True, timeout=120, check=False)


async def versions(kube: Kube, namespace: str) -> dict[str, str]:
    """resourceVersions of the ESC and the operand's Deployments: a plan must not move them."""
    found = {"esc": (await kube.request("GET", f"{ESC_API}/cluster"))["metadata"]
             ["resourceVersion"]}
    listing = await kube.list(f"/apis/apps/v1/namespaces/{namespace}/deployments")
    found.update({item["metadata"]["name"]: item["metadata"]["resourceVersion"]
                  for item in listing["items"]})
    return found


async def test_plan_shows_changes_by_field_and_deletions_and_refuses_bad_specs(
        *, kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects, tmp_path: Path) -> None:
    namespace = SCENARIO_NAMESPACES["plan"]
    base: dict[str, Any] = {"controllerConfig": {"namespace": namespace}}
    operator = await start_operator()
    await esc.create(base)
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    before = await versions(kube, namespace)

    # A label: every object changes, field by field; nothing is written.
    labelled = plan(cluster, tmp_path, {"controllerConfig": {
        "namespace": namespace, "labels": {"team": "platform"}}})
    assert labelled.returncode == 0, labelled.stdout + labelled.stderr
    out = labelled.stdout
    assert "  spec.controllerConfig.labels.team: added 'platform'" in out
    assert f"  change  Deployment {namespace}/external-secrets\n" in out
    assert "            spec.template.metadata.labels.team: added 'platform'" in out
    assert "  delete " not in out
    assert re.search(r"Plan: 0 to create, \d+ to change, 0 to delete\.", out), out
    await operator.wait_idle()
    assert await versions(kube, namespace) == before

    # bitwarden on (its TLS Secret exists: a real key pair, so it serves and the ESC is
    # Ready), then a plan that switches it off: deletions.
    await kube.apply(f"/api/v1/namespaces/{namespace}/secrets/{BITWARDEN_TLS_SECRET}",
                     bitwarden_tls_secret(namespace), field_manager="integration-tests")
    on = plan(cluster, tmp_path, {**base, "appConfig": BITWARDEN})
    assert on.returncode == 0, on.stdout + on.stderr
    assert f"  create  Deployment {namespace}/bitwarden-sdk-server\n" in on.stdout
    await esc.patch_spec({"appConfig": BITWARDEN})
    await wait_installed(esc, namespace)
    await operator.wait_idle()
    off = plan(cluster, tmp_path, {**base, "appConfig": {
        "bitwardenSecretManagerProvider": {"enabled": "false"}}})
    assert off.returncode == 0, off.stdout + off.stderr
    for obj in (f"Deployment {namespace}/bitwarden-sdk-server",
                f"Service {namespace}/bitwarden-sdk-server",
                f"ServiceAccount {namespace}/bitwarden-sdk-server"):
        assert f"  delete  {obj}\n" in off.stdout, off.stdout
    deleted = re.search(r"Plan: 0 to create, \d+ to change, (\d+) to delete\.", off.stdout)
    assert deleted is not None, off.stdout
    assert int(deleted.group(1)) >= 5
    assert await kube.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/"
                          "bitwarden-sdk-server") is not None  # only planned

    # Refused by the API server: the namespace is immutable (and the way out is named).
    moved = plan(cluster, tmp_path, {"controllerConfig": {"namespace": "elsewhere"}})
    assert moved.returncode == 1, moved.stdout
    assert moved.stdout.startswith("refused: the API server refuses ExternalSecretsConfig")
    assert "to move the operand to another namespace" in moved.stdout
    # A missing dependency: exit 1, and the plan says what the pass would still do.
    missing = plan(cluster, tmp_path, {**base, "appConfig": {
        "bitwardenSecretManagerProvider": {"enabled": "true", "secretRef": {"name": "nope"}}}})
    assert missing.returncode == 1, missing.stdout
    assert "The pass would end Degraded (BitwardenSecretNotFound)" in missing.stdout
    assert (f"  wait    Deployment {namespace}/bitwarden-sdk-server\n"
            "            held back until BitwardenSecretNotFound is resolved") in missing.stdout
    # Not a plan at all: the file is not an ExternalSecretsConfig.
    (tmp_path / "other.yaml").write_text("kind: ConfigMap\n")
    wrong = subprocess.run([sys.executable, "-m", "manager", "plan", "-f",
                            str(tmp_path / "other.yaml"), f"--kubeconfig={cluster.kubeconfig}"],
                           cwd=REPO_ROOT, capture_output=True, text=True, check=False,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert wrong.returncode == 2, wrong.stderr
    assert "kind: expected ExternalSecretsConfig" in wrong.stderr


PLANNED_AS = {"create": Action.CREATED, "change": Action.UPDATED, "adopt": Action.ADOPTED,
              "delete": Action.DELETED}


async def test_plan_and_the_pass_decide_alike(*, kube: Kube, esc: EscHandle,
                                             user_objects: UserObjects) -> None:
    """Fed the same cluster, `plan` lists exactly what the next pass writes and deletes, and
    refuses what the pass refuses, for the same reason: both execute one decision
    (manager/steps/pass_decision.py). The pass runs in-process, without watches."""
    namespace = SCENARIO_NAMESPACES["plan-pass"]
    # A real key pair: the passes create bitwarden-sdk-server's Deployment, whose pod runs
    # (nothing here waits for it to be Ready, but it should not crash-loop meanwhile).
    await kube.apply(f"/api/v1/namespaces/{namespace}/secrets/{BITWARDEN_TLS_SECRET}",
                     bitwarden_tls_secret(namespace), field_manager="integration-tests")
    reconciler = Reconciler(kube, Discovery(kube), OperatorEnvironment.from_environ({}),
                            EventRecorder(kube), ObjectCache())

    async def plan_then_pass(spec: dict[str, Any]) -> tuple[Plan | str, PassReport]:
        current = await kube.get(f"{ESC_API}/cluster")
        await (esc.patch_spec(spec) if current else esc.create(spec))
        document = {"apiVersion": "operator.openshift.io/v1alpha1",
                    "kind": "ExternalSecretsConfig", "metadata": {"name": "cluster"},
                    "spec": (await esc.get())["spec"]}
        try:
            planned: Plan | str = await make_plan(kube, document)
        except PlanRefusedError as refusal:
            planned = str(refusal)
        return planned, await reconciler.run_pass()

    def operand_writes(report: PassReport) -> set[tuple[Action, str]]:
        return {(r.action, str(r.ref)) for r in report.writes
                if r.ref.kind != "CustomResourceDefinition"}  # the CRD annotator's

    def steps(planned: Plan | str) -> set[tuple[Action, str]]:
        assert isinstance(planned, Plan), planned
        return {(PLANNED_AS[s.action], str(s.ref)) for s in planned.steps if s.action != "wait"}

    def waits(planned: Plan | str) -> set[str]:
        assert isinstance(planned, Plan), planned
        return {str(s.ref) for s in planned.steps if s.action == "wait"}

    base = {"controllerConfig": {"namespace": namespace}}
    # Install (the Namespace exists and is not the operator's: neither writes it).
    planned, report = await plan_then_pass({**base, "appConfig": BITWARDEN})
    assert len(steps(planned)) > 20, planned
    assert steps(planned) == operand_writes(report)
    assert not any(ref.endswith(f"Namespace {namespace}") for _, ref in steps(planned))
    # Nothing changed: nothing planned, nothing written.
    planned, report = await plan_then_pass({})
    assert steps(planned) == operand_writes(report) == set()
    # bitwarden off and a label: changes and deletions.
    planned, report = await plan_then_pass({
        "controllerConfig": {"namespace": namespace, "labels": {"team": "a"}},
        "appConfig": {"bitwardenSecretManagerProvider": {"enabled": "false"}}})
    deletions = {ref for action, ref in steps(planned) if action is Action.DELETED}
    assert f"Deployment {namespace}/bitwarden-sdk-server" in deletions, planned
    assert steps(planned) == operand_writes(report)
    # An object of a rendered name that someone else created: both refuse, nothing written.
    service = f"/api/v1/namespaces/{namespace}/services/external-secrets-webhook"
    await kube.delete(service)
    await kube.create(service.rpartition("/")[0], {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "external-secrets-webhook", "namespace": namespace},
        "spec": {"ports": [{"port": 443}]}}, field_manager="someone-else")
    planned, report = await plan_then_pass({"controllerConfig": {
        "namespace": namespace, "labels": {"team": "b"}}})
    assert isinstance(planned, str), planned
    assert "ObjectNotOwned" in planned, planned
    assert report.outcome is not None
    assert report.outcome.reason == "ObjectNotOwned"
    assert operand_writes(report) == set()
    await kube.delete(service)
    # A missing dependency: both apply what it does not hold (the re-created Service),
    # hold bitwarden's Deployment, delete nothing, and name the same reason.
    planned, report = await plan_then_pass({"appConfig": {"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": "nope"}}}})
    assert report.outcome is not None
    assert report.outcome.reason == "BitwardenSecretNotFound"
    assert isinstance(planned, Plan), planned
    assert steps(planned) == operand_writes(report)
    assert (Action.CREATED, f"Service {namespace}/external-secrets-webhook") in steps(planned)
    assert f"Deployment {namespace}/bitwarden-sdk-server" in waits(planned)
    assert not any(action is Action.DELETED for action, _ in steps(planned))
    assert any(f"Degraded ({report.outcome.reason})" in note for note in planned.notes)
    # An object being deleted (a finalizer holds it): a wait for it alone in both; a
    # deleted Deployment is re-created meanwhile.
    policy = f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/deny-all-traffic"
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/external-secrets"
    await kube.merge_patch(policy, {"metadata": {"finalizers": ["example.com/hold"]}},
                           field_manager="someone-else")
    await kube.delete(policy)
    await kube.delete(deployment)
    try:
        planned, report = await plan_then_pass({"appConfig": {
            "bitwardenSecretManagerProvider": {"enabled": "false"}}})
        assert f"NetworkPolicy {namespace}/deny-all-traffic" in waits(planned), planned
        assert steps(planned) == operand_writes(report)
        assert (Action.CREATED, f"Deployment {namespace}/external-secrets") in steps(planned)
        assert report.outcome is not None
        assert report.outcome.reason != "ObjectTerminating", report.outcome
        assert [str(a) for a in report.outcome.awaited if "being deleted" in str(a)] == [
            f"NetworkPolicy {namespace}/deny-all-traffic: being deleted; it is created again "
            "once it is gone (a finalizer may hold it)"], report.outcome
    finally:
        await kube.merge_patch(policy, {"metadata": {"finalizers": None}},
                               field_manager="someone-else")
    planned, report = await plan_then_pass({"controllerConfig": {
        "namespace": namespace, "labels": {"team": "c"}}})
    assert not waits(planned), planned
    assert (Action.CREATED, f"NetworkPolicy {namespace}/deny-all-traffic") in (
        operand_writes(report)), report.writes
