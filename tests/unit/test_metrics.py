"""The operator's metrics: request labels and the exposition (manager/metrics.py)."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families

from manager import metrics
from manager.cli import build_parser
from manager.metrics_endpoint import server as metrics_server
from manager.metrics_endpoint.auth import bearer_token


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
