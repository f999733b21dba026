"""End-to-end fixtures: openshift-client (`oc`, or our kubectl where `oc` is absent) against
the cluster under test, and the operator.

Two modes:
- default: the session's simulated cluster (tests/conftest.py); this module installs the
  operator's CRDs and the operand's (as OLM would from the bundle) and runs the operator out
  of cluster, as a process (`python -m manager run`), for the duration of the module. The
  operand's pods run for real (the simulated cluster's pod runner): the external-secrets and
  bitwarden-sdk-server releases the operator ships, built from their source trees.
- USE_EXISTING_CLUSTER=1: the cluster in $KUBECONFIG (kind via hack/kind-e2e.sh, or
  OpenShift) with the operator already deployed; the scenarios also wait for the operand's
  Deployments to roll out.

A crashed pass or a traceback in the log of the operator started here fails the scenario
during which it was logged (the hook `pytest_runtest_call` of operator_process.py); what it
logs after the last one, and an exit code other than 0, fail the module at its end.

The scenarios install the operand from samples/esc-namespace.yaml (namespace `eso-operand`,
used by no other test), so that they never touch another suite's operand namespace, and end
by removing it again with `python -m manager uninstall --operand`.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, TypeVar

import openshift_client as oc
import pytest
import yaml

from devcluster.crds import fetched_dir as fetched_crds
from manager.paths import REPO_ROOT
from tests.conftest import Cluster
from tests.e2e.operator_process import (
    OperatorProcess,
    pytest_runtest_call,  # noqa: F401 (a hook: the operator's log after each test)
)
from tests.operand import counts_as_installed
from tests.waiting import wait_for

USE_EXISTING_CLUSTER = os.environ.get("USE_EXISTING_CLUSTER") == "1"
SAMPLE = REPO_ROOT / "samples" / "esc-namespace.yaml"
OPERAND_NAMESPACE = yaml.safe_load(SAMPLE.read_text())["spec"]["controllerConfig"]["namespace"]
OPERATOR_NAMESPACE = "external-secrets-operator"
OPERATOR_DEPLOYMENT = "external-secrets-operator-controller-manager"
MANAGED_BY = {"app.kubernetes.io/managed-by": "external-secrets-operator"}
ESC = "externalsecretsconfig/cluster"
ESM = "externalsecretsmanager/cluster"

_T = TypeVar("_T")


def esc_model() -> dict[str, Any]:
    obj = oc.selector(ESC).object(ignore_not_found=True)
    assert obj is not None, "ExternalSecretsConfig/cluster does not exist"
    model: dict[str, Any] = obj.as_dict()
    return model


def condition(model: dict[str, Any], kind: str) -> dict[str, Any] | None:
    for entry in (model.get("status") or {}).get("conditions") or []:
        if entry.get("type") == kind:
            return dict(entry)
    return None


def wait_esc(status: str = "True", kind: str = "Ready", timeout: float = 90.0,
             reason: str | None = None) -> dict[str, Any]:
    """Until the ESC's `kind` condition has `status` for its current generation."""
    def check() -> dict[str, Any]:
        model = esc_model()
        found = condition(model, kind)
        assert found is not None, f"no {kind} condition: {model.get('status')}"
        assert found["status"] == status, found
        assert found.get("observedGeneration") == model["metadata"]["generation"], found
        if reason is not None:
            assert found.get("reason") == reason, found
        return model

    return wait_for(check, f"{kind}={status} on the ExternalSecretsConfig", timeout)


def wait_installed(timeout: float = 120.0) -> dict[str, Any]:
    """Until the ESC is Ready for its generation (bitwarden-sdk-server too, if it is on:
    tests/operand.py)."""
    def check() -> dict[str, Any]:
        model = esc_model()
        ready = condition(model, "Ready")
        assert ready is not None, model.get("status")
        assert ready.get("observedGeneration") == model["metadata"]["generation"], ready
        assert counts_as_installed(model.get("status")), model.get("status")
        return model

    return wait_for(check, "the operand to be installed", timeout)


def rollout(deployment: str) -> None:
    """Wait until the Deployment's pods run its current template and are available."""
    with oc.project(OPERAND_NAMESPACE):
        oc.invoke("rollout", ["status", f"deployment/{deployment}", "--timeout=300s"])


def uninstall_command(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "manager", "uninstall", "--operand",
               f"--kubeconfig={cluster.kubeconfig}", *args]
    return subprocess.run(command, capture_output=True, text=True, check=False, timeout=180,
                          cwd=REPO_ROOT)


@pytest.fixture(scope="module")
def oc_client(cluster: Cluster) -> Iterator[None]:
    """openshift-client pointed at the cluster under test. It runs `oc`; where there is none,
    kubectl answers every verb these scenarios use (get, apply, patch, delete, wait,
    rollout, create)."""
    oc.set_default_oc_path(os.environ.get("OC") or shutil.which("oc") or cluster.kubectl_path)
    oc.set_default_kubeconfig_path(str(cluster.kubeconfig))
    yield
    oc.set_default_oc_path(None)
    oc.set_default_kubeconfig_path(None)


@pytest.fixture(scope="module")
def operator(cluster: Cluster, oc_client: None, tmp_path_factory: pytest.TempPathFactory,
             ) -> Iterator[OperatorProcess | None]:
    """The operator: already deployed (USE_EXISTING_CLUSTER=1), or started here."""
    if USE_EXISTING_CLUSTER:
        _require_no_esc()
        with oc.project(OPERATOR_NAMESPACE):
            oc.invoke("rollout", ["status", f"deployment/{OPERATOR_DEPLOYMENT}",
                                  "--timeout=180s"])
        yield None
        return
    # What OLM installs from the bundle: the operator's CRDs and the operand's.
    for directory in (REPO_ROOT / "manifests" / "crds", fetched_crds() / "external-secrets"):
        oc.invoke("apply", ["--server-side", "--force-conflicts", "--field-manager=e2e",
                            "-f", str(directory)])
    oc.invoke("wait", ["--for=condition=Established", "--timeout=60s", "--all",
                       "customresourcedefinitions"])
    _require_no_esc()
    log = tmp_path_factory.mktemp("e2e") / "operator.log"
    process = OperatorProcess(REPO_ROOT, cluster.kubeconfig, log).start()
    try:
        yield process
    finally:
        problems = process.stop_checked()
        print(f"operator log: {log}", file=sys.stderr)
    assert not problems, "\n".join(problems) + "\n" + process.log_tail()


def _require_no_esc() -> None:
    if oc.selector(ESC).object(ignore_not_found=True) is not None:
        pytest.fail("ExternalSecretsConfig/cluster already exists: the end-to-end scenarios "
                    "install the operand themselves; run them on a cluster without one")


@pytest.fixture(scope="module")
def esm_restored(operator: OperatorProcess | None) -> Iterator[None]:
    """The ExternalSecretsManager's spec as it was before the scenarios."""
    esm = wait_for(lambda: _existing(ESM), "the operator to create the ExternalSecretsManager")
    original = esm.as_dict().get("spec") or {}
    yield
    oc.selector(ESM).object().patch([{"op": "replace", "path": "/spec", "value": original}],
                                    strategy="json")


def _existing(name: str) -> Any:
    obj = oc.selector(name).object(ignore_not_found=True)
    assert obj is not None, f"{name} does not exist"
    return obj


@pytest.fixture(scope="module")
def installed(cluster: Cluster, operator: OperatorProcess | None, esm_restored: None,
              ) -> Iterator[Path]:
    """The sample ExternalSecretsConfig, applied as an administrator would. Whatever the
    scenarios leave behind is removed afterwards (the last scenario does it for real)."""
    oc.apply(SAMPLE.read_text())
    yield SAMPLE
    oc.selector(ESC).delete(ignore_not_found=True)
    with oc.project(OPERAND_NAMESPACE):
        oc.selector("secret/bitwarden-tls").delete(ignore_not_found=True)
    uninstall_command(cluster, "--yes", f"--namespace={OPERAND_NAMESPACE}")
