"""The CRD annotator's ownership of its annotation (sidetasks/crd_annotator.py)."""

from __future__ import annotations

import pytest

from manager.client.kube import JsonObject
from manager.names import FIELD_MANAGER, is_operand_crd
from manager.reporting.esm_status import AnnotatorReport
from manager.sidetasks.crd_annotator import INJECT_CA_FROM, _owns_annotation


@pytest.mark.parametrize(("name", "operand"), [
    ("externalsecrets.external-secrets.io", True),
    ("clustersecretstores.external-secrets.io", True),
    ("passwords.generators.external-secrets.io", True),
    ("externalsecretsconfigs.operator.openshift.io", False),
    ("certificates.cert-manager.io", False),
    ("things.evil-external-secrets.io", False),
    ("things.external-secrets.io.example.com", False),
])
def test_only_crds_of_the_operand_groups_are_annotated(name: str, operand: bool) -> None:
    assert is_operand_crd(name) is operand


def crd(managers: list[tuple[str, str, JsonObject]]) -> JsonObject:
    return {"metadata": {"name": "externalsecrets.external-secrets.io",
                         "managedFields": [{"manager": manager, "operation": operation,
                                            "fieldsType": "FieldsV1", "fieldsV1": fields}
                                           for manager, operation, fields in managers]}}


ANNOTATION_FIELDS = {"f:metadata": {"f:annotations": {f"f:{INJECT_CA_FROM}": {}}}}


def test_the_annotation_is_ours_only_if_we_applied_it() -> None:
    assert _owns_annotation(crd([(FIELD_MANAGER, "Apply", ANNOTATION_FIELDS)]), FIELD_MANAGER)
    # cert-manager's own users may set it: then it is not ours to release.
    assert not _owns_annotation(crd([("kubectl-edit", "Update", ANNOTATION_FIELDS)]),
                                FIELD_MANAGER)
    assert not _owns_annotation(crd([(FIELD_MANAGER, "Apply", {"f:metadata": {}})]),
                                FIELD_MANAGER)
    assert not _owns_annotation(crd([]), FIELD_MANAGER)


def test_the_annotator_report_explains_an_inactive_annotator() -> None:
    message = AnnotatorReport(False, 0, ()).message("es")
    assert message.startswith("inactive")
    assert "addInjectorAnnotations" in message
