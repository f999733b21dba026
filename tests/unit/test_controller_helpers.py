"""Pure parts of manager.controllers: what wakes a pass (watch fingerprints, dependency
watches), how a failure is classified, when pruning may run, and the per-controller states
the ESM status is built from."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.apply.results import Action, ObjectRef
from manager.config import ConfigError, EffectiveConfig, OperatorEnvironment, effective_config
from manager.constants import FIELD_MANAGER
from manager.controllers import events, status
from manager.controllers.crd_annotator import (
    INJECT_CA_FROM,
    AnnotatorReport,
    _owns_annotation,
    is_operand_crd,
)
from manager.controllers.preflight import MissingDependencyError, dependency_watches
from manager.controllers.reconciler import (
    PassReport,
    _annotator_state,
    _api_outcome,
    _config_outcome,
    _entry_message,
    _esm_state,
    _previous_state,
    child_watches,
)
from manager.controllers.status import Outcome, OutcomeKind
from manager.controllers.watches import WatchSpec, fingerprint
from manager.kube import ApiError, JsonObject, own_namespace
from manager.render import render_operand


def config(app: dict[str, Any] | None = None, namespace: str | None = None) -> EffectiveConfig:
    spec: dict[str, Any] = {"appConfig": app} if app else {}
    if namespace:
        spec["controllerConfig"] = {"namespace": namespace}
    return effective_config(ExternalSecretsConfigSpec.model_validate(spec),
                            ExternalSecretsManagerSpec.model_validate({}),
                            OperatorEnvironment.from_environ({}))


CERT_MANAGER = {"certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"}}}


# --- watches.fingerprint: what counts as a change -------------------------------------------


def metadata(**changes: Any) -> JsonObject:
    base: JsonObject = {"name": "external-secrets", "uid": "u1", "resourceVersion": "10",
                        "generation": 2, "labels": {"a": "1", "b": "2"},
                        "annotations": {"x": "y"}}
    return {**base, **changes}


def print_of(meta: JsonObject, status: JsonObject | None = None, **spec: Any) -> object:
    obj = {"metadata": meta, **({"status": status} if status is not None else {})}
    return fingerprint(obj, WatchSpec("apps/v1", "Deployment", **spec))


def test_status_only_churn_of_a_kind_with_generation_is_ignored() -> None:
    assert print_of(metadata()) == print_of(metadata(resourceVersion="11"))


@pytest.mark.parametrize("changes", [
    {"generation": 3},
    {"labels": {"a": "1"}},
    {"annotations": {}},
    {"deletionTimestamp": "2026-01-01T00:00:00Z"},
], ids=["spec", "labels", "annotations", "deletion"])
def test_changes_a_pass_cares_about_are_seen(changes: JsonObject) -> None:
    assert print_of(metadata()) != print_of(metadata(**changes))


def test_label_order_is_not_a_change() -> None:
    assert print_of(metadata()) == print_of(metadata(labels={"b": "2", "a": "1"}))


def test_without_a_generation_any_new_version_is_a_change() -> None:
    config_map = metadata()
    del config_map["generation"]
    assert print_of(config_map) != print_of({**config_map, "resourceVersion": "11"})


def test_any_change_watches_see_status_changes_too() -> None:
    # A CRD becoming Established changes its status only.
    assert print_of(metadata(), any_change=True) != \
        print_of(metadata(resourceVersion="11"), any_change=True)


def rollout(available: int, **extra: Any) -> JsonObject:
    condition = {"type": "Available", "status": "True" if available else "False",
                 "reason": "MinimumReplicasAvailable", "lastUpdateTime": extra.pop("at", "t1"),
                 "message": extra.pop("message", "")}
    return {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
            "availableReplicas": available, "conditions": [condition], **extra}


def test_status_watches_see_a_deployment_becoming_available() -> None:
    assert print_of(metadata(), rollout(0), with_status=True) != \
        print_of(metadata(resourceVersion="11"), rollout(1), with_status=True)


def test_status_watches_ignore_timestamps_and_messages() -> None:
    assert print_of(metadata(), rollout(1), with_status=True) == \
        print_of(metadata(resourceVersion="11"), rollout(1, at="t2", message="now"),
                 with_status=True)


def test_the_kinds_whose_status_decides_ready_are_watched_whole() -> None:
    watched = {spec.kind for spec in child_watches(render_operand(config(CERT_MANAGER)))
               if spec.with_status}
    assert watched == {"Deployment", "Certificate", "ValidatingWebhookConfiguration"}


# --- preflight: the watches that end a wait for a dependency --------------------------------


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
    assert WatchSpec("v1", "Secret", "es", field_selector="metadata.name=bw-tls") in specs


def test_a_bitwarden_certificate_we_issue_is_no_dependency() -> None:
    app = {**CERT_MANAGER, "bitwardenSecretManagerProvider": {"enabled": "true"},
           "certManagerConfig": {**CERT_MANAGER["certManagerConfig"],
                                 "addInjectorAnnotations": "true"}}
    assert not any(spec.kind == "Secret" for spec in dependency_watches(config(app)))


def test_without_the_ca_injector_the_issued_webhook_secret_is_watched() -> None:
    # Its ca.crt becomes the webhooks' caBundle (controllers/facts.py).
    secrets = {spec.field_selector for spec in dependency_watches(config(CERT_MANAGER))
               if spec.kind == "Secret"}
    assert secrets == {"metadata.name=external-secrets-webhook-cm"}


def test_a_missing_dependency_names_the_field() -> None:
    error = MissingDependencyError("IssuerNotFound", "spec.appConfig.certManagerConfig.issuerRef",
                                   'Issuer "ca" not found')
    assert str(error) == 'spec.appConfig.certManagerConfig.issuerRef: Issuer "ca" not found'


# --- reconciler: watches on children --------------------------------------------------------


def test_children_are_watched_by_our_label_in_every_namespace_and_cached() -> None:
    desired = render_operand(config(namespace="es"))
    specs = child_watches(desired)
    assert {(spec.api_version, spec.kind) for spec in specs} == set(desired.kinds())
    for spec in specs:
        assert spec.label_selector == "app.kubernetes.io/managed-by=external-secrets-operator"
        assert spec.namespace is None  # what a moved operand left behind is found too
        assert spec.cached


# --- reconciler: classifying a failed pass --------------------------------------------------

REASON_PATTERN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")


@pytest.mark.parametrize(("status_code", "kind", "reason"), [
    (0, OutcomeKind.RETRYING, "APIError"),       # the server was not reached
    (503, OutcomeKind.RETRYING, "APIError"),
    (409, OutcomeKind.RETRYING, "APIError"),
    (429, OutcomeKind.RETRYING, "APIError"),
    (404, OutcomeKind.RETRYING, "APIError"),     # an API went away mid-pass
    (403, OutcomeKind.DEGRADED, "Forbidden"),
    (401, OutcomeKind.DEGRADED, "Forbidden"),
    (422, OutcomeKind.DEGRADED, "ApplyRejected"),
    (400, OutcomeKind.DEGRADED, "ApplyRejected"),
])
def test_api_failures_are_retried_or_reported(status_code: int, kind: OutcomeKind,
                                              reason: str) -> None:
    outcome = _api_outcome(ApiError(status_code, "R", "m"), "apply Deployment es/x")
    assert (outcome.kind, outcome.reason) == (kind, reason)
    assert outcome.message.startswith("apply Deployment es/x")
    assert REASON_PATTERN.match(outcome.reason)


def test_a_degraded_api_failure_says_what_to_fix() -> None:
    assert "RBAC" in _api_outcome(ApiError(403, "Forbidden", "m"), "t").message
    assert "ExternalSecretsConfig" in _api_outcome(ApiError(422, "Invalid", "m"), "t").message


@pytest.mark.parametrize(("field", "reason", "names"), [
    ("spec.globalConfig.labels", "InvalidGlobalConfig", "ExternalSecretsManager cluster"),
    ("env.RELATED_IMAGE_EXTERNAL_SECRETS", "InvalidOperatorEnvironment", "operator Deployment"),
    ("spec.appConfig.logLevel", "InvalidConfiguration", "spec.appConfig.logLevel"),
])
def test_a_config_error_is_degraded_and_names_its_source(field: str, reason: str,
                                                         names: str) -> None:
    outcome = _config_outcome(ConfigError(field, "is wrong"))
    assert (outcome.kind, outcome.reason) == (OutcomeKind.DEGRADED, reason)
    assert names in outcome.message
    assert field in outcome.message
    assert "is wrong" in outcome.message


def test_only_outcomes_other_than_ready_and_failed_annotations_are_retried() -> None:
    ready = Outcome(OutcomeKind.READY, "Reconciled", "")
    assert not PassReport(ready, frozenset()).needs_retry
    assert not PassReport(None, frozenset()).needs_retry  # no ESC: nothing to retry
    assert PassReport(ready, frozenset(), annotator_failed=True).needs_retry
    for kind in (OutcomeKind.DEGRADED, OutcomeKind.RETRYING):
        assert PassReport(Outcome(kind, "R", ""), frozenset()).needs_retry


# --- reconciler: ESM controller states ------------------------------------------------------


def esm_with(entries: list[JsonObject], generation: int = 3) -> JsonObject:
    return {"metadata": {"name": "cluster", "generation": generation},
            "status": {"controllerStatuses": entries}}


def test_a_stored_controller_entry_reads_back_unchanged() -> None:
    # Carrying an entry over from the stored status must not cause a status write.
    state = status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, False, "waiting", 5)
    esm = esm_with([state.as_status()])
    previous = _previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
    assert previous is not None
    assert previous.as_status() == state.as_status()
    assert _previous_state(esm, status.CONTROLLER_ESC) is None
    assert _entry_message(esm, status.CONTROLLER_CRD_ANNOTATOR) == "waiting"
    assert _entry_message(esm, status.CONTROLLER_ESC) is None


def test_the_esm_entry_reports_a_global_config_problem() -> None:
    esm = esm_with([])
    fine = _esm_state(esm, None)
    assert (fine.name, fine.observed_generation) == (status.CONTROLLER_ESM, 3)
    assert {c.type: c.status for c in fine.conditions} == {"Ready": "True", "Degraded": "False"}
    broken = _esm_state(esm, "spec.globalConfig.labels: reserved")
    assert {c.type: (c.status, c.message) for c in broken.conditions} == {
        "Ready": ("False", "spec.globalConfig.labels: reserved"),
        "Degraded": ("True", "spec.globalConfig.labels: reserved")}


def test_the_annotator_entry_follows_its_report() -> None:
    esm = esm_with([])
    in_es = config(namespace="es")
    active = _annotator_state(esm, AnnotatorReport(True, 2, ()), in_es)
    ready = {c.type: c for c in active.conditions}["Ready"]
    assert ready.status == "True"
    assert ready.message == f"2 operand CRDs carry {INJECT_CA_FROM}: es/external-secrets-webhook"
    failed = _annotator_state(esm, ApiError(503, "ServiceUnavailable", "later"), in_es)
    assert {c.type: c.status for c in failed.conditions} == {"Ready": "False",
                                                             "Degraded": "True"}


def test_the_annotator_entry_is_kept_when_the_pass_stopped_early() -> None:
    earlier = status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True, "inactive", None)
    kept = _annotator_state(esm_with([earlier.as_status()]), None, None)
    assert kept.as_status() == earlier.as_status()
    first = _annotator_state(esm_with([]), None, None)
    assert {c.type: c.status for c in first.conditions}["Ready"] == "False"


# --- crd_annotator --------------------------------------------------------------------------


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


# --- events ---------------------------------------------------------------------------------


def test_events_are_posted_for_writes_only_with_a_readable_message() -> None:
    assert set(events.REASONS) == {Action.CREATED, Action.UPDATED, Action.ADOPTED,
                                   Action.DELETED}
    assert events.REASONS[Action.ADOPTED] == "Adopted"
    ref = ObjectRef("apps/v1", "Deployment", "es", "external-secrets")
    assert f"{Action.DELETED} {ref}" == "deleted Deployment es/external-secrets"


def test_event_times_are_rfc3339_utc() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", events.now_rfc3339())


def test_events_go_to_the_operator_namespace(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POD_NAMESPACE", "external-secrets-operator")
    assert events.events_namespace() == "external-secrets-operator"
    monkeypatch.delenv("POD_NAMESPACE")
    assert events.events_namespace() == "default"


def test_the_operators_namespace_comes_from_the_environment_or_its_service_account(
        tmp_path: Path) -> None:
    namespace_file = tmp_path / "namespace"
    assert own_namespace({"POD_NAMESPACE": "ops"}, namespace_file) == "ops"
    assert own_namespace({}, namespace_file) is None  # not in a pod
    namespace_file.write_text("eso-operator\n")
    assert own_namespace({}, namespace_file) == "eso-operator"
    assert own_namespace({"POD_NAMESPACE": ""}, namespace_file) == "eso-operator"
