"""OLM v1's rendering of a registry+v1 bundle (manager/olm/registry_v1.py) and the installer
RBAC derived from it (manager/olm/installer_rbac.py), on a small bundle; the real bundle is
installed as the installer in tests/integration/test_olm_v1_installer.py."""

from __future__ import annotations

from typing import Any

import pytest

from manager.olm import installer_rbac, registry_v1

READ_PODS = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
LEASES = {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]}


def bundle(modes: tuple[str, ...] = ("AllNamespaces",)) -> list[dict[str, Any]]:
    csv = {
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": "demo.v1.0.0", "annotations": {"capabilities": "Basic Install"}},
        "spec": {
            "installModes": [{"type": m, "supported": m in modes}
                             for m in ("OwnNamespace", "AllNamespaces")],
            "install": {"strategy": "deployment", "spec": {
                "clusterPermissions": [{"serviceAccountName": "demo", "rules": [READ_PODS]}],
                "permissions": [{"serviceAccountName": "demo", "rules": [LEASES]}],
                "deployments": [{"name": "demo", "label": {"app": "demo"}, "spec": {
                    "selector": {"matchLabels": {"app": "demo"}},
                    "template": {"metadata": {"labels": {"app": "demo"},
                                              "annotations": {"own": "1"}},
                                 "spec": {"serviceAccountName": "demo"}}}}]}}}}
    crd = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "demos.example.com"}}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "demo-metrics"}}
    reader = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
              "metadata": {"name": "demo-metrics-reader"},
              "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]}
    return [service, csv, crd, reader]


def by_kind(objects: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind]


def test_the_bundle_renders_as_olm_v1_installs_it_in_all_namespaces_mode() -> None:
    rendered = registry_v1.render(bundle(), "demo-system")
    kinds = [o["kind"] for o in rendered.objects]
    assert kinds[0] == "CustomResourceDefinition"
    assert kinds.index("ClusterRoleBinding") > max(
        i for i, kind in enumerate(kinds) if kind == "ClusterRole")
    assert kinds[-1] == "Deployment"
    roles = by_kind(rendered.objects, "ClusterRole")
    # clusterPermissions as they are; permissions promoted, with the namespaces read added.
    assert [READ_PODS] in [r["rules"] for r in roles]
    assert [LEASES, registry_v1.NAMESPACES_READ] in [r["rules"] for r in roles]
    generated = [r for r in roles if r["metadata"]["name"] != "demo-metrics-reader"]
    assert all(r["metadata"]["name"].startswith("demo.v1.0.0-demo-") for r in generated)
    assert all(len(r["metadata"]["name"]) <= registry_v1.MAX_NAME for r in generated)
    assert rendered.generated == {(kind, r["metadata"]["name"]) for r in generated
                                  for kind in ("ClusterRole", "ClusterRoleBinding")}
    for binding in by_kind(rendered.objects, "ClusterRoleBinding"):
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "demo",
                                        "namespace": "demo-system"}]
    assert [a["metadata"] for a in by_kind(rendered.objects, "ServiceAccount")] == [
        {"name": "demo", "namespace": "demo-system"}]
    [service] = by_kind(rendered.objects, "Service")
    assert service["metadata"]["namespace"] == "demo-system"
    [deployment] = by_kind(rendered.objects, "Deployment")
    assert deployment["metadata"] == {"name": "demo", "namespace": "demo-system",
                                      "labels": {"app": "demo"}}
    assert deployment["spec"]["revisionHistoryLimit"] == 1
    assert deployment["spec"]["template"]["metadata"]["annotations"] == {
        "capabilities": "Basic Install", "own": "1", "olm.targetNamespaces": ""}


def test_what_olm_v1_would_refuse_or_is_not_known_is_an_error() -> None:
    with pytest.raises(registry_v1.RenderError, match="AllNamespaces"):
        registry_v1.render(bundle(modes=("OwnNamespace",)), "demo-system")
    odd = [*bundle(), {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}}]
    with pytest.raises(registry_v1.RenderError, match="Pod x"):
        registry_v1.render(odd, "demo-system")


def test_the_installer_manages_each_object_and_holds_what_it_grants() -> None:
    rendered = registry_v1.render(bundle(), "demo-system")
    account, cluster_role, cluster_binding, role, binding = installer_rbac.manifest(
        rendered, "demo-system", "demo")
    assert account["metadata"] == {"name": installer_rbac.INSTALLER, "namespace": "demo-system"}
    assert cluster_binding["subjects"] == binding["subjects"] == [
        {"kind": "ServiceAccount", "name": installer_rbac.INSTALLER, "namespace": "demo-system"}]
    rules = cluster_role["rules"]
    assert {"apiGroups": ["olm.operatorframework.io"],
            "resources": ["clusterextensions/finalizers"], "resourceNames": ["demo"],
            "verbs": ["update"]} in rules
    assert {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"],
            "resourceNames": ["demos.example.com"],
            "verbs": ["get", "update", "patch", "delete"]} in rules
    # OLM v1 names the operator's ClusterRoles: no name can narrow those.
    assert {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"],
            "verbs": ["get", "update", "patch", "delete"]} in rules
    # Escalation prevention: every rule granted is held, the promoted ones cluster-wide.
    for granted in (READ_PODS, LEASES, registry_v1.NAMESPACES_READ,
                    {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}):
        assert granted in rules, granted
    assert {"apiGroups": [""], "resources": ["services"], "resourceNames": ["demo-metrics"],
            "verbs": ["get", "update", "patch", "delete"]} in role["rules"]
    assert {"apiGroups": ["apps"], "resources": ["deployments"],
            "verbs": ["create", "list", "watch"]} in role["rules"]
    assert not [r for r in rules + role["rules"]
                if {"escalate", "bind", "*"} & set(r["verbs"])]
