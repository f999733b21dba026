"""The ESC's `status.relatedObjects`: the objects `oc adm inspect esc/cluster` collects with it.

`oc adm inspect` (and must-gather, which runs it) follows `status.relatedObjects` of any
resource it inspects: entries of {group, resource, namespace, name}, as in OpenShift's
ClusterOperator. An empty name would mean "every object of that resource, in every
namespace", so every entry names one object. A Namespace entry makes inspect collect the
whole namespace (pods and their logs included).

Pure, and a function of the rendered objects and the operator's environment only: the list
does not move at steady state, so the status writer, which compares, sends nothing.
"""

from __future__ import annotations

from typing import Final, NamedTuple

from manager.client.kube import JsonObject
from manager.config import OperatorEnvironment
from manager.names import ESM_PLURAL, GROUP, OPERAND_CRD_NAMES, SINGLETON_NAME
from manager.render.state import DesiredState

CRD: Final = ("apiextensions.k8s.io", "customresourcedefinitions")
NAMESPACE: Final = ("", "namespaces")
OPERATOR_CONDITION: Final = ("operators.coreos.com", "operatorconditions")
RENDERED_KINDS: Final = {
    "Deployment": ("apps", "deployments"),
    "ValidatingWebhookConfiguration": ("admissionregistration.k8s.io",
                                       "validatingwebhookconfigurations"),
    "MutatingWebhookConfiguration": ("admissionregistration.k8s.io",
                                     "mutatingwebhookconfigurations"),
}
"""The rendered kinds listed besides the operand namespace: what runs, and what the API
server calls on every write of the operand's resources."""


class Related(NamedTuple):
    group: str
    resource: str
    namespace: str  # "" for a cluster-scoped object
    name: str

    def as_status(self) -> JsonObject:
        entry: JsonObject = {"group": self.group, "resource": self.resource, "name": self.name}
        if self.namespace:
            entry["namespace"] = self.namespace
        return entry


def _operator_side(environment: OperatorEnvironment) -> set[Related]:
    """What exists whether the operand runs or not: the operand CRDs, the ESM and, when the
    operator knows them, its namespace and OLM's OperatorCondition there."""
    found = {Related(*CRD, "", name) for name in OPERAND_CRD_NAMES}
    found.add(Related(GROUP, ESM_PLURAL, "", SINGLETON_NAME))
    own = environment.own_namespace
    if own:
        found.add(Related(*NAMESPACE, "", own))
        if environment.operator_condition:
            found.add(Related(*OPERATOR_CONDITION, own, environment.operator_condition))
    return found


def related_objects(desired: DesiredState | None,
                    environment: OperatorEnvironment) -> list[JsonObject]:
    """status.relatedObjects, sorted. `desired` None: the operand is removed, only the
    operator's side is listed."""
    found = _operator_side(environment)
    if desired is not None:
        found.add(Related(*NAMESPACE, "", desired.namespace))
        found.update(Related(*RENDERED_KINDS[obj["kind"]], obj["metadata"].get("namespace", ""),
                             obj["metadata"]["name"])
                     for obj in desired.objects() if obj["kind"] in RENDERED_KINDS)
    return [entry.as_status() for entry in sorted(found)]
