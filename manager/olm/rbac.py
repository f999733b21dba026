"""The operator's permissions, read from manifests/operator/rbac.yaml.

A CSV does not carry RBAC objects for its own service account: OLM creates them from
`clusterPermissions` (ClusterRoles bound cluster-wide) and `permissions` (Roles in the
operator's namespace). This module follows the bindings in rbac.yaml to the operator's
service account and turns the roles they grant into those two lists. Roles that no
binding grants to the operator (for example aggregated roles for users), and the
ClusterRoleBindings that grant them to others (the monitoring stack's read of /metrics), are
shipped as plain objects in the bundle (OLM installs both kinds from a bundle).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from manager.olm import identity, yamlfile

RBAC_GROUP = "rbac.authorization.k8s.io"


class RbacError(ValueError):
    """rbac.yaml is missing or does not grant the operator anything usable."""


@dataclass(frozen=True)
class OperatorPermissions:
    cluster_rules: list[dict[str, Any]]
    namespace_rules: list[dict[str, Any]]
    # ClusterRoles no binding grants to the operator, and ClusterRoleBindings to other
    # subjects: shipped as they are.
    other_objects: list[dict[str, Any]] = field(default_factory=list)


def load(path: Path, service_account: str = identity.SERVICE_ACCOUNT) -> OperatorPermissions:
    if not path.is_file():
        raise RbacError(
            f"{path} does not exist: it holds the operator's ClusterRole/Role and their "
            "bindings (written with the controllers); the bundle cannot be generated without it"
        )
    objects = yamlfile.load_all(path.read_text())
    return from_objects(objects, service_account, source=str(path))


def from_objects(objects: list[dict[str, Any]], service_account: str,
                 source: str = "rbac.yaml") -> OperatorPermissions:
    roles = {(o["kind"], o["metadata"]["name"]): o for o in objects
             if o.get("kind") in ("ClusterRole", "Role")}
    cluster_rules: list[dict[str, Any]] = []
    namespace_rules: list[dict[str, Any]] = []
    granted: set[tuple[str, str]] = set()
    others: list[dict[str, Any]] = []
    for binding in objects:
        kind = binding.get("kind")
        if kind not in ("ClusterRoleBinding", "RoleBinding"):
            continue
        if not _binds_service_account(binding, service_account):
            if kind == "RoleBinding":
                raise RbacError(f"{source}: RoleBinding {binding['metadata']['name']} grants "
                                "nothing to the operator; a bundle can ship only "
                                "ClusterRoleBindings for other subjects")
            others.append(binding)
            continue
        if len(binding["subjects"]) > 1:  # OLM would bind the operator only
            raise RbacError(f"{source}: {kind} {binding['metadata']['name']} binds the "
                            "operator and others; split it")
        namespace = binding["metadata"].get("namespace", identity.NAMESPACE)
        if kind == "RoleBinding" and namespace != identity.NAMESPACE:
            # A CSV's `permissions` become a Role in the operator's namespace only.
            raise RbacError(f"{source}: RoleBinding {binding['metadata']['name']} is in "
                            f"namespace {namespace}; OLM can grant namespaced permissions only "
                            f"in the operator's namespace ({identity.NAMESPACE})")
        ref = binding["roleRef"]
        key = (ref["kind"], ref["name"])
        if key not in roles:
            raise RbacError(f"{source}: {kind} {binding['metadata']['name']} refers to "
                            f"{ref['kind']} {ref['name']}, which the file does not define")
        granted.add(key)
        rules = [_clean_rule(rule) for rule in roles[key].get("rules", [])]
        (cluster_rules if kind == "ClusterRoleBinding" else namespace_rules).extend(rules)
    if not cluster_rules and not namespace_rules:
        raise RbacError(f"{source}: no binding grants any rule to ServiceAccount "
                        f"{service_account}")
    unbound = [role for key, role in sorted(roles.items())
               if key not in granted and role["kind"] == "ClusterRole"]
    return OperatorPermissions(_dedupe(cluster_rules), _dedupe(namespace_rules),
                               unbound + others)


def _binds_service_account(binding: dict[str, Any], service_account: str) -> bool:
    return any(subject.get("kind") == "ServiceAccount" and subject.get("name") == service_account
               for subject in binding.get("subjects") or [])


def _clean_rule(rule: dict[str, Any]) -> dict[str, Any]:
    # Key order as kubectl prints rules, so the CSV reads like the ClusterRole.
    order = ("apiGroups", "resources", "resourceNames", "nonResourceURLs", "verbs")
    return {key: list(rule[key]) for key in order if rule.get(key)}


def _dedupe(rules: list[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: list[dict[str, Any]] = []
    for rule in rules:
        if rule not in seen:
            seen.append(rule)
    return seen
