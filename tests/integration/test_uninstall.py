"""`python -m manager uninstall --operand` against the real API server, on an operand the
operator installed: dry run by default, refusal while the ExternalSecretsConfig exists,
reverse install order, user objects and copied labels left alone, the operand Namespace
deleted only when nothing else is in it."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from functools import partial
from typing import Any

from manager.client.kube import Kube
from manager.render.state import APPLY_ORDER, renderable_kinds
from manager.steps.uninstall import plan_uninstall
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESC_API,
    MANAGED,
    EscHandle,
    StartOperator,
    UserObjects,
    _past_stale_webhooks,
    eventually,
    managed_objects,
    remove_operand_webhooks,
    wait_condition,
    wait_installed,
)
from tests.integration.test_controller_install import expected_objects
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret

Key = tuple[str, str, str]

KEPT_NAMESPACE = "eso-it-uninstall-kept"
CLEAN_NAMESPACE = "eso-it-uninstall"
FIELD_MANAGER = "integration-tests"


# --- the command -----------------------------------------------------------------------------


async def uninstall(cluster: Cluster, *args: str) -> tuple[int, str]:
    command = [sys.executable, "-m", "manager", "uninstall", "--operand",
               f"--kubeconfig={cluster.kubeconfig}", *args]
    result = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True,
                                     check=False, timeout=120)
    return result.returncode, result.stdout + result.stderr


def listed(output: str) -> list[Key]:
    """The objects the command lists for deletion, in its order."""
    section = output.split("in deletion order:\n", 1)[1].split("\n\n", 1)[0]
    return [_key(line.strip()) for line in section.splitlines() if line.startswith("  ")]


def kept(output: str) -> dict[Key, str]:
    """The objects the command keeps, with its reason."""
    section = output.split("\nKept:\n", 1)[1].split("\n\n", 1)[0]
    entries = {}
    for line in section.splitlines():
        ref, _, reason = line.strip().partition(": ")
        entries[_key(ref)] = reason
    return entries


def _key(ref: str) -> Key:
    kind, _, where = ref.partition(" ")
    namespace, _, name = where.rpartition("/")
    return kind, namespace, name


# --- the cluster -----------------------------------------------------------------------------


async def prepare_namespace(kube: Kube, namespace: str, objects: list[tuple[str, dict[str, Any]]],
                            ) -> dict[str, tuple[str, int | None]]:
    """The namespace, as the operator creates it (its field manager and label: the operator
    does not label a namespace it did not create), and objects in it that are not the
    operator's, created while no webhook configuration exists (none serves them yet); their
    paths, uids and generations."""
    await remove_operand_webhooks(kube)
    await kube.apply(f"/api/v1/namespaces/{namespace}",
                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {
                         "name": namespace,
                         "labels": {"app.kubernetes.io/managed-by": "external-secrets-operator"}}},
                     field_manager="external-secrets-operator")
    versions = {}
    for collection, body in objects:
        path = f"{collection}/{body['metadata']['name']}"
        await _past_stale_webhooks(partial(kube.delete, path))
        created = await _past_stale_webhooks(
            partial(kube.create, collection, body, field_manager=FIELD_MANAGER))
        versions[path] = (created["metadata"]["uid"], created["metadata"].get("generation"))
    return versions


def foreign_objects(namespace: str) -> list[tuple[str, dict[str, Any]]]:
    """A SecretStore and an ExternalSecret of a user, the bitwarden TLS Secret the
    administrator provides (a real key pair: bitwarden-sdk-server serves it), and a
    ConfigMap that copied the operator's managed-by label, and an administrator's own
    NetworkPolicy."""
    return [
        (f"/apis/external-secrets.io/v1/namespaces/{namespace}/secretstores",
         {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
          "metadata": {"name": "team-store"},
          "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}}}),
        (f"/apis/external-secrets.io/v1/namespaces/{namespace}/externalsecrets",
         {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
          "metadata": {"name": "team-secret"},
          "spec": {"secretStoreRef": {"name": "team-store", "kind": "SecretStore"},
                   "target": {"name": "team-synced"},
                   "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]}}),
        (f"/api/v1/namespaces/{namespace}/secrets", bitwarden_tls_secret(namespace)),
        (f"/api/v1/namespaces/{namespace}/configmaps",
         {"apiVersion": "v1", "kind": "ConfigMap",
          "metadata": {"name": "copied-label",
                       "labels": {"app.kubernetes.io/managed-by": "external-secrets-operator"}},
          "data": {"note": "labelled like the operand, created by someone else"}}),
        (f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies",
         {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
          "metadata": {"name": "admin-policy"},
          "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}}),
    ]


async def assert_unchanged(kube: Kube, versions: dict[str, tuple[str, int | None]]) -> None:
    """Same object, same spec (the running operand writes their status, not the operator)."""
    for path, (uid, generation) in versions.items():
        live = await kube.get(path)
        assert live is not None, f"{path} was deleted"
        assert live["metadata"]["uid"] == uid, f"{path} was re-created"
        assert live["metadata"].get("generation") == generation, f"{path} changed"
        managers = {entry.get("manager") for entry in live["metadata"].get("managedFields") or []}
        assert "external-secrets-operator" not in managers, f"the operator wrote to {path}"


async def ours_left(kube: Kube, namespace: str) -> set[Key]:
    """Objects with our label in `namespace` and cluster-wide, except the Namespace itself
    and objects that only copied the label."""
    found = await managed_objects(kube, namespace)
    return {key for key, obj in found.items() if key[0] != "Namespace"
            and any(entry.get("manager") == "external-secrets-operator"
                    for entry in obj["metadata"].get("managedFields") or [])}


def assert_deletion_order(keys: list[Key]) -> None:
    ranks = [APPLY_ORDER.index(kind) for kind, _, _ in keys]
    assert ranks == sorted(ranks, reverse=True), keys
    assert keys[-1][0] == "Namespace" or "Namespace" not in {k[0] for k in keys}


# --- scenarios -------------------------------------------------------------------------------


async def test_uninstall_lists_refuses_then_deletes_and_keeps_what_is_not_ours(
        cluster: Cluster, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    namespace = KEPT_NAMESPACE
    foreign = await prepare_namespace(kube, namespace, foreign_objects(namespace))
    spec = {"controllerConfig": {"namespace": namespace, "labels": {"team": "platform"}},
            "appConfig": {"bitwardenSecretManagerProvider": {
                "enabled": "true", "secretRef": {"name": BITWARDEN_TLS_SECRET}}}}
    operator = await start_operator()
    await esc.create(spec)
    await wait_installed(esc, namespace)
    expected = expected_objects(spec)
    installed = await ours_left(kube, namespace)
    assert expected - {k for k in expected if k[0] == "Namespace"} <= installed

    # Dry run (the default): everything the operator created is listed, nothing is deleted.
    code, output = await uninstall(cluster)
    assert code == 0, output
    assert f"looking in namespace {namespace}" in output  # the ESC's namespace
    assert "Dry run: nothing was deleted" in output
    plan = listed(output)
    assert expected - {("Namespace", "", namespace)} <= set(plan), output
    assert {kind for kind, _, _ in plan} <= {kind for _, kind in renderable_kinds()}
    assert all(ns in ("", namespace) for _, ns, _ in plan), output
    assert_deletion_order(plan)
    reasons = kept(output)
    namespace_reason = reasons[("Namespace", "", namespace)]
    for name in ("Secret eso-it-uninstall-kept/bitwarden-tls",
                 "ExternalSecret eso-it-uninstall-kept/team-secret",
                 "SecretStore eso-it-uninstall-kept/team-store",
                 "ConfigMap eso-it-uninstall-kept/copied-label",
                 "NetworkPolicy eso-it-uninstall-kept/admin-policy"):
        assert name in namespace_reason, namespace_reason
    assert "never applied" in reasons[("ConfigMap", namespace, "copied-label")]
    assert await ours_left(kube, namespace) == installed

    # --yes while the ExternalSecretsConfig exists: refused, nothing deleted.
    code, output = await uninstall(cluster, "--yes")
    assert code == 1, output
    assert "refused: ExternalSecretsConfig/cluster still exists" in output
    assert await ours_left(kube, namespace) == installed

    # --force, with the operator stopped (it would re-create everything): all ours is gone,
    # the namespace and everything in it that is not ours stay.
    await operator.stop()
    code, output = await uninstall(cluster, "--yes", "--force")
    assert code == 0, output
    assert f"Deleted {len(plan)} objects." in output
    assert await ours_left(kube, namespace) == set()
    live_namespace = await kube.request("GET", f"/api/v1/namespaces/{namespace}")
    assert "deletionTimestamp" not in live_namespace["metadata"]
    await assert_unchanged(kube, foreign)
    await user_objects.assert_untouched(kube)

    # Nothing left: the command says so and exits 0.
    code, output = await uninstall(cluster, "--yes", "--force")
    assert code == 0, output
    assert "Nothing the operator created was found." in output


async def test_uninstall_after_the_esc_is_deleted_removes_the_namespace_last(
        cluster: Cluster, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    namespace = CLEAN_NAMESPACE
    await remove_operand_webhooks(kube)
    spec = {"controllerConfig": {"namespace": namespace}}
    operator = await start_operator()
    await esc.create(spec)
    await wait_condition(esc, "Ready", "True")
    # Deleting the ESC stops management and leaves the operand in place.
    await kube.delete(f"{ESC_API}/cluster")
    await operator.wait_idle()
    expected = expected_objects(spec)
    assert expected - {("Namespace", "", namespace)} <= await ours_left(kube, namespace)

    # Without an ESC, the plan covers every namespace: this operand and any left elsewhere.
    plan = await plan_uninstall(kube)
    assert plan.namespace is None
    assert not plan.esc_exists
    planned = {(c.ref.kind, c.ref.namespace, c.ref.name) for c in plan.objects + plan.namespaces}
    assert expected <= planned
    assert ("Namespace", "", namespace) in {(c.ref.kind, "", c.ref.name)
                                            for c in plan.namespaces}
    assert ("Namespace", "", KEPT_NAMESPACE) not in planned  # it holds user objects

    code, output = await uninstall(cluster, "--yes", f"--namespace={namespace}")
    assert code == 0, output
    order = listed(output)
    assert order[-1] == ("Namespace", "", namespace)
    assert_deletion_order(order)
    assert "Namespaces finish terminating in the background." in output

    # The operator, still running without an ESC, re-creates nothing.
    await operator.wait_idle()

    async def gone() -> None:
        assert await ours_left(kube, namespace) == set()

    await eventually(gone)
    live_namespace = await kube.request("GET", f"/api/v1/namespaces/{namespace}")
    assert live_namespace["metadata"].get("deletionTimestamp")
    listing = await kube.list("/apis/admissionregistration.k8s.io/v1/"
                              "validatingwebhookconfigurations", label_selector=MANAGED)
    assert listing["items"] == []
    await user_objects.assert_untouched(kube)
