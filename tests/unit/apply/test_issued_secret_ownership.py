"""Which Secret cert-manager issued for one of the operator's Certificates
(manager/apply/ownership.py `issued_for`): only that one is deleted with the Certificate;
the live cases run against cert-manager in tests/integration/test_issued_secrets.py."""

from __future__ import annotations

import copy
from typing import Any

from manager.apply.ownership import CERTIFICATE_NAME_ANNOTATION, issued_for
from manager.names import FIELD_MANAGER, MANAGED_BY_LABEL, OPERATOR_NAME

CERT_MANAGER = "cert-manager-certificates-issuing"  # cert-manager v1.20's field manager
LABEL = f"f:{MANAGED_BY_LABEL}"
ANNOTATION = f"f:{CERTIFICATE_NAME_ANNOTATION}"

CERTIFICATE: dict[str, Any] = {
    "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
    "metadata": {"name": "bitwarden-tls-certs", "namespace": "operand"},
    "spec": {"secretName": "bitwarden-tls-certs"}}


def entry(manager: str, *, label: bool = True, annotation: bool = True,
          operation: str = "Apply") -> dict[str, Any]:
    metadata: dict[str, Any] = {}
    if label:
        metadata["f:labels"] = {LABEL: {}, "f:controller.cert-manager.io/fao": {}}
    if annotation:
        metadata["f:annotations"] = {ANNOTATION: {}}
    return {"manager": manager, "operation": operation, "apiVersion": "v1",
            "fieldsType": "FieldsV1", "fieldsV1": {"f:metadata": metadata, "f:data": {}}}


def issued(**changes: Any) -> dict[str, Any]:
    """The Secret as cert-manager writes it for CERTIFICATE, with our secretTemplate."""
    metadata: dict[str, Any] = {
        "name": "bitwarden-tls-certs", "namespace": "operand",
        "labels": {MANAGED_BY_LABEL: OPERATOR_NAME, "controller.cert-manager.io/fao": "true"},
        "annotations": {CERTIFICATE_NAME_ANNOTATION: "bitwarden-tls-certs"},
        "managedFields": [entry(CERT_MANAGER)]}
    metadata.update(changes)
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata}


def test_the_secret_cert_manager_wrote_for_our_certificate_is_its() -> None:
    assert issued_for(issued(), CERTIFICATE)


def test_another_name_or_namespace_is_not() -> None:
    assert not issued_for(issued(name="other-tls"), CERTIFICATE)
    assert not issued_for(issued(namespace="elsewhere"), CERTIFICATE)
    renamed = copy.deepcopy(CERTIFICATE)
    renamed["spec"]["secretName"] = "moved-tls"
    assert not issued_for(issued(), renamed)


def test_without_our_label_it_is_not() -> None:
    """Issued before the Certificate had a secretTemplate, or by a Certificate without one."""
    assert not issued_for(issued(labels={"controller.cert-manager.io/fao": "true"}),
                          CERTIFICATE)


def test_issued_for_another_certificate_it_is_not() -> None:
    annotations = {CERTIFICATE_NAME_ANNOTATION: "user-certificate"}
    assert not issued_for(issued(annotations=annotations), CERTIFICATE)


def test_a_label_added_by_someone_else_does_not_count() -> None:
    """cert-manager wrote the annotation, someone else (kubectl label) our label."""
    fields = [entry(CERT_MANAGER, label=False),
              entry("kubectl-label", annotation=False, operation="Update")]
    assert not issued_for(issued(managedFields=fields), CERTIFICATE)
    fields = [entry(CERT_MANAGER, label=False), entry("someone", annotation=False)]
    assert not issued_for(issued(managedFields=fields), CERTIFICATE)


def test_written_by_the_operator_itself_it_is_not_issued() -> None:
    """Then it is an object the operator applied, pruned by the ordinary rule."""
    assert not issued_for(issued(managedFields=[entry(FIELD_MANAGER)]), CERTIFICATE)
    assert not issued_for(issued(managedFields=[]), CERTIFICATE)
