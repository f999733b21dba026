"""What OLM v1 installs from this bundle: the registry+v1 bundle rendered into plain objects.

OLM v1 (operator-controller; a `ClusterExtension` on OpenShift 4.21 and later) does not run
a CSV. It renders the bundle into ordinary objects and applies them through the API server
as the ServiceAccount that `ClusterExtension.spec.serviceAccount` names (installer_rbac.py
derives what that account needs). Rendered here as operator-controller does it for a bundle
installed in AllNamespaces mode, the only mode this CSV supports:

- the CRDs, as they are;
- each `clusterPermissions` entry, and each `permissions` entry (promoted to cluster scope in
  AllNamespaces mode, with `get, list, watch` on namespaces added, as OLM v0 grants), as a
  ClusterRole and a ClusterRoleBinding to the entry's ServiceAccount in the install
  namespace. OLM names both `<csv name>-<service account>-<hash of the entry>`: the names
  change with every release and cannot be known in advance (ours hash differently);
- one ServiceAccount per ServiceAccount those entries name;
- each `install.spec.deployments` entry as a Deployment in the install namespace, with the
  CSV's annotations and `olm.targetNamespaces: ""` on its pod template and
  `revisionHistoryLimit: 1`;
- every other manifest of the bundle, namespaced ones moved into the install namespace.

The bundle has no webhook definitions and no APIServices (the operator serves none), so
OLM v1's certificate handling plays no part.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Object = dict[str, Any]

RBAC_GROUP = "rbac.authorization.k8s.io"
CSV_KIND = "ClusterServiceVersion"
ALL_NAMESPACES = "AllNamespaces"


@dataclass(frozen=True)
class Kind:
    group: str
    resource: str
    namespaced: bool

    @property
    def api_prefix(self) -> str:
        return "/api/v1" if not self.group else f"/apis/{self.group}"


# The kinds a registry+v1 bundle may carry besides its CSV (operator-registry's list of
# supported bundle kinds), and what OLM v1 generates.
KINDS: dict[str, Kind] = {
    "CustomResourceDefinition": Kind("apiextensions.k8s.io", "customresourcedefinitions", False),
    "ClusterRole": Kind(RBAC_GROUP, "clusterroles", False),
    "ClusterRoleBinding": Kind(RBAC_GROUP, "clusterrolebindings", False),
    "Role": Kind(RBAC_GROUP, "roles", True),
    "RoleBinding": Kind(RBAC_GROUP, "rolebindings", True),
    "ServiceAccount": Kind("", "serviceaccounts", True),
    "Service": Kind("", "services", True),
    "ConfigMap": Kind("", "configmaps", True),
    "Secret": Kind("", "secrets", True),
    "Deployment": Kind("apps", "deployments", True),
    "NetworkPolicy": Kind("networking.k8s.io", "networkpolicies", True),
    "PodDisruptionBudget": Kind("policy", "poddisruptionbudgets", True),
    "PriorityClass": Kind("scheduling.k8s.io", "priorityclasses", False),
    "PrometheusRule": Kind("monitoring.coreos.com", "prometheusrules", True),
    "ServiceMonitor": Kind("monitoring.coreos.com", "servicemonitors", True),
    "VerticalPodAutoscaler": Kind("autoscaling.k8s.io", "verticalpodautoscalers", True),
    "ConsoleYAMLSample": Kind("console.openshift.io", "consoleyamlsamples", False),
    "ConsoleQuickStart": Kind("console.openshift.io", "consolequickstarts", False),
    "ConsoleCLIDownload": Kind("console.openshift.io", "consoleclidownloads", False),
    "ConsoleLink": Kind("console.openshift.io", "consolelinks", False),
}

NAMESPACES_READ = {"apiGroups": [""], "resources": ["namespaces"],
                   "verbs": ["get", "list", "watch"]}
"""Added to every promoted `permissions` entry in AllNamespaces mode."""
MAX_NAME = 63  # OLM keeps generated names within a label value's length


class RenderError(ValueError):
    """The bundle is not one OLM v1 can install (or this module does not know a kind)."""


@dataclass(frozen=True)
class Rendered:
    objects: list[Object]
    """In the order they can be applied: each role before the bindings that grant it."""
    generated: frozenset[tuple[str, str]]
    """(kind, name) of the objects whose names OLM v1 chooses (unknown in advance)."""


def kind_of(obj: Object) -> Kind:
    try:
        return KINDS[obj["kind"]]
    except KeyError:
        raise RenderError(f"{obj.get('kind')} {obj.get('metadata', {}).get('name')}: not a "
                          "kind a registry+v1 bundle may carry (or not known here)") from None


def render(manifests: Sequence[Object], namespace: str) -> Rendered:
    """The objects OLM v1 applies for the bundle `manifests` (every document of
    bundle/manifests/) installed into `namespace`."""
    csvs = [m for m in manifests if m.get("kind") == CSV_KIND]
    if len(csvs) != 1:
        raise RenderError(f"a bundle has one ClusterServiceVersion, not {len(csvs)}")
    csv = csvs[0]
    _require_all_namespaces(csv)
    strategy = csv["spec"]["install"]["spec"]
    crds = [copy.deepcopy(m) for m in manifests if m.get("kind") == "CustomResourceDefinition"]
    others = [_placed(m, namespace) for m in manifests
              if m.get("kind") not in (CSV_KIND, "CustomResourceDefinition")]
    roles, bindings = _cluster_permissions(csv, strategy, namespace)
    accounts = _service_accounts(strategy, namespace)
    deployments = [_deployment(csv, entry, namespace) for entry in strategy.get("deployments")
                   or []]
    ordered = crds + roles + [o for o in others if o["kind"] in ("ClusterRole", "Role")] \
        + accounts + bindings + [o for o in others if o["kind"] not in ("ClusterRole", "Role")] \
        + deployments
    generated = frozenset((o["kind"], o["metadata"]["name"]) for o in roles + bindings)
    return Rendered(ordered, generated)


def _require_all_namespaces(csv: Object) -> None:
    modes = {m["type"] for m in csv["spec"].get("installModes") or [] if m.get("supported")}
    if ALL_NAMESPACES not in modes:
        raise RenderError(f"the CSV supports {sorted(modes)}; rendered here: AllNamespaces")


def _placed(manifest: Object, namespace: str) -> Object:
    obj = copy.deepcopy(manifest)
    if kind_of(obj).namespaced:
        obj["metadata"]["namespace"] = namespace
    return obj


def _cluster_permissions(csv: Object, strategy: Object, namespace: str,
                         ) -> tuple[list[Object], list[Object]]:
    entries = [copy.deepcopy(e) for e in strategy.get("clusterPermissions") or []]
    for entry in strategy.get("permissions") or []:  # AllNamespaces: promoted
        promoted = copy.deepcopy(entry)
        promoted["rules"] = [*(promoted.get("rules") or []), dict(NAMESPACES_READ)]
        entries.append(promoted)
    roles, bindings = [], []
    for entry in entries:
        account = entry.get("serviceAccountName") or "default"
        name = _unique_name(f"{csv['metadata']['name']}-{account}", entry)
        roles.append({"apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRole",
                      "metadata": {"name": name}, "rules": entry.get("rules") or []})
        bindings.append({
            "apiVersion": f"{RBAC_GROUP}/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": account,
                          "namespace": namespace}]})
    return roles, bindings


def _service_accounts(strategy: Object, namespace: str) -> list[Object]:
    names = {entry.get("serviceAccountName") or "default"
             for key in ("clusterPermissions", "permissions")
             for entry in strategy.get(key) or []}
    return [{"apiVersion": "v1", "kind": "ServiceAccount",
             "metadata": {"name": name, "namespace": namespace}}
            for name in sorted(names - {"default"})]  # OLM does not make `default`


def _deployment(csv: Object, entry: Object, namespace: str) -> Object:
    spec = copy.deepcopy(entry["spec"])
    template = spec.setdefault("template", {}).setdefault("metadata", {})
    template["annotations"] = {**(csv["metadata"].get("annotations") or {}),
                               **(template.get("annotations") or {}),
                               "olm.targetNamespaces": ""}
    spec["revisionHistoryLimit"] = 1
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": entry["name"], "namespace": namespace,
                         "labels": dict(entry.get("label") or {})},
            "spec": spec}


def _unique_name(base: str, entry: Object) -> str:
    digest = hashlib.sha256(json.dumps(entry, sort_keys=True).encode()).hexdigest()[:20]
    return f"{base[:MAX_NAME - len(digest) - 1]}-{digest}"
