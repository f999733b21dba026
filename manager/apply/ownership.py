"""Whose an object is: the operator changes only objects it created or was handed over.

An object is the operator's once its field manager has server-side applied it (an `Apply`
entry in `metadata.managedFields`). An object that exists under a name the operator renders
but was never applied by it (a Helm release, an earlier manual install, a copied label) is
foreign: the operator does not modify it unless the administrator opts in to adoption
(`spec.controllerConfig.adoptExistingObjects: "true"`).

Two kinds of object are the operator's without its field manager on them:
- the Secret cert-manager issues for one of the operator's Certificates (`issued_for`): the
  Certificate's `spec.secretTemplate` carries the operator's labels, so cert-manager writes
  the managed-by label into that Secret together with its own `cert-manager.io/certificate-
  name` annotation. cert-manager never deletes it (unless its controller runs with
  `--enable-certificate-owner-ref`, off by default), so pruning and uninstalling delete it
  right after the Certificate that names it, and only then: a Secret that no Certificate of
  the operator's names, or one the label was copied onto by hand, is never the operator's;
- the objects the operator makes for itself in its own namespace (the leader election Lease,
  its monitoring objects) name the operator's Deployment as their owner
  (`operator_owner_reference`), so that Kubernetes' garbage collector deletes them with it
  when the operator is uninstalled.
"""

from __future__ import annotations

from collections.abc import Sequence

from manager.apply.convergence import applied_by
from manager.apply.results import ObjectRef
from manager.client.kube import PARTIAL_METADATA, JsonObject, Kube
from manager.errors import PassError
from manager.names import FIELD_MANAGER, MANAGED_BY_LABEL, OPERATOR_DEPLOYMENT, OPERATOR_NAME

HELM_RELEASE_ANNOTATION = "meta.helm.sh/release-name"
HELM_NAMESPACE_ANNOTATION = "meta.helm.sh/release-namespace"
ADOPT_FIELD = "spec.controllerConfig.adoptExistingObjects"
# cert-manager's annotation on every Secret it issues: the name of the Certificate.
CERTIFICATE_NAME_ANNOTATION = "cert-manager.io/certificate-name"


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


def issued_for(secret: JsonObject, certificate: JsonObject) -> bool:
    """`secret` (metadata suffices) is the one cert-manager issued for `certificate` (read
    whole: its `spec.secretName` counts), which the caller knows to be the operator's.

    The Secret is where the Certificate writes (its namespace, its secretName), carries
    cert-manager's annotation naming the Certificate and the operator's managed-by label,
    and one server-side apply other than the operator's wrote both: cert-manager's, which
    copies the label from the Certificate's secretTemplate. A label added by hand, or a
    Secret another Certificate writes, does not count."""
    metadata = secret.get("metadata") or {}
    owner = certificate.get("metadata") or {}
    if (metadata.get("namespace"), metadata.get("name")) != (
            owner.get("namespace"), (certificate.get("spec") or {}).get("secretName")):
        return False
    labels = metadata.get("labels") or {}
    annotations = metadata.get("annotations") or {}
    if labels.get(MANAGED_BY_LABEL) != OPERATOR_NAME \
            or annotations.get(CERTIFICATE_NAME_ANNOTATION) != owner.get("name"):
        return False
    return any(_writes_label_and_annotation(entry.get("fieldsV1") or {})
               for entry in metadata.get("managedFields") or []
               if entry.get("operation") == "Apply" and entry.get("manager") != FIELD_MANAGER
               and not entry.get("subresource"))


def _writes_label_and_annotation(fields: JsonObject) -> bool:
    written = fields.get("f:metadata") or {}
    return (f"f:{MANAGED_BY_LABEL}" in (written.get("f:labels") or {})
            and f"f:{CERTIFICATE_NAME_ANNOTATION}" in (written.get("f:annotations") or {}))


async def operator_owner_reference(kube: Kube, namespace: str) -> JsonObject | None:
    """The operator's Deployment in `namespace` as an owner reference, or None where it does
    not exist (the operator runs outside the cluster: a local run, a test). No
    blockOwnerDeletion: the owner is deleted at once, and what it owns follows."""
    deployment = await kube.get(
        f"/apis/apps/v1/namespaces/{namespace}/deployments/{OPERATOR_DEPLOYMENT}",
        accept=PARTIAL_METADATA)
    uid = ((deployment or {}).get("metadata") or {}).get("uid")
    if not uid:
        return None
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": OPERATOR_DEPLOYMENT,
            "uid": uid}
