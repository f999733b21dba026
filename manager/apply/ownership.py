"""Whose an object is: the operator changes only objects it created or was handed over.

An object is the operator's once its field manager has server-side applied it (an `Apply`
entry in `metadata.managedFields`). An object that exists under a name the operator renders
but was never applied by it (a Helm release, an earlier manual install, a copied label) is
foreign: the operator does not modify it unless the administrator opts in to adoption
(`spec.controllerConfig.adoptExistingObjects: "true"`).
"""

from __future__ import annotations

from collections.abc import Sequence

from manager.apply.convergence import applied_by
from manager.apply.results import ObjectRef
from manager.client.kube import JsonObject
from manager.errors import PassError
from manager.names import FIELD_MANAGER, MANAGED_BY_LABEL

HELM_RELEASE_ANNOTATION = "meta.helm.sh/release-name"
HELM_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"
ADOPT_FIELD = "spec.controllerConfig.adoptExistingObjects"


def is_foreign(live: JsonObject | None, field_manager: str = FIELD_MANAGER) -> bool:
    """It exists, and the operator never applied it."""
    return live is not None and applied_by(live, field_manager) is None


def managed_by(live: JsonObject) -> str:
    """Who manages `live`, as a message says it: the Helm release, else the managed-by label,
    else the field managers recorded in managedFields."""
    metadata = live.get("metadata", {})
    annotations = metadata.get("annotations") or {}
    managers = sorted({entry["manager"] for entry in metadata.get("managedFields") or []
                       if entry.get("manager")})
    by_fields = f"field managers {', '.join(managers)}" if managers else "no field manager"
    release = annotations.get(HELM_RELEASE_ANNOTATION)
    if release:
        namespace = annotations.get(HELM_NAMESPACE_ANNOTATION)
        return f"Helm release {f'{namespace}/' if namespace else ''}{release} ({by_fields})"
    label = (metadata.get("labels") or {}).get(MANAGED_BY_LABEL)
    if label:
        return f"{MANAGED_BY_LABEL}={label} ({by_fields})"
    return by_fields if managers else "an unknown owner (no field manager recorded)"


class ForeignObjectsError(PassError):
    """Objects the pass would write exist and are not the operator's; nothing was written."""

    reason = "ObjectNotOwned"

    def __init__(self, foreign: Sequence[tuple[ObjectRef, JsonObject]]):
        described = "; ".join(f"{ref} exists and is managed by {managed_by(live)}"
                              for ref, live in foreign)
        helm = any((live.get("metadata", {}).get("annotations") or {})
                   .get(HELM_RELEASE_ANNOTATION) for _, live in foreign)
        removal = ("remove them (helm uninstall the release, or delete them)" if helm
                   else "delete them")
        super().__init__(
            f"{described}. The operator did not create {'it' if len(foreign) == 1 else 'them'} "
            f"and changes nothing until this is resolved: {removal}, or set {ADOPT_FIELD}: "
            '"true" to have the operator adopt and manage them (an Event records each)')
        self.refs = [ref for ref, _ in foreign]
