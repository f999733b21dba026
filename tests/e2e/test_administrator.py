"""What a cluster administrator does with the operator, driven through openshift-client:
install from the sample, read the status columns, change settings, switch bitwarden on and
off, and finally remove the operand. The scenarios run in this order, on one operand; the
integration tests cover each behaviour in depth."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import openshift_client as oc

from tests.conftest import Cluster
from tests.e2e.conftest import (
    ESC,
    ESM,
    MANAGED_BY,
    OPERAND_NAMESPACE,
    USE_EXISTING_CLUSTER,
    condition,
    rollout,
    uninstall_command,
    wait_esc,
    wait_for,
    wait_installed,
)
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret

DEPLOYMENTS = ("external-secrets", "external-secrets-webhook", "external-secrets-cert-controller")
SCENARIO_LABEL = "e2e.example.com/scenario"


def managed(kinds: str) -> list[Any]:
    """Our objects of `kinds` (e.g. "deployments,services") in the operand namespace."""
    with oc.project(OPERAND_NAMESPACE):
        return list(oc.selector(kinds, labels=MANAGED_BY).objects())


def deployment(name: str) -> dict[str, Any] | None:
    with oc.project(OPERAND_NAMESPACE):
        obj = oc.selector(f"deployment/{name}").object(ignore_not_found=True)
    return None if obj is None else dict(obj.as_dict())


def container_args(name: str) -> list[str]:
    found = deployment(name)
    assert found is not None, f"no Deployment {name}"
    args: list[str] = found["spec"]["template"]["spec"]["containers"][0].get("args") or []
    return args


def status_table(kind_and_name: str) -> dict[str, str]:
    """`oc get <kind> <name>` as the administrator reads it: column name -> value."""
    output = oc.invoke("get", kind_and_name.split("/")).out()
    header, row = output.splitlines()[:2]
    starts = [match.start() for match in re.finditer(r"\S+", header)]
    ends = [*starts[1:], None]
    return {header[s:e].strip(): row[s:e].strip() for s, e in zip(starts, ends, strict=True)}


def test_install_from_the_sample_becomes_ready(installed: Path) -> None:
    result = oc.invoke("wait", ["--for=condition=Ready", ESC, "--timeout=120s"])
    assert "condition met" in result.out()
    model = wait_esc("True")
    assert OPERAND_NAMESPACE in (condition(model, "Ready") or {})["message"]
    names = {obj.name() for obj in managed("deployments")}
    assert names == set(DEPLOYMENTS)
    others = managed("serviceaccounts,services,secrets,networkpolicies")
    kinds = {obj.kind(lowercase=False) for obj in others}
    assert kinds == {"ServiceAccount", "Service", "Secret", "NetworkPolicy"}
    webhooks = oc.selector("validatingwebhookconfigurations", labels=MANAGED_BY).qnames()
    assert len(webhooks) == 2, webhooks
    for name in DEPLOYMENTS:
        rollout(name)
    if USE_EXISTING_CLUSTER:
        for name in DEPLOYMENTS:
            assert (deployment(name) or {})["status"].get("availableReplicas", 0) >= 1, name


def test_status_columns_show_ready_and_the_message(installed: Path) -> None:
    model = wait_esc("True")
    columns = status_table(ESC)
    assert list(columns) == ["NAME", "READY", "REASON", "VERSION", "NAMESPACE", "MESSAGE", "AGE"]
    assert columns["NAME"] == "cluster"
    assert columns["READY"] == "True"
    assert columns["REASON"] == "Reconciled"
    assert columns["VERSION"] == model["status"]["externalSecretsVersion"]
    assert columns["NAMESPACE"] == OPERAND_NAMESPACE
    ready = condition(model, "Ready") or {}
    assert columns["MESSAGE"] == ready["message"], (columns, ready)
    esm = status_table(ESM)
    assert list(esm) == ["NAME", "READY", "AGE"]
    assert esm["READY"] == "3/3"


def test_settings_from_the_esm_and_the_esc_land(installed: Path) -> None:
    # Global defaults in the ExternalSecretsManager: a label for every object and pod, and a
    # log level (used because the sample ExternalSecretsConfig has no appConfig).
    oc.selector(ESM).object().patch(
        {"spec": {"globalConfig": {"labels": {SCENARIO_LABEL: "settings"}, "logLevel": 4}}},
        strategy="merge")

    def esm_settings_applied() -> None:
        assert "--loglevel=debug" in container_args("external-secrets")
        for obj in managed("deployments,services,serviceaccounts,networkpolicies"):
            assert obj.get_label(SCENARIO_LABEL) == "settings", obj.qname()
        for name in DEPLOYMENTS:
            template = (deployment(name) or {})["spec"]["template"]["metadata"]["labels"]
            assert template.get(SCENARIO_LABEL) == "settings", name

    wait_for(esm_settings_applied, "the ExternalSecretsManager's settings to land")
    wait_esc("True")
    rollout("external-secrets")

    # The ExternalSecretsConfig's own log level wins over the global one (2: info).
    oc.selector(ESC).object().patch({"spec": {"appConfig": {"logLevel": 2}}}, strategy="merge")
    wait_for(lambda: _assert_in("--loglevel=info", container_args("external-secrets")),
             "the ExternalSecretsConfig's log level to land")
    wait_esc("True")
    rollout("external-secrets")


def test_bitwarden_on_with_a_secret_ref_and_off_again(installed: Path) -> None:
    bitwarden = {"spec": {"appConfig": {"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": BITWARDEN_TLS_SECRET}}}}}
    oc.selector(ESC).object().patch(bitwarden, strategy="merge")
    # The TLS Secret is not there yet: not Ready, and the columns say what to fix.
    degraded = wait_esc("True", kind="Degraded", reason="BitwardenSecretNotFound")
    columns = status_table(ESC)
    assert columns["READY"] == "False"
    assert "bitwarden-tls" in columns["MESSAGE"]
    assert "secretRef" in (condition(degraded, "Degraded") or {})["message"]
    assert deployment("bitwarden-sdk-server") is None

    # The administrator makes a CA and a key pair for the Service's names (openssl): the
    # server serves it, its Deployment is available and the ESC Ready.
    with oc.project(OPERAND_NAMESPACE):
        oc.create({**bitwarden_tls_secret(OPERAND_NAMESPACE, string_data=True),
                   "type": "kubernetes.io/tls"})
    wait_for(lambda: _assert_not_none(deployment("bitwarden-sdk-server")),
             "the bitwarden-sdk-server Deployment")
    model = wait_installed()
    rollout("bitwarden-sdk-server")
    assert model["status"].get("bitwardenSDKServerImage")
    assert "bitwarden-sdk-server" in {obj.name() for obj in managed("services")}

    oc.selector(ESC).object().patch(
        {"spec": {"appConfig": {"bitwardenSecretManagerProvider": {"enabled": "false"}}}},
        strategy="merge")
    wait_for(lambda: _assert_none(deployment("bitwarden-sdk-server")),
             "bitwarden-sdk-server to be removed")
    model = wait_esc("True")
    assert "bitwardenSDKServerImage" not in model["status"]
    assert "bitwarden-sdk-server" not in {obj.name() for obj in managed("services")}
    with oc.project(OPERAND_NAMESPACE):  # the administrator's Secret stays
        assert oc.selector("secret/bitwarden-tls").object(ignore_not_found=True) is not None


def test_deleting_the_esc_leaves_the_operand_and_uninstall_removes_it(
        cluster: Cluster, installed: Path) -> None:
    oc.selector(ESC).delete()
    assert oc.selector(ESC).object(ignore_not_found=True) is None
    assert {obj.name() for obj in managed("deployments")} == set(DEPLOYMENTS)

    dry_run = uninstall_command(cluster, f"--namespace={OPERAND_NAMESPACE}")
    assert dry_run.returncode == 0, dry_run.stdout + dry_run.stderr
    assert f"Deployment {OPERAND_NAMESPACE}/external-secrets\n" in dry_run.stdout
    assert "Dry run: nothing was deleted" in dry_run.stdout
    assert {obj.name() for obj in managed("deployments")} == set(DEPLOYMENTS)

    removed = uninstall_command(cluster, "--yes", f"--namespace={OPERAND_NAMESPACE}")
    assert removed.returncode == 0, removed.stdout + removed.stderr
    # The administrator's Secret was in the namespace, so the namespace stays.
    assert f"Namespace {OPERAND_NAMESPACE}: it holds objects" in removed.stdout
    assert managed("deployments,services,serviceaccounts,secrets,networkpolicies,"
                   "roles,rolebindings") == []
    assert oc.selector("validatingwebhookconfigurations", labels=MANAGED_BY).qnames() == []
    assert oc.selector("clusterroles,clusterrolebindings", labels=MANAGED_BY).qnames() == []
    with oc.project(OPERAND_NAMESPACE):
        assert oc.selector("secret/bitwarden-tls").object(ignore_not_found=True) is not None


def _assert_in(item: str, items: list[str]) -> None:
    assert item in items, items


def _assert_none(value: object) -> None:
    assert value is None, value


def _assert_not_none(value: object) -> None:
    assert value is not None
