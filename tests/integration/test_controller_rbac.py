"""The shipped RBAC (manifests/operator/rbac.yaml) is enough, and no more than a list of
named permissions: the install scenario passes with the operator authenticated as its own
ServiceAccount on the RBAC-enforcing API server."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.client.kube import Kube
from manager.config import UNSAFE_ALLOW_GENERIC_TARGETS, OperatorEnvironment, effective_config
from manager.names import GENERIC_TARGETS_ROLE
from manager.render import render_operand
from manager.reporting.status import CONTROLLER_NAMES
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESM_PATH,
    MANAGED,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    esm_entries,
    managed_objects,
    rbac_documents,
    wait_condition,
)
from tests.integration.test_controller_install import expected_objects

SERVICE_ACCOUNT = "external-secrets-operator-controller-manager"
OPERATOR_NAMESPACE = "external-secrets-operator"

# Configurations (ESC spec, ESM spec) that together render every operand (Cluster)Role there
# is: the feature UnsafeAllowGenericTargets adds one cluster-wide, or one in the operating
# namespace.
GENERIC_TARGETS = {"features": [{"name": UNSAFE_ALLOW_GENERIC_TARGETS, "enabled": "true"}]}
VARIANTS: tuple[tuple[dict[str, Any], dict[str, Any]], ...] = (
    ({}, GENERIC_TARGETS),
    ({"appConfig": {"operatingNamespace": "team-a"}}, GENERIC_TARGETS),
    ({"appConfig": {"certManagerConfig": {"enabled": "true", "addInjectorAnnotations": "true",
                                          "issuerRef": {"name": "i", "kind": "ClusterIssuer"}},
                    "bitwardenSecretManagerProvider": {"enabled": "true"},
                    "proxy": {"httpProxy": "http://proxy.example:3128"}}}, {}),
)

Permission = tuple[str, str, str, str | None]  # group, resource, verb, resource name


def permissions(rules: list[dict[str, Any]]) -> Iterator[Permission]:
    for rule in rules:
        names = rule.get("resourceNames") or [None]
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    for name in names:
                        yield group, resource, verb, name


def operator_rules() -> list[dict[str, Any]]:
    """Rules of the ClusterRoles bound to the operator's ServiceAccount."""
    documents = rbac_documents()
    bound = {doc["roleRef"]["name"] for doc in documents if doc["kind"] == "ClusterRoleBinding"
             and any(s["name"] == SERVICE_ACCOUNT and s["namespace"] == OPERATOR_NAMESPACE
                     for s in doc["subjects"])}
    return [rule for doc in documents if doc["kind"] == "ClusterRole"
            and doc["metadata"]["name"] in bound for rule in doc["rules"]]


def covered(permission: Permission, held: set[Permission]) -> bool:
    group, resource, verb, name = permission
    return (group, resource, verb, None) in held or (
        name is not None and (group, resource, verb, name) in held)


def test_rbac_has_no_wildcards_and_covers_every_operand_role() -> None:
    """RBAC escalation prevention: to create or bind the operand's (Cluster)Roles, the
    operator must hold every permission they grant."""
    documents = rbac_documents()
    for doc in documents:
        for rule in doc.get("rules", []):
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), (doc["metadata"]["name"], rule)
    held = set(permissions(operator_rules()))
    environment = OperatorEnvironment.from_environ({})
    roles = set()
    for esc_spec, esm_spec in VARIANTS:
        config = effective_config(ExternalSecretsConfigSpec.model_validate(esc_spec),
                                  ExternalSecretsManagerSpec.model_validate(esm_spec),
                                  environment)
        for obj in render_operand(config).objects():
            if obj["kind"] not in ("ClusterRole", "Role"):
                continue
            roles.add((obj["kind"], obj["metadata"]["name"]))
            missing = [p for p in permissions(obj["rules"]) if not covered(p, held)]
            assert not missing, f"{obj['kind']} {obj['metadata']['name']} grants {missing}"
    assert {("ClusterRole", GENERIC_TARGETS_ROLE), ("Role", GENERIC_TARGETS_ROLE)} <= roles


async def service_account_kubeconfig(kube: Kube, cluster: Cluster, directory: Path) -> Path:
    """A kubeconfig that authenticates as the operator's ServiceAccount (TokenRequest)."""
    await kube.apply(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}",
                     {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": OPERATOR_NAMESPACE}}, field_manager="integration-tests")
    await kube.apply(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}",
                     {"apiVersion": "v1", "kind": "ServiceAccount",
                      "metadata": {"name": SERVICE_ACCOUNT, "namespace": OPERATOR_NAMESPACE}},
                     field_manager="integration-tests")
    for doc in rbac_documents():
        plural = {"ClusterRole": "clusterroles", "ClusterRoleBinding": "clusterrolebindings",
                  "Role": "roles", "RoleBinding": "rolebindings"}[doc["kind"]]
        namespace = doc["metadata"].get("namespace")
        where = f"namespaces/{namespace}/" if namespace else ""
        await kube.apply(f"/apis/rbac.authorization.k8s.io/v1/{where}{plural}/"
                         f"{doc['metadata']['name']}", doc, field_manager="integration-tests")
    token = await kube.request(
        "POST", f"/api/v1/namespaces/{OPERATOR_NAMESPACE}/serviceaccounts/{SERVICE_ACCOUNT}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}})
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    server = admin["clusters"][0]["cluster"]
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": server}],
        "users": [{"name": SERVICE_ACCOUNT, "user": {"token": token["status"]["token"]}}],
        "contexts": [{"name": "sa", "context": {"cluster": "local", "user": SERVICE_ACCOUNT}}],
        "current-context": "sa",
    }
    path = directory / "operator-sa.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    assert base64.b64decode(server["certificate-authority-data"])  # TLS is verified
    return path


async def test_install_as_the_operator_service_account(
        *, kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The install scenario (in its own namespace), authenticated with the shipped RBAC."""
    namespace = SCENARIO_NAMESPACES["service-account"]
    # Earlier scenarios left the operand's cluster-wide objects behind; remove them so that
    # the operator must create its ClusterRoles and bindings (escalation prevention applies).
    for plural in ("clusterrolebindings", "clusterroles"):
        path = f"/apis/rbac.authorization.k8s.io/v1/{plural}"
        for item in (await kube.list(path, label_selector=MANAGED)).get("items") or []:
            if item["metadata"]["name"].startswith("external-secrets-operator-"):
                continue
            await kube.delete(f"{path}/{item['metadata']['name']}")

    kubeconfig = await service_account_kubeconfig(kube, cluster, tmp_path)
    operator = await start_operator(kubeconfig=str(kubeconfig))
    spec = {"controllerConfig": {"namespace": namespace}}
    await esc.create(spec)
    await wait_condition(esc, "Ready", "True", timeout=40)
    await operator.wait_idle()

    expected = expected_objects(spec)
    found = await managed_objects(kube, namespace)
    assert expected <= set(found), sorted(expected - set(found))
    assert ("ClusterRole", "", "external-secrets-controller") in found
    forbidden = [r.getMessage() for r in caplog.records if " 403 " in r.getMessage()]
    assert forbidden == []
    esm = await kube.request("GET", ESM_PATH)
    assert set(esm_entries(esm)) == set(CONTROLLER_NAMES)
    # Events go to `default` (the ClusterRole's events.k8s.io rule), next to the ESC's uid.
    uid = (await esc.get())["metadata"]["uid"]
    events = await kube.list("/apis/events.k8s.io/v1/namespaces/default/events")
    assert any(e["reason"] == "Applied" and e["regarding"]["uid"] == uid
               for e in events["items"])
    await user_objects.assert_untouched(kube)
