"""The RBAC of OLM v1's installer ServiceAccount: what `ClusterExtension.spec.serviceAccount`
must hold for OLM v1 to install, upgrade and remove this bundle (docs/olm.md, "OLM v1").

OLM v1 applies every object of the rendered bundle (registry_v1.py) as that account, so it
needs, per kind of object:

- `create`, `list` and `watch` (which no resource name can narrow);
- `get`, `update`, `patch` and `delete` on exactly the objects' names, except where OLM v1
  chooses the names (the ClusterRoles and ClusterRoleBindings it makes of the CSV's
  permissions: `<csv name>-<service account>-<hash>`, new with each release), which get them
  unnarrowed;

cluster-scoped kinds in a ClusterRole, namespaced ones in a Role in the install namespace.
And RBAC escalation prevention: the API server lets an account create a role, or bind one,
only if it holds every permission the role grants (or may `escalate` and `bind`, which this
RBAC does not give). So the installer's ClusterRole also holds every rule of every
ClusterRole in the bundle (the operator's, promoted to cluster scope as OLM v1 does, and the
metrics reader), and its Role every rule of a Role. Last, `update` on the ClusterExtension's
finalizers: OpenShift's OwnerReferencesPermissionEnforcement admission refuses owner
references with blockOwnerDeletion (which OLM v1 sets) without it.

tests/integration/test_olm_v1_installer.py applies the rendered bundle as a ServiceAccount
holding only this RBAC.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from manager.olm import identity
from manager.olm.registry_v1 import RBAC_GROUP, Object, Rendered, kind_of

INSTALLER = f"{identity.PACKAGE}-installer"
"""The installer ServiceAccount, its ClusterRole and Role, and their bindings."""
EXTENSION = identity.PACKAGE
"""The ClusterExtension's name the finalizers rule names (docs/olm.md's example)."""
UNNARROWED = ("create", "list", "watch")
BY_NAME = ("get", "update", "patch", "delete")


def manifest(rendered: Rendered, namespace: str = identity.NAMESPACE,
             extension: str = EXTENSION) -> list[Object]:
    """The installer's ServiceAccount, ClusterRole, ClusterRoleBinding, Role and
    RoleBinding for installing `rendered` into `namespace` as ClusterExtension
    `extension`."""
    objects = rendered.objects
    cluster = [o for o in objects if not kind_of(o).namespaced]
    local = [o for o in objects if kind_of(o).namespaced]
    cluster_rules = [
        {"apiGroups": ["olm.operatorframework.io"], "resources": ["clusterextensions/finalizers"],
         "resourceNames": [extension], "verbs": ["update"]},
        *_management(cluster, rendered.generated),
        *_granted(o for o in objects if o["kind"] == "ClusterRole"),
    ]
    local_rules = [*_management(local, rendered.generated),
                   *_granted(o for o in objects if o["kind"] == "Role")]
    subject = [{"kind": "ServiceAccount", "name": INSTALLER, "namespace": namespace}]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": INSTALLER, "namespace": namespace}},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
         "metadata": {"name": INSTALLER}, "rules": cluster_rules},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
         "metadata": {"name": INSTALLER},
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": INSTALLER},
         "subjects": subject},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "Role",
         "metadata": {"name": INSTALLER, "namespace": namespace}, "rules": local_rules},
        {"apiVersion": f"{RBAC_GROUP}/v1", "kind": "RoleBinding",
         "metadata": {"name": INSTALLER, "namespace": namespace},
         "roleRef": {"apiGroup": RBAC_GROUP, "kind": "Role", "name": INSTALLER},
         "subjects": subject},
    ]


def _management(objects: Sequence[Object], generated: frozenset[tuple[str, str]],
                ) -> list[Object]:
    """Per kind: create/list/watch, and get/update/patch/delete by name where the names are
    known."""
    names: dict[tuple[str, str], list[str]] = {}
    free: set[tuple[str, str]] = set()
    for obj in objects:
        kind = kind_of(obj)
        key = (kind.group, kind.resource)
        names.setdefault(key, [])
        if (obj["kind"], obj["metadata"]["name"]) in generated:
            free.add(key)
        elif obj["metadata"]["name"] not in names[key]:
            names[key].append(obj["metadata"]["name"])
    rules = []
    for (group, resource), known in sorted(names.items()):
        rules.append(_rule(group, resource, UNNARROWED))
        if (group, resource) in free:
            rules.append(_rule(group, resource, BY_NAME))
        else:
            rules.append(_rule(group, resource, BY_NAME, sorted(known)))
    return rules


def _rule(group: str, resource: str, verbs: Sequence[str],
          names: Sequence[str] = ()) -> Object:
    rule: Object = {"apiGroups": [group], "resources": [resource]}
    if names:
        rule["resourceNames"] = list(names)
    rule["verbs"] = list(verbs)
    return rule


def _granted(roles: Iterable[Object]) -> list[Object]:
    """Every rule the roles grant, each once (escalation prevention)."""
    seen: list[Object] = []
    for role in roles:
        for rule in role.get("rules") or []:
            if rule not in seen:
                seen.append(_ordered(rule))
    return seen


def _ordered(rule: dict[str, Any]) -> Object:
    order = ("apiGroups", "resources", "resourceNames", "nonResourceURLs", "verbs")
    return {key: list(rule[key]) for key in order if rule.get(key)}

