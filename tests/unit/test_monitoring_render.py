"""The OperandMonitoring feature: what it renders, and when (manager/render/components.py,
manager/render/alerts.py)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import (
    OPERAND_MONITORING,
    EffectiveConfig,
    OperatorEnvironment,
    effective_config,
    unknown_features,
)
from manager.render import render_operand
from tests.unit.test_promtool import CERT_MANAGER_SPEC

MONITORING_API = "monitoring.coreos.com/v1"


def config(esc: dict[str, Any], enabled: str | None, *, served: bool) -> EffectiveConfig:
    features = [] if enabled is None else [{"name": OPERAND_MONITORING, "enabled": enabled}]
    result = effective_config(ExternalSecretsConfigSpec.model_validate(esc),
                              ExternalSecretsManagerSpec.model_validate({"features": features}),
                              OperatorEnvironment.from_environ({}, None))
    return result.model_copy(update={"monitoring": result.monitoring.model_copy(
        update={"served": served})})


def monitoring_objects(cfg: EffectiveConfig) -> dict[str, dict[str, Any]]:
    return {f"{obj['kind']}/{obj['metadata']['name']}": obj
            for obj in render_operand(cfg).objects() if obj["apiVersion"] == MONITORING_API}


@pytest.mark.parametrize(("enabled", "served"), [(None, True), ("false", True), ("true", False)])
def test_nothing_without_the_feature_or_the_api(enabled: str | None, served: bool) -> None:
    assert monitoring_objects(config({}, enabled, served=served)) == {}


def test_a_service_monitor_per_metrics_service_and_the_rule() -> None:
    objects = monitoring_objects(config({"controllerConfig": {"namespace": "eso"}}, "true",
                                        served=True))
    assert sorted(objects) == [
        "PrometheusRule/external-secrets",
        "ServiceMonitor/external-secrets-cert-controller-metrics",
        "ServiceMonitor/external-secrets-metrics",
        "ServiceMonitor/external-secrets-webhook",
    ]
    services = {obj["metadata"]["name"]: obj for obj in render_operand(
        config({"controllerConfig": {"namespace": "eso"}}, "true", served=True)).objects()
        if obj["kind"] == "Service"}
    for name, monitor in objects.items():
        assert monitor["metadata"]["namespace"] == "eso"
        assert monitor["metadata"]["labels"]["app.kubernetes.io/managed-by"] == \
            "external-secrets-operator"
        if not name.startswith("ServiceMonitor/"):
            continue
        selected = [service for service in services.values()
                    if monitor["spec"]["selector"]["matchLabels"].items()
                    <= service["metadata"]["labels"].items()]
        assert len(selected) == 1, name  # exactly one Service, which has a metrics port
        assert "metrics" in {port["name"] for port in selected[0]["spec"]["ports"]}
    alerts = {rule["alert"] for rule in
              objects["PrometheusRule/external-secrets"]["spec"]["groups"][0]["rules"]}
    # The operator's own alert is in the operator's namespace (its PrometheusRule), where a
    # namespace-enforcing scraper can match the operator's series.
    assert alerts == {"ExternalSecretsDeploymentUnavailable", "ExternalSecretSyncFailing"}


def test_cert_manager_replaces_the_cert_controller_monitor_and_adds_the_expiry_alert() -> None:
    objects = monitoring_objects(config(CERT_MANAGER_SPEC, "true", served=True))
    assert "ServiceMonitor/external-secrets-cert-controller-metrics" not in objects
    alerts = {rule["alert"] for rule in
              objects["PrometheusRule/external-secrets"]["spec"]["groups"][0]["rules"]}
    assert "ExternalSecretsWebhookCertificateExpiring" in alerts


def test_operand_monitoring_is_a_known_feature() -> None:
    spec = ExternalSecretsManagerSpec.model_validate(
        {"features": [{"name": OPERAND_MONITORING, "enabled": "true"},
                      {"name": "Other", "enabled": "true"}]})
    assert unknown_features(spec) == ("Other",)


SCRAPED_PORTS = {"allow-api-server-egress-for-main-controller": 8080,
                 "allow-api-server-egress-for-webhook": 8080,
                 "allow-api-server-egress-for-cert-controller": 8080}


def scraper_peers(cfg: EffectiveConfig) -> dict[str, list[dict[str, Any]]]:
    """The peers each component's NetworkPolicy admits to its metrics port."""
    policies = {obj["metadata"]["name"]: obj for obj in render_operand(cfg).objects()
                if obj["kind"] == "NetworkPolicy"}
    return {name: [peer for rule in policies[name]["spec"]["ingress"]
                   if {"protocol": "TCP", "port": port} in rule.get("ports", [])
                   for peer in rule.get("from", [])]
            for name, port in SCRAPED_PORTS.items()}


@pytest.mark.parametrize(("platform", "scraper"), [
    (False, "openshift-user-workload-monitoring"), (True, "openshift-monitoring")])
def test_metrics_ports_admit_the_prometheus_that_scrapes_the_namespace(
        platform: bool, scraper: str) -> None:
    cfg = config({}, None, served=False)
    cfg = cfg.model_copy(update={"monitoring": cfg.monitoring.model_copy(
        update={"platform_scraped": platform})})
    for name, peers in scraper_peers(cfg).items():
        assert peers == [{"namespaceSelector": {"matchLabels": {
            "kubernetes.io/metadata.name": scraper}}}], name
