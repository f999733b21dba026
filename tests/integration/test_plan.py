"""`python -m manager plan`: what applying a spec would do, against the live cluster, through
server-side dry runs; it changes nothing, and exits non-zero on a spec the API server or the
operator would refuse."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import yaml

from manager.kube import Kube
from manager.paths import REPO_ROOT
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESC_API,
    SCENARIO_NAMESPACES,
    EscHandle,
    OperatorThread,
    UserObjects,
    wait_condition,
    wait_installed,
)

StartOperator = Callable[..., Awaitable[OperatorThread]]
BITWARDEN = {"bitwardenSecretManagerProvider": {"enabled": "true",
                                                "secretRef": {"name": "bitwarden-tls"}}}


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

    # bitwarden on (its TLS Secret exists), then a plan that switches it off: deletions.
    await kube.apply(f"/api/v1/namespaces/{namespace}/secrets/bitwarden-tls",
                     {"apiVersion": "v1", "kind": "Secret",
                      "metadata": {"name": "bitwarden-tls", "namespace": namespace},
                      "stringData": {"tls.crt": "c", "tls.key": "k", "ca.crt": "a"}},
                     field_manager="integration-tests")
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
    # Refused by the operator: a missing dependency.
    missing = plan(cluster, tmp_path, {**base, "appConfig": {
        "bitwardenSecretManagerProvider": {"enabled": "true", "secretRef": {"name": "nope"}}}})
    assert missing.returncode == 1, missing.stdout
    assert "Degraded, BitwardenSecretNotFound" in missing.stdout
    # Not a plan at all: the file is not an ExternalSecretsConfig.
    (tmp_path / "other.yaml").write_text("kind: ConfigMap\n")
    wrong = subprocess.run([sys.executable, "-m", "manager", "plan", "-f",
                            str(tmp_path / "other.yaml"), f"--kubeconfig={cluster.kubeconfig}"],
                           cwd=REPO_ROOT, capture_output=True, text=True, check=False,
                           env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    assert wrong.returncode == 2, wrong.stderr
    assert "kind: expected ExternalSecretsConfig" in wrong.stderr
