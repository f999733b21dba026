"""Pure parts of the pass and the runtime (manager/steps, reporting, runtime): what wakes a
pass (watch fingerprints, dependency watches), how a failure is classified, when pruning may
run, and the per-controller states the ESM status is built from."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any, cast

import pytest

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.apply.cache import ObjectCache
from manager.apply.discovery import Discovery
from manager.apply.ownership import ForeignObjectsError
from manager.apply.results import Action, ObjectError, ObjectRef, ObjectResult
from manager.client.kube import ApiError, JsonObject, Kube, own_namespace
from manager.client.watch_spec import WatchSpec
from manager.config import ConfigError, EffectiveConfig, OperatorEnvironment, effective_config
from manager.names import FIELD_MANAGER, is_operand_crd
from manager.render import render_operand
from manager.reporting import esm_status, events, failures, pass_events, status
from manager.reporting.esm_status import AnnotatorReport
from manager.reporting.failures import api_outcome, config_outcome, failed_outcome
from manager.reporting.status import Outcome, OutcomeKind
from manager.runtime.pass_watches import CHILD_WATCHES, operand_pod_watch
from manager.runtime.reconciler import PassReport, _recheck_in
from manager.runtime.watches import fingerprint
from manager.sidetasks.crd_annotator import INJECT_CA_FROM, _owns_annotation
from manager.steps.facts import ClusterFacts
from manager.steps.preflight import (
    CALLING_OUT,
    MissingDependencyError,
    _bitwarden_alternative,
    _cert_manager_dependants,
    dependency_watches,
    deployments,
)


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


def pod_print(status: JsonObject, **meta: Any) -> object:
    obj = {"metadata": metadata(**meta), "status": status}
    return fingerprint(obj, WatchSpec("v1", "Pod", "es", with_status=True))


def waiting_pod(reason: str, message: str = "", restarts: int = 0, **extra: Any) -> JsonObject:
    return {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": extra.get("at", "t1")},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
         "message": extra.get("ready_message", "containers with unready status: [c]")}],
            "containerStatuses": [{"name": "c", "ready": False, "restartCount": restarts,
                                   "state": {"waiting": {"reason": reason,
                                                         "message": message}}}]}


def test_pod_watches_see_what_the_ready_message_reports_and_nothing_else() -> None:
    base = pod_print(waiting_pod("ContainerCreating"))
    # Kubelet writes that say nothing new (timestamps, the Ready condition's message, a new
    # resourceVersion) are ignored...
    assert base == pod_print(waiting_pod("ContainerCreating", at="t2", ready_message="x"),
                             resourceVersion="11")
    # ...a new waiting reason or message, a restart, a scheduling verdict are not.
    assert base != pod_print(waiting_pod("ErrImagePull"))
    assert base != pod_print(waiting_pod("ContainerCreating", "pulling"))
    assert base != pod_print(waiting_pod("ContainerCreating", restarts=1))
    unschedulable = waiting_pod("ContainerCreating")
    unschedulable["conditions"][0] = {"type": "PodScheduled", "status": "False",
                                      "reason": "Unschedulable", "message": "0/2 nodes"}
    assert base != pod_print(unschedulable)
    running = waiting_pod("x")
    running["containerStatuses"][0]["state"] = {"running": {"startedAt": "t1"}}
    assert base != pod_print(running)
    assert base != pod_print(waiting_pod("ContainerCreating"), deletionTimestamp="t3")


def test_a_ca_bundle_change_counts_through_the_generation_the_server_bumps() -> None:
    # A ValidatingWebhookConfiguration has no status: the API server increments its
    # generation when its webhooks change (tests/integration/test_waiting.py checks it).
    spec = WatchSpec("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
                     with_status=True)
    assert fingerprint({"metadata": metadata()}, spec) != \
        fingerprint({"metadata": metadata(generation=3, resourceVersion="11")}, spec)


def test_the_kinds_whose_status_decides_ready_are_watched_whole() -> None:
    watched = {spec.kind for spec in CHILD_WATCHES if spec.with_status}
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


# --- reconciler: watches on children --------------------------------------------------------


def test_children_are_watched_by_our_label_in_every_namespace_and_cached() -> None:
    desired = render_operand(config(CERT_MANAGER, namespace="es"))
    assert {(spec.api_version, spec.kind) for spec in CHILD_WATCHES} >= {
        (obj["apiVersion"], obj["kind"]) for obj in desired.objects()}
    for spec in CHILD_WATCHES:
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
    outcome = api_outcome(ApiError(status_code, "R", "m"), "apply Deployment es/x")
    assert (outcome.kind, outcome.reason) == (kind, reason)
    assert outcome.message.startswith("apply Deployment es/x")
    assert REASON_PATTERN.match(outcome.reason)


def test_a_degraded_api_failure_says_what_to_fix() -> None:
    assert "RBAC" in api_outcome(ApiError(403, "Forbidden", "m"), "t").message
    assert "ExternalSecretsConfig" in api_outcome(ApiError(422, "Invalid", "m"), "t").message


def test_a_failed_request_names_the_object_the_request_and_a_command() -> None:
    ref = ObjectRef("apps/v1", "Deployment", "es", "external-secrets")
    path = "/apis/apps/v1/namespaces/es/deployments/external-secrets"
    error = ObjectError(ref, "apply", ApiError(422, "Invalid", "bad cpu", "PATCH", path))
    failure = failed_outcome(error).failure
    assert failure is not None
    assert failure.model_dump(by_alias=True, exclude_none=True) == {
        "object": "Deployment es/external-secrets", "request": f"PATCH {path}",
        "response": "422 Invalid: bad cpu", "inspect": failures.PLAN}
    forbidden = ObjectError(ref, "get", ApiError(403, "Forbidden", "no", "GET", path))
    assert (failed_outcome(forbidden).failure or failures.Failure()).inspect == failures.RBAC
    listing = ObjectError(ObjectRef("apps/v1", "Deployment", "", "*"), "list",
                          ApiError(503, "ServiceUnavailable", "later", "GET", "/apis/apps/v1"))
    transient = failed_outcome(listing).failure
    assert transient is not None
    assert transient.object is None
    assert transient.inspect == failures.LOGS


def test_a_missing_dependency_or_foreign_object_points_at_it() -> None:
    missing = MissingDependencyError("IssuerNotFound", "spec.appConfig.certManagerConfig.issuerRef",
                                     "not found", subject="Issuer es/ca",
                                     inspect="kubectl get issuers -n es")
    assert (failed_outcome(missing).failure or failures.Failure()).model_dump(
        by_alias=True, exclude_none=True) == {
        "object": "Issuer es/ca", "inspect": "kubectl get issuers -n es"}
    ref = ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "", "external-secrets-view")
    foreign = failed_outcome(ForeignObjectsError([(ref, {"metadata": {}})])).failure
    assert foreign is not None
    assert foreign.inspect == ("kubectl get clusterrole external-secrets-view -o yaml "
                               "--show-managed-fields")


@pytest.mark.parametrize(("field", "reason", "names"), [
    ("spec.globalConfig.labels", "InvalidGlobalConfig", "ExternalSecretsManager cluster"),
    ("env.RELATED_IMAGE_EXTERNAL_SECRETS", "InvalidOperatorEnvironment", "operator Deployment"),
    ("spec.appConfig.logLevel", "InvalidConfiguration", "spec.appConfig.logLevel"),
])
def test_a_config_error_is_degraded_and_names_its_source(field: str, reason: str,
                                                         names: str) -> None:
    outcome = config_outcome(ConfigError(field, "is wrong"))
    assert (outcome.kind, outcome.reason) == (OutcomeKind.DEGRADED, reason)
    assert names in outcome.message
    assert field in outcome.message
    assert "is wrong" in outcome.message
    assert outcome.failure is not None
    assert outcome.failure.inspect


def test_a_config_error_points_at_kubectl_explain_of_its_field() -> None:
    outcome = config_outcome(ConfigError("spec.controllerConfig.labels['app']", "reserved"))
    assert outcome.failure == failures.Failure(
        inspect="kubectl explain externalsecretsconfig.spec.controllerConfig.labels",
        object="ExternalSecretsConfig cluster")


def test_only_degraded_transient_and_failed_side_tasks_are_retried() -> None:
    ready = Outcome(OutcomeKind.READY, "Reconciled", "")
    assert not PassReport(ready, frozenset()).needs_retry
    assert not PassReport(None, frozenset()).needs_retry  # no ESC: nothing to retry
    assert PassReport(ready, frozenset(), annotator_failed=True).needs_retry
    for kind in (OutcomeKind.DEGRADED, OutcomeKind.RETRYING):
        assert PassReport(Outcome(kind, "R", ""), frozenset()).needs_retry
    # Waiting for the operand: its watches end the wait, time does not.
    waiting = Outcome(OutcomeKind.PROGRESSING, "WaitingForOperand", "")
    assert not PassReport(waiting, frozenset()).needs_retry
    assert PassReport(waiting, frozenset(), gate_failed=True).needs_retry


def test_the_pass_rechecks_when_a_stale_ca_bundle_runs_out_of_grace() -> None:
    now = time.time()
    assert _recheck_in(None, None) is None
    assert 59 < (_recheck_in(None, now + 60) or 0) <= 60
    assert _recheck_in(None, now - 5) == 1.0  # overdue: soon, never a busy loop


def test_a_managed_pass_watches_the_operand_pods_by_label_in_its_namespace() -> None:
    spec = operand_pod_watch("es")
    assert (spec.kind, spec.namespace, spec.label_selector, spec.cached) == (
        "Pod", "es", "app.kubernetes.io/managed-by=external-secrets-operator", False)


# --- reconciler: ESM controller states ------------------------------------------------------


def esm_with(entries: list[JsonObject], generation: int = 3) -> JsonObject:
    return {"metadata": {"name": "cluster", "generation": generation},
            "status": {"controllerStatuses": entries}}


def test_a_stored_controller_entry_reads_back_unchanged() -> None:
    # Carrying an entry over from the stored status must not cause a status write.
    state = status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, False, "Waiting", "waiting", 5)
    esm = esm_with([state.as_status(None, "T0")])
    previous = esm_status.previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
    assert previous is not None
    assert previous == state
    assert esm_status.previous_state(esm, status.CONTROLLER_ESC) is None


def test_a_restarted_operator_remembers_a_deletion_by_the_esc_entry_reason() -> None:
    def entry(reason: str, message: str) -> JsonObject:
        return status.simple_state(status.CONTROLLER_ESC, False, reason, message,
                                   None).as_status(None, "T0")
    assert esm_status.esc_was_deleted(esm_with([entry(esm_status.ESC_DELETED_REASON, "gone")]))
    assert not esm_status.esc_was_deleted(esm_with([entry("NoExternalSecretsConfig", "gone")]))
    assert not esm_status.esc_was_deleted(esm_with([]))


def test_the_esm_entry_reports_a_global_config_problem() -> None:
    esm = esm_with([])
    fine = esm_status.manager_state(esm, None, None)
    assert (fine.name, fine.observed_generation) == (status.CONTROLLER_ESM, 3)
    assert {c.type: c.status for c in fine.conditions} == {"Ready": "True", "Degraded": "False"}
    broken = esm_status.manager_state(esm, "spec.globalConfig.labels: reserved", None)
    assert {c.type: (c.status, c.message) for c in broken.conditions} == {
        "Ready": ("False", "spec.globalConfig.labels: reserved"),
        "Degraded": ("True", "spec.globalConfig.labels: reserved")}


def test_the_esm_entry_reports_unknown_features_and_overridden_settings() -> None:
    esm = {**esm_with([]), "spec": {"features": [{"name": "TechPreviewX", "enabled": "true"}]}}
    unknown = {c.type: c for c in esm_status.manager_state(esm, None, None).conditions}
    assert (unknown["Degraded"].status, unknown["Degraded"].reason) == ("True",
                                                                        "UnknownFeature")
    assert "'TechPreviewX' is not a feature of this operator" in unknown["Ready"].message
    glob = {"globalConfig": {"logLevel": 4, "labels": {"team": "a"}}}
    overridden = effective_config(
        ExternalSecretsConfigSpec.model_validate({"appConfig": {"operatingNamespace": "x"}}),
        ExternalSecretsManagerSpec.model_validate(glob), OperatorEnvironment.from_environ({}))
    assert overridden.hidden_global_settings == ("logLevel",)
    state = {c.type: c for c in esm_status.manager_state(
        {**esm_with([]), "spec": glob}, None, overridden).conditions}
    assert (state["Ready"].status, state["Ready"].reason) == ("True", "PartlyOverridden")
    assert "except globalConfig.logLevel" in state["Ready"].message
    assert "appConfig.logLevel is 1 whenever" in state["Ready"].message


@pytest.mark.parametrize(("app", "glob", "hidden"), [
    ({"logLevel": 2}, {"logLevel": 4}, ("logLevel",)),
    ({"logLevel": 2}, {"logLevel": 1}, ()),            # the ESM's may be the CRD default
    ({"logLevel": 3}, {"logLevel": 3}, ()),            # the same value: nothing is lost
    ({"proxy": {}}, {"proxy": {"httpProxy": "http://p:3128"}}, ("proxy",)),
    ({"nodeSelector": {"a": "b"}}, {"tolerations": []}, ()),
    (None, {"logLevel": 4}, ()),                       # no appConfig: the ESM's applies
])
def test_settings_the_esc_overrides_are_listed(app: dict[str, Any] | None, glob: dict[str, Any],
                                               hidden: tuple[str, ...]) -> None:
    spec = {"appConfig": app} if app is not None else {}
    merged = effective_config(ExternalSecretsConfigSpec.model_validate(spec),
                              ExternalSecretsManagerSpec.model_validate({"globalConfig": glob}),
                              OperatorEnvironment.from_environ({}))
    assert merged.hidden_global_settings == hidden


def test_the_annotator_entry_follows_its_report() -> None:
    esm = esm_with([])
    in_es = config(namespace="es")
    active = esm_status.annotator_state(esm, AnnotatorReport(True, 2, ()), in_es)
    ready = {c.type: c for c in active.conditions}["Ready"]
    assert ready.status == "True"
    assert ready.message == f"2 operand CRDs carry {INJECT_CA_FROM}: es/external-secrets-webhook"
    failed = esm_status.annotator_state(esm, ApiError(503, "ServiceUnavailable", "later"), in_es)
    assert {c.type: c.status for c in failed.conditions} == {"Ready": "False",
                                                             "Degraded": "True"}


def test_the_annotator_entry_is_kept_when_the_pass_stopped_early() -> None:
    earlier = status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True, "Inactive", "inactive",
                                  None)
    kept = esm_status.annotator_state(esm_with([earlier.as_status(None, "T0")]), None, None)
    assert kept == earlier
    first = esm_status.annotator_state(esm_with([]), None, None)
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


def _results(*actions: Action, name: str = "external-secrets") -> list[ObjectResult]:
    return [ObjectResult(ObjectRef("apps/v1", "Deployment", "es", f"{name}-{i}"), action)
            for i, action in enumerate(actions)]


def test_a_pass_summary_counts_what_it_wrote() -> None:
    assert pass_events.summary(_results(Action.UNCHANGED)) is None
    assert pass_events.summary(_results(Action.CREATED, Action.CREATED, Action.UPDATED)) == \
        "applied 3 objects (2 created, 1 updated)"
    assert pass_events.summary(_results(Action.UPDATED, Action.DELETED, Action.DELETED)) == \
        "applied 1 object (1 updated), pruned 2"
    assert pass_events.summary(_results(Action.DELETED)) == "pruned 1 object"


def test_the_cause_names_what_changed_since_the_last_converged_pass() -> None:
    plain, bitwarden = config(), config({"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": "tls"}}})
    created, deleted = _results(Action.CREATED), _results(Action.DELETED)
    assert pass_events.change_cause(None, plain, created) == "installed"
    assert "operator started" in pass_events.change_cause(None, plain, deleted)
    # Switching bitwarden says so, not the settings and policies that follow from it.
    assert pass_events.change_cause(bitwarden, plain, deleted) == "bitwarden switched off"
    assert pass_events.change_cause(plain, bitwarden, created) == "bitwarden switched on"
    assert pass_events.change_cause(plain, config({"logLevel": 4}), created) == "logLevel 1 -> 4"
    assert pass_events.change_cause(plain, config(namespace="other"), created) == \
        "operand moved from namespace external-secrets to other"
    assert pass_events.change_cause(plain, plain, created).startswith("repaired drift")
    # A rotation is named; a source that comes or goes with a setting is not.
    loaded = bitwarden.model_copy(update={"loaded_once": {"bitwarden-tls": "a"}})
    rotated = bitwarden.model_copy(update={"loaded_once": {"bitwarden-tls": "b"}})
    assert pass_events.change_cause(loaded, rotated, created) == (
        "the content of bitwarden's TLS Secret changed, so the pods that load it roll")
    assert pass_events.change_cause(loaded, plain, deleted) == "bitwarden switched off"
    with_cert_manager = config(CERT_MANAGER)
    assert "cert-controller goes" in pass_events.change_cause(
        with_cert_manager, with_cert_manager, _results(Action.DELETED,
                                                       name="external-secrets-cert-controller"))
    # A new CA, then the overlap of old and new in the caBundle, then its end; the cluster
    # facts alone are not "certManagerConfig changed".
    def facts(**update: object) -> EffectiveConfig:
        return with_cert_manager.model_copy(update={
            "cert_manager": with_cert_manager.cert_manager.model_copy(update=update)})

    updated = _results(Action.UPDATED)
    old, new, both = facts(ca_bundle="A"), facts(ca_bundle="B"), facts(
        ca_bundle="B", bundle_overlap="BA", overlap_until=1.0)
    assert pass_events.change_cause(old, both, updated) == (
        "cert-manager issued a new webhook CA, the caBundle trusts the previous CA too until "
        "every webhook pod serves the new certificate")
    assert pass_events.change_cause(both, new, updated) == (
        "every webhook pod serves the new certificate, so the caBundle drops the previous CA")
    assert pass_events.change_cause(facts(mount_previous=True), new, updated) == \
        "cert-manager issued a new webhook CA"


NOT_DEGRADED = pass_events.Before(False, "Reconciled")
DEGRADED_BEFORE = pass_events.Before(True, "IssuerNotFound")


def test_a_pass_posts_one_summary_and_warns_while_degraded() -> None:
    ready = Outcome(OutcomeKind.READY, "Reconciled", "running", True)
    degraded = Outcome(OutcomeKind.DEGRADED, "IssuerNotFound", "Issuer x not found")
    retrying = Outcome(OutcomeKind.RETRYING, "APIError", "503")
    writes = _results(Action.CREATED, Action.ADOPTED)
    posted = pass_events.pass_events(writes, ready, NOT_DEGRADED, None, config())
    assert [(e.type, e.reason) for e in posted] == [("Normal", "Adopted"), ("Normal", "Applied")]
    assert pass_events.pass_events([], ready, NOT_DEGRADED, None, config()) == []
    warned = pass_events.pass_events([], degraded, NOT_DEGRADED, None, None)
    assert [(e.type, e.reason, e.note) for e in warned] == [
        ("Warning", "IssuerNotFound", "Issuer x not found")]
    recovered = pass_events.pass_events([], ready, DEGRADED_BEFORE, None, config())
    assert [(e.type, e.reason) for e in recovered] == [("Normal", "Recovered")]
    assert pass_events.pass_events([], retrying, DEGRADED_BEFORE, None, config()) == []


def test_management_state_transitions_are_announced_once() -> None:
    unmanaged = Outcome(OutcomeKind.UNMANAGED, "Unmanaged", "paused")
    assert [(e.type, e.reason) for e in pass_events.pass_events(
        [], unmanaged, NOT_DEGRADED, None, config())] == [("Normal", "Unmanaged")]
    assert pass_events.pass_events([], unmanaged, pass_events.Before(False, "Unmanaged",
                                                                     "paused"),
                                   None, config()) == []
    # What the Ready summary says changed (other drift): the Event gives the whole of it.
    drifted = Outcome(OutcomeKind.UNMANAGED, "Unmanaged", "paused; 2 objects differ: a; b",
                      summary="paused, drift in 2 objects: a and 1 more")
    assert [e.note for e in pass_events.pass_events(
        [], drifted, pass_events.Before(False, "Unmanaged", "paused"), None, config())] == [
        "paused; 2 objects differ: a; b"]
    removing = pass_events.pass_events(_results(Action.DELETED), Outcome(
        OutcomeKind.PROGRESSING, "Removing", "left"), NOT_DEGRADED, None, None,
        cause="managementState is Removed")
    assert [e.note for e in removing] == ["pruned 1 object: managementState is Removed"]


def test_event_notes_stay_within_the_api_limit() -> None:
    note = events._bounded("é" * 2000)
    assert len(note.encode()) <= events.NOTE_LIMIT
    assert note.endswith("(see the status)")
    assert events._bounded("short") == "short"


def test_event_times_are_rfc3339_utc() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", events.now_rfc3339())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", events.now_micro())


def test_the_operators_namespace_comes_from_the_environment_or_its_service_account(
        tmp_path: Path) -> None:
    namespace_file = tmp_path / "namespace"
    assert own_namespace({"POD_NAMESPACE": "ops"}, namespace_file) == "ops"
    assert own_namespace({}, namespace_file) is None  # not in a pod
    namespace_file.write_text("eso-operator\n")
    assert own_namespace({}, namespace_file) == "eso-operator"
    assert own_namespace({"POD_NAMESPACE": ""}, namespace_file) == "eso-operator"


# --- cluster facts: the API server's Service address -----------------------------------------


class _ServiceReader:
    """A Kube that serves one object and counts the reads."""

    def __init__(self, objects: dict[str, JsonObject]) -> None:
        self.objects = objects
        self.reads: list[str] = []

    async def get(self, path: str) -> JsonObject | None:
        self.reads.append(path)
        return self.objects.get(path)


KUBERNETES_SERVICE_PATH = "/api/v1/namespaces/default/services/kubernetes"


def _no_apiserver() -> ObjectCache:
    """A cache whose APIServer watch listed nothing: the TLS profile costs no read; and
    whose Namespace watch holds the operand namespace (the operator created it): its labels
    cost no read either."""
    cache = ObjectCache()
    cache.replace(("config.openshift.io", "APIServer"), [])
    cache.replace(("", "Namespace"), [{"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "external-secrets"}}])
    return cache


@pytest.mark.parametrize(("service", "expected"), [
    ({"spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"]}}, ("10.96.0.1",)),
    ({"spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "fd00::1"]}},
     ("10.96.0.1", "fd00::1")),
    ({"spec": {"clusterIP": "172.30.0.1"}}, ("172.30.0.1",)),
    ({"spec": {"clusterIP": "None"}}, ()),
    (None, ()),
])
async def test_with_a_proxy_the_kubernetes_service_addresses_are_read_into_the_config(
        service: JsonObject | None, expected: tuple[str, ...]) -> None:
    kube = _ServiceReader({KUBERNETES_SERVICE_PATH: service} if service else {})
    facts = ClusterFacts(cast(Kube, kube), cast(Discovery, None), _no_apiserver())
    proxied = config({"proxy": {"httpProxy": "http://p:3128", "noProxy": "vault.corp"}})
    completed = await facts.complete(proxied)
    assert completed.proxy is not None
    assert completed.proxy.api_server_addresses == expected
    assert completed.proxy.effective_no_proxy.startswith(",".join(("vault.corp", *expected)))
    assert kube.reads.count(KUBERNETES_SERVICE_PATH) == 1


async def test_without_a_proxy_the_kubernetes_service_is_not_read() -> None:
    kube = _ServiceReader({})
    facts = ClusterFacts(cast(Kube, kube), cast(Discovery, None), _no_apiserver())
    assert await facts.complete(config()) == config()
    assert kube.reads == []
