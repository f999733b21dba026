"""status.relatedObjects (manager/reporting/related.py): what `oc adm inspect esc/cluster`
follows, from the rendered operand and the operator's environment."""

from __future__ import annotations

from typing import Any

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsConfigStatus
from manager.config import OperatorEnvironment, effective_config
from manager.names import OPERAND_CRD_NAMES
from manager.render import render_operand
from manager.reporting.status import Outcome, OutcomeKind, esc_fields, esc_status_update
from tests.unit.reporting.test_status import status_after

READY = Outcome(OutcomeKind.READY, "Reconciled", "ok", True)
PLAIN_ENV = OperatorEnvironment.from_environ({})
OLM_ENV = OperatorEnvironment.from_environ(
    {"OPERATOR_CONDITION_NAME": "external-secrets-operator.v1.0.0"},
    own_namespace="external-secrets-operator")
CRDS = [{"group": "apiextensions.k8s.io", "resource": "customresourcedefinitions", "name": n}
        for n in sorted(OPERAND_CRD_NAMES)]
ESM = {"group": "operator.openshift.io", "resource": "externalsecretsmanagers",
       "name": "cluster"}


def related(spec: dict[str, Any] | None, env: OperatorEnvironment) -> list[dict[str, Any]]:
    config = effective_config(ExternalSecretsConfigSpec.model_validate(spec or {}), None, env)
    fields = esc_fields(config, READY, render_operand(config), env)
    return fields["relatedObjects"]  # type: ignore[return-value]


def operand(related_objects: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The entries besides the CRDs and the ESM, as (resource, namespace, name)."""
    return [(e["resource"], e.get("namespace", ""), e["name"]) for e in related_objects
            if e["resource"] not in ("customresourcedefinitions", "externalsecretsmanagers")]


def deployment(namespace: str, name: str) -> tuple[str, str, str]:
    return ("deployments", namespace, name)


def test_a_default_config_lists_the_namespace_deployments_webhooks_crds_and_esm() -> None:
    found = related(None, PLAIN_ENV)
    assert operand(found) == [
        ("namespaces", "", "external-secrets"),
        ("validatingwebhookconfigurations", "", "externalsecret-validate"),
        ("validatingwebhookconfigurations", "", "secretstore-validate"),
        deployment("external-secrets", "external-secrets"),
        deployment("external-secrets", "external-secrets-cert-controller"),
        deployment("external-secrets", "external-secrets-webhook"),
    ]
    assert [e for e in found if e["resource"] == "customresourcedefinitions"] == CRDS
    assert len(CRDS) == 24  # external-secrets v2.9.0: 6 external-secrets.io, 18 generators
    assert ESM in found
    # Sorted by group, resource, namespace, name; cluster-scoped entries carry no namespace.
    keys = [(e["group"], e["resource"], e.get("namespace", ""), e["name"]) for e in found]
    assert keys == sorted(keys)
    assert len(set(keys)) == len(keys)
    assert all("namespace" not in e for e in found if e["resource"] != "deployments")
    ExternalSecretsConfigStatus.model_validate({"relatedObjects": found})  # within the CRD


def test_bitwarden_cert_manager_and_a_namespace_change_the_list() -> None:
    spec = {"controllerConfig": {"namespace": "eso"},
            "appConfig": {"operatingNamespace": "team-a",
                          "bitwardenSecretManagerProvider": {"enabled": "true",
                                                             "secretRef": {"name": "bw-tls"}},
                          "certManagerConfig": {"enabled": "true",
                                                "issuerRef": {"name": "ca", "kind": "Issuer"}}}}
    found = operand(related(spec, PLAIN_ENV))
    assert ("namespaces", "", "eso") in found
    assert [e for e in found if e[0] == "deployments"] == [
        deployment("eso", "bitwarden-sdk-server"), deployment("eso", "external-secrets"),
        deployment("eso", "external-secrets-webhook")]  # cert-manager: no cert-controller
    # The operating namespace holds the users' objects, not the stack's: not listed.
    assert not [e for e in found if "team-a" in e]


def test_under_olm_the_operator_namespace_and_its_operator_condition_are_listed() -> None:
    found = operand(related(None, OLM_ENV))
    assert ("namespaces", "", "external-secrets-operator") in found
    assert ("operatorconditions", "external-secrets-operator",
            "external-secrets-operator.v1.0.0") in found
    # Without OPERATOR_CONDITION_NAME (OLM v1, or no OLM): the namespace alone.
    no_olm = OperatorEnvironment.from_environ({}, own_namespace="external-secrets-operator")
    without = operand(related(None, no_olm))
    assert ("namespaces", "", "external-secrets-operator") in without
    assert not [e for e in without if e[0] == "operatorconditions"]


def test_the_list_stays_at_steady_state_and_shrinks_to_the_operator_side_when_removed() -> None:
    config = effective_config(None, None, OLM_ENV)
    fields = esc_fields(config, READY, render_operand(config), OLM_ENV)
    stored = status_after({}, esc_status_update({}, READY, 1, fields, "2025-01-01T00:00:00Z"))
    again = esc_fields(config, READY, render_operand(config), OLM_ENV)
    assert esc_status_update(stored, READY, 1, again, "2025-01-01T00:01:00Z") is None
    # A pass that rendered nothing (a failure before rendering) keeps what was recorded.
    assert "relatedObjects" not in esc_fields(config, READY, None, OLM_ENV)
    removed = Outcome(OutcomeKind.REMOVED, "Removed", "gone")
    left = esc_fields(None, removed, None, OLM_ENV)["relatedObjects"]
    assert isinstance(left, list)
    # The operand is gone (its namespace stays, unmanaged); the operator's side remains.
    assert operand(left) == [("namespaces", "", "external-secrets-operator"),
                             ("operatorconditions", "external-secrets-operator",
                              "external-secrets-operator.v1.0.0")]
    assert [e for e in left if e["resource"] == "customresourcedefinitions"] == CRDS
    assert ESM in left
