"""How a failed pass is classified and reported (reporting/failures.py)."""

from __future__ import annotations

import re
import time

import pytest

from manager.apply.ownership import ForeignObjectsError
from manager.apply.results import ObjectError, ObjectRef
from manager.client.kube import ApiError
from manager.config import ConfigError
from manager.reporting import failures
from manager.reporting.failures import api_outcome, config_outcome, failed_outcome
from manager.reporting.status import Outcome, OutcomeKind
from manager.runtime.pass_watches import operand_pod_watch
from manager.runtime.reconciler import PassReport, _recheck_in
from manager.steps.preflight import (
    MissingDependencyError,
)

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
