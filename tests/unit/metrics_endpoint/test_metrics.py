"""The operator's metrics: request labels, the exposition, the webhook Certificate's series
(manager/metrics.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from manager import metrics
from manager.api import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.apply import ObjectRef, Observed
from manager.cli import build_parser
from manager.config import EffectiveConfig, OperatorEnvironment, effective_config
from manager.metrics_endpoint import server as metrics_server
from manager.metrics_endpoint.auth import bearer_token
from manager.steps.operand_readiness import record_webhook_certificate


@pytest.mark.parametrize(("method", "path", "query", "expected"), [
    ("GET", "/api/v1/namespaces/x/pods", {}, ("list", "pods")),
    ("GET", "/api/v1/namespaces/x", {}, ("get", "namespaces")),
    ("GET", "/apis/apps/v1/namespaces/x/deployments/d", {}, ("get", "deployments")),
    ("GET", "/apis/apps/v1/deployments", {"watch": "true"}, ("watch", "deployments")),
    ("PATCH", "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs/cluster/status", {},
     ("patch", "externalsecretsconfigs/status")),
    ("GET", "/apis/apps/v1", {}, ("get", "discovery")),
    ("DELETE", "/api/v1/namespaces/a/secrets/b", {}, ("delete", "secrets")),
    ("POST", "/api/v1/namespaces/a/events", {}, ("create", "events")),
])
def test_request_labels(method: str, path: str, query: dict[str, str],
                        expected: tuple[str, str]) -> None:
    assert metrics.request_labels(method, path, "application/json", query) == expected


def test_apply_is_its_own_verb() -> None:
    assert metrics.request_labels("PATCH", "/apis/apps/v1/namespaces/a/deployments/b",
                                  "application/apply-patch+yaml", {})[0] == "apply"


def _samples() -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = metrics.exposition().decode()
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def test_exposition_parses_and_counts() -> None:
    before = _samples()
    metrics.record_pass("Ready", 0.2)
    metrics.record_managed(["Deployment", "Deployment", "Service"])
    metrics.record_conditions("ExternalSecretsConfig", "", [("Ready", "True"),
                                                            ("Degraded", "False")])
    after = _samples()
    key = ("eso_operator_passes_total", (("result", "Ready"),))
    assert after[key] - before.get(key, 0) == 1
    assert after[("eso_operator_managed_objects", (("kind", "Deployment"),))] == 2
    ready = ("eso_operator_condition", (("controller", ""), ("resource", "ExternalSecretsConfig"),
                                        ("type", "Ready")))
    assert after[ready] == 1
    metrics.record_managed(["Service"])
    assert _samples()[("eso_operator_managed_objects", (("kind", "Deployment"),))] == 0


def test_a_deleted_resource_has_no_conditions() -> None:
    metrics.record_conditions("ExternalSecretsConfig", "", [("Ready", "True")])
    metrics.record_conditions("ExternalSecretsManager", "external-secrets-manager",
                              [("Ready", "True")])
    metrics.forget_conditions("ExternalSecretsConfig")
    names = {dict(labels)["resource"] for name, labels in _samples()
             if name == "eso_operator_condition"}
    assert names == {"ExternalSecretsManager"}


def test_parse_addr() -> None:
    assert metrics_server.parse_addr(":8080") == ("0.0.0.0", 8080)  # noqa: S104
    assert metrics_server.parse_addr("127.0.0.1:9") == ("127.0.0.1", 9)
    with pytest.raises(ValueError, match="HOST:PORT"):
        metrics_server.parse_addr("8080")


@pytest.mark.parametrize(("argv", "environ", "secure"), [
    ([], {}, True),
    (["--metrics-secure=false"], {}, False),
    ([], {"METRICS_SECURE": "false"}, False),
    (["--metrics-secure"], {"METRICS_SECURE": "false"}, True),
])
def test_metrics_are_secure_unless_turned_off(argv: list[str], environ: dict[str, str],
                                              secure: bool,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METRICS_SECURE", raising=False)
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    args = build_parser().parse_args(["run", *argv])
    assert args.metrics_secure is secure


def test_bearer_token_is_read_from_the_header_only_with_its_scheme() -> None:
    assert bearer_token("Bearer abc") == "abc"
    assert bearer_token("bearer  abc ") == "abc"
    assert bearer_token("Basic abc") is None
    assert bearer_token("Bearer ") is None
    assert bearer_token(None) is None


# --- the webhook Certificate's series (manager/metrics.py, steps/operand_readiness.py) ------

EXPIRY = "eso_operator_webhook_certificate_expiration_timestamp_seconds"
READY = "eso_operator_webhook_certificate_ready"


def _certificate(namespace: str = "external-secrets", *, not_after: str | None,
                 ready: str = "True") -> dict[str, object]:
    status: dict[str, object] = {"conditions": [
        {"type": "Issuing", "status": "False"}, {"type": "Ready", "status": ready}]}
    if not_after is not None:
        status["notAfter"] = not_after
    return {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": "external-secrets-webhook", "namespace": namespace},
            "status": status}


def _certificate_samples() -> dict[tuple[str, str], float]:
    """(series, certificate_namespace) -> value, of the two webhook Certificate series."""
    return {(name, dict(labels)["certificate_namespace"]): value
            for (name, labels), value in _samples().items() if name in (EXPIRY, READY)}


@pytest.fixture
def leading() -> Iterator[None]:
    metrics.record_leader(True)
    yield
    metrics.record_leader(False)


@pytest.mark.usefixtures("leading")
def test_the_webhook_certificate_series_are_its_status() -> None:
    # 2026-12-28T11:34:05Z is 1798457645 (date -u -d @1798457645).
    metrics.record_webhook_certificate(_certificate(not_after="2026-12-28T11:34:05Z"))
    assert _certificate_samples() == {(EXPIRY, "external-secrets"): 1798457645,
                                      (READY, "external-secrets"): 1}
    # cert-manager renews: notAfter moves, Ready False while it issues (fractions and
    # offsets are read as RFC 3339 has them).
    metrics.record_webhook_certificate(_certificate(not_after="2027-01-27T12:34:05.5+01:00",
                                                    ready="False"))
    assert _certificate_samples() == {(EXPIRY, "external-secrets"): 1801049645.5,
                                      (READY, "external-secrets"): 0}


@pytest.mark.usefixtures("leading")
def test_a_certificate_not_issued_yet_has_no_expiry() -> None:
    metrics.record_webhook_certificate(_certificate(not_after="2026-12-28T11:34:05Z"))
    metrics.record_webhook_certificate(_certificate(not_after=None, ready="False"))
    assert _certificate_samples() == {(READY, "external-secrets"): 0}
    metrics.record_webhook_certificate(_certificate(not_after="yesterday"))
    assert _certificate_samples() == {(READY, "external-secrets"): 1}


@pytest.mark.usefixtures("leading")
def test_the_series_follow_the_operand_namespace_and_go_with_the_certificate() -> None:
    metrics.record_webhook_certificate(_certificate(not_after="2026-12-28T11:34:05Z"))
    metrics.record_webhook_certificate(_certificate("eso", not_after="2026-12-28T11:34:05Z"))
    assert set(_certificate_samples()) == {(EXPIRY, "eso"), (READY, "eso")}
    metrics.record_webhook_certificate(None)
    assert _certificate_samples() == {}


def test_only_the_leader_exports_the_certificate() -> None:
    metrics.record_leader(False)
    metrics.record_webhook_certificate(_certificate(not_after="2026-12-28T11:34:05Z"))
    assert _certificate_samples() == {}  # a standby (or a pass ending as the Lease is lost)
    metrics.record_leader(True)
    metrics.record_webhook_certificate(_certificate(not_after="2026-12-28T11:34:05Z"))
    assert _certificate_samples()
    metrics.record_leader(False)  # the Lease lost: what it read is no longer its to report
    assert _certificate_samples() == {}


def _config(esc: dict[str, object]) -> EffectiveConfig:
    return effective_config(ExternalSecretsConfigSpec.model_validate(esc),
                            ExternalSecretsManagerSpec.model_validate({}),
                            OperatorEnvironment.from_environ({}, None))


CERT_MANAGER = {"appConfig": {"certManagerConfig": {
    "enabled": "true", "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}}


@pytest.mark.usefixtures("leading")
def test_a_pass_reports_the_webhook_certificate_it_observed() -> None:
    config = _config(CERT_MANAGER)
    webhook = _certificate(config.namespace, not_after="2026-12-28T11:34:05Z")
    other = {**_certificate(config.namespace, not_after="2026-11-29T00:00:00Z"),
             "metadata": {"name": "bitwarden-tls-certs", "namespace": config.namespace}}
    observed = [Observed(obj, ObjectRef.of(obj), obj) for obj in (other, webhook)]
    record_webhook_certificate(config, observed)
    assert _certificate_samples() == {(EXPIRY, config.namespace): 1798457645,
                                      (READY, config.namespace): 1}
    # Not created yet (observed absent): no series.
    record_webhook_certificate(config, [Observed(webhook, ObjectRef.of(webhook), None)])
    assert _certificate_samples() == {}
    # cert-manager off: the cert-controller's certificate has no Certificate, nor series.
    record_webhook_certificate(config, observed)
    record_webhook_certificate(_config({}), observed)
    assert _certificate_samples() == {}
