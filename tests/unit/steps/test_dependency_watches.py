"""The watches that end a wait for a dependency (steps/preflight.py)."""

from __future__ import annotations

from typing import Any

from manager.apply.results import ObjectRef
from manager.client.watch_spec import WatchSpec
from manager.config import EffectiveConfig
from manager.render import render_operand
from manager.steps.preflight import (
    CALLING_OUT,
    MissingDependencyError,
    _bitwarden_alternative,
    _cert_manager_dependants,
    dependency_watches,
    deployments,
)
from tests.unit.configs import CERT_MANAGER, config


def test_without_dependencies_only_the_arrival_of_crds_is_watched() -> None:
    names = {"certificates.cert-manager.io", "externalsecrets.external-secrets.io",
             "secretstores.external-secrets.io"}
    assert dependency_watches(config()) == {
        WatchSpec("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                  field_selector=f"metadata.name={name}", any_change=True) for name in names}


def test_a_namespaced_issuer_is_watched_by_name_in_the_operand_namespace() -> None:
    specs = dependency_watches(config(CERT_MANAGER, namespace="es"))
    assert WatchSpec("cert-manager.io/v1", "Issuer", "es",
                     field_selector="metadata.name=ca") in specs
    assert WatchSpec("apiextensions.k8s.io/v1", "CustomResourceDefinition",
                     field_selector="metadata.name=issuers.cert-manager.io",
                     any_change=True) in specs


def test_a_cluster_issuer_is_watched_cluster_wide() -> None:
    app = {"certManagerConfig": {"enabled": "true",
                                 "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}
    specs = dependency_watches(config(app, namespace="es"))
    assert WatchSpec("cert-manager.io/v1", "ClusterIssuer", None,
                     field_selector="metadata.name=ca") in specs
    assert not any(spec.kind == "Issuer" for spec in specs)


def test_a_referenced_bitwarden_secret_is_watched_by_name() -> None:
    app = {"bitwardenSecretManagerProvider": {"enabled": "true",
                                              "secretRef": {"name": "bw-tls"}}}
    specs = dependency_watches(config(app, namespace="es"))
    assert WatchSpec("v1", "Secret", "es", field_selector="metadata.name=bw-tls",
                     any_change=True) in specs


def test_a_bitwarden_certificate_we_issue_is_watched_for_its_renewals() -> None:
    # No dependency (preflight does not wait for it), but bitwarden-sdk-server loads it once:
    # each renewal must reach the pass that rolls its pods.
    app = {**CERT_MANAGER, "bitwardenSecretManagerProvider": {"enabled": "true"},
           "certManagerConfig": {**CERT_MANAGER["certManagerConfig"],
                                 "addInjectorAnnotations": "true"}}
    secrets = {(spec.field_selector, spec.any_change)
               for spec in dependency_watches(config(app)) if spec.kind == "Secret"}
    assert secrets == {("metadata.name=bitwarden-tls-certs", True),
                       ("metadata.name=external-secrets-webhook-cm", True)}


def test_the_issued_webhook_secret_is_watched() -> None:
    # Its ca.crt becomes the webhooks' caBundle without the CA injector (steps/facts.py),
    # and is what the caBundle must include with it (readiness.py).
    secrets = {spec.field_selector for spec in dependency_watches(config(CERT_MANAGER))
               if spec.kind == "Secret"}
    assert secrets == {"metadata.name=external-secrets-webhook-cm"}


def test_a_missing_dependency_names_the_field() -> None:
    error = MissingDependencyError("IssuerNotFound", "spec.appConfig.certManagerConfig.issuerRef",
                                   'Issuer "ca" not found', subject="Issuer es/ca",
                                   inspect="kubectl get issuers -n es")
    assert str(error) == 'spec.appConfig.certManagerConfig.issuerRef: Issuer "ca" not found'


def test_a_held_back_problem_names_what_waits_and_that_the_rest_is_applied() -> None:
    error = MissingDependencyError("TrustedCABundleNotFound", "spec.appConfig.trustedCABundle",
                                   "not found", subject="ConfigMap es/ca", inspect="kubectl")
    refs = [ObjectRef("apps/v1", "Deployment", "es", f"d{i}") for i in range(5)]
    assert str(error.holding(refs[:1])) == ("spec.appConfig.trustedCABundle: not found. Held "
                                            "back until then: Deployment es/d0; everything "
                                            "else is applied")
    assert "Deployment es/d2 and 2 more; everything" in str(error.holding(refs))
    assert error.holding(refs).reason == error.reason


def _held(config: EffectiveConfig, holds: Any) -> set[tuple[str, str]]:
    return {(ref.kind, ref.name) for ref in map(ObjectRef.of, render_operand(config).objects())
            if holds(ref)}


def test_a_missing_ca_or_secret_holds_only_the_deployments_that_mount_it() -> None:
    bitwarden = {"bitwardenSecretManagerProvider": {"enabled": "true",
                                                    "secretRef": {"name": "tls"}}}
    assert _held(config(bitwarden), deployments(*CALLING_OUT)) == {
        ("Deployment", "external-secrets"), ("Deployment", "bitwarden-sdk-server")}
    assert _held(config(bitwarden), deployments("bitwarden")) == {
        ("Deployment", "bitwarden-sdk-server")}


def test_missing_cert_manager_holds_what_would_switch_to_its_certificate() -> None:
    settings = config(CERT_MANAGER)
    assert _held(settings, _cert_manager_dependants(settings)) == {
        ("Certificate", "external-secrets-webhook"), ("Deployment", "external-secrets-webhook"),
        ("ValidatingWebhookConfiguration", "externalsecret-validate"),
        ("ValidatingWebhookConfiguration", "secretstore-validate")}


def test_the_bitwarden_message_suggests_only_what_the_api_server_accepts() -> None:
    # Without cert-manager, removing secretRef is refused (the CRD's bitwarden rule), and
    # cert-manager cannot be switched on where certManagerConfig says "false".
    without = _bitwarden_alternative(config())
    assert "secretRef" not in without
    assert 'enabled: "false"' in without
    assert "remove secretRef" in _bitwarden_alternative(config(CERT_MANAGER))
