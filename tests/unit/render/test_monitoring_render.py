"""The OperandMonitoring feature: what it renders, and when (manager/render/components.py,
manager/render/alerts.py); the operator's own monitoring objects, and what the ESM says when
nothing scrapes them (manager/sidetasks/operator_monitoring.py)."""

from __future__ import annotations

from typing import Any, cast

import pytest

from manager.api import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.apply.discovery import Resource
from manager.client.kube import ApiError, JsonObject
from manager.config import (
    OPERAND_MONITORING,
    EffectiveConfig,
    OperatorEnvironment,
    effective_config,
    unknown_features,
)
from manager.names import OPERATOR_DEPLOYMENT
from manager.render import render_operand
from manager.reporting import esm_status, summary
from manager.sidetasks import operator_monitoring
from manager.sidetasks.operator_monitoring import MonitoringReport
from tests.unit.render.test_promtool import CERT_MANAGER_SPEC

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


def test_cert_manager_replaces_the_cert_controller_monitor() -> None:
    objects = monitoring_objects(config(CERT_MANAGER_SPEC, "true", served=True))
    assert "ServiceMonitor/external-secrets-cert-controller-metrics" not in objects
    alerts = {rule["alert"] for rule in
              objects["PrometheusRule/external-secrets"]["spec"]["groups"][0]["rules"]}
    # The certificate's expiry alert is the operator's (it reads the operator's series).
    assert alerts == {"ExternalSecretsDeploymentUnavailable", "ExternalSecretSyncFailing"}


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


# --- the operator's own rules ---------------------------------------------------------------

def test_the_operators_rule_has_its_alerts_and_follows_its_deployment() -> None:
    owner = {"apiVersion": "apps/v1", "kind": "Deployment", "name": OPERATOR_DEPLOYMENT,
             "uid": "u-1"}
    monitor, rule = operator_monitoring.desired("ops", owner)
    assert [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]] == [
        "ExternalSecretsOperatorPassesFailing", "ExternalSecretsOperatorDown",
        "ExternalSecretsWebhookCertificateExpiring"]
    down = rule["spec"]["groups"][0]["rules"][1]
    assert 'namespace="ops"' in down["expr"]
    assert down["labels"]["namespace"] == "ops"
    # Uninstalling the operator (OLM deletes its Deployment) takes both along: a rule left
    # behind would report the operator down for ever.
    assert monitor["metadata"]["ownerReferences"] == rule["metadata"]["ownerReferences"] == [owner]
    assert all("ownerReferences" not in obj["metadata"]
               for obj in operator_monitoring.desired("ops"))


# --- whether anything scrapes: the ESM's note (manager/sidetasks/operator_monitoring.py) ---

@pytest.mark.parametrize(("data", "expected"), [
    (None, (False, "")),  # no ConfigMap: the cluster monitoring operator's defaults
    ({}, (False, "")),
    ({"config.yaml": ""}, (False, "")),
    ({"config.yaml": "prometheusK8s:\n  retention: 1d\n"}, (False, "")),
    ({"config.yaml": "enableUserWorkload: false\n"}, (False, "")),
    ({"config.yaml": "enableUserWorkload: true\n"}, (True, "")),
    ({"config.yaml": "enableUserWorkload: 'true'\n"}, (False, "")),  # not a bool: CMO refuses
    ({"config.yaml": "enableUserWorkload: [\n"},
     (None, "config.yaml of ConfigMap openshift-monitoring/cluster-monitoring-config is not "
            "valid YAML")),
    ({"config.yaml": "- a\n"},
     (None, "config.yaml of ConfigMap openshift-monitoring/cluster-monitoring-config is not "
            "a mapping")),
])
def test_user_workload_monitoring_is_read_from_the_cluster_monitoring_config(
        data: dict[str, str] | None, expected: tuple[bool | None, str]) -> None:
    configmap = None if data is None else {"data": data}
    assert operator_monitoring.user_workload_enabled(configmap) == expected


def scraped_config(platform: bool, *, enabled: bool = True) -> EffectiveConfig:
    cfg = config({"controllerConfig": {"namespace": "eso"}}, "true" if enabled else None,
                 served=True)
    return cfg.model_copy(update={"monitoring": cfg.monitoring.model_copy(
        update={"platform_scraped": platform})})


def report(user_workload: bool | None, operator_labelled: bool = False,
           foreign: tuple[str, ...] = (), unknown: str = "") -> MonitoringReport:
    scrapers = operator_monitoring.Scrapers(user_workload, unknown, operator_labelled)
    return MonitoringReport(True, True, foreign, scrapers, "ops")


def test_the_note_says_when_nothing_scrapes_either_namespace_and_what_to_do() -> None:
    note = report(False).note_for(scraped_config(False))
    assert note == (
        "feature OperandMonitoring: nothing scrapes namespaces eso (operand), ops (operator): "
        "OpenShift's user-workload monitoring is off and neither is labelled "
        "openshift.io/cluster-monitoring=true, so their ServiceMonitors are not scraped nor "
        "their PrometheusRules evaluated (no metrics, no alerts); set enableUserWorkload: true "
        "in config.yaml of ConfigMap openshift-monitoring/cluster-monitoring-config, or label "
        "the namespaces openshift.io/cluster-monitoring=true (platform monitoring)")
    # On the ESM: the Ready line leads with the namespaces (and fits), the Event has it whole.
    esm = {"metadata": {"name": "cluster", "generation": 1}, "spec": {}}
    state = esm_status.manager_state(esm, None, scraped_config(False), note)
    ready = state.conditions[0]
    assert (ready.status, ready.reason) == ("True", "FeatureWithoutEffect")
    line = state.line(ready.message)
    assert line.startswith("feature OperandMonitoring: nothing scrapes namespaces eso "
                           "(operand), ops (operator): ")
    assert len(line) <= summary.LIMIT
    [event] = esm_status.esm_events(esm, [state])
    assert note in event.note


@pytest.mark.parametrize(("operand_labelled", "operator_labelled", "unscraped"), [
    (True, False, ("ops (operator)",)),
    (False, True, ("eso (operand)",)),
    (True, True, ()),
])
def test_a_namespace_labelled_for_platform_monitoring_is_scraped(
        operand_labelled: bool, operator_labelled: bool, unscraped: tuple[str, ...]) -> None:
    scrape = report(False, operator_labelled)
    assert scrape.unscraped(scraped_config(operand_labelled)) == unscraped
    note = scrape.note_for(scraped_config(operand_labelled))
    if not unscraped:
        assert note is None
    else:
        assert note is not None
        assert note.startswith(f"feature OperandMonitoring: nothing scrapes namespace "
                               f"{unscraped[0]}: ")
        assert note.endswith("or label the namespace openshift.io/cluster-monitoring=true "
                             "(platform monitoring)")


def test_no_note_where_user_workload_monitoring_is_on_or_the_cluster_is_not_openshift() -> None:
    assert report(True).note_for(scraped_config(False)) is None
    elsewhere = MonitoringReport(True, True, (), None, "ops")  # not OpenShift
    assert elsewhere.note_for(scraped_config(False)) is None
    off = MonitoringReport(False, True)
    assert off.note_for(scraped_config(False, enabled=False)) is None


def test_without_the_operand_the_note_speaks_of_the_operators_namespace_only() -> None:
    """No ExternalSecretsConfig (or the note read without the pass's config)."""
    note = report(False).note
    assert note is not None
    assert note.startswith("feature OperandMonitoring: nothing scrapes namespace ops (operator): ")
    assert "eso" not in note


def test_an_unreadable_cluster_monitoring_config_is_said_as_unknown() -> None:
    note = report(None, unknown="the operator may not read ConfigMap "
                  "openshift-monitoring/cluster-monitoring-config").note_for(
        scraped_config(False))
    assert note == (
        "feature OperandMonitoring: maybe nothing scrapes namespaces eso (operand), ops "
        "(operator): neither is labelled openshift.io/cluster-monitoring=true, and whether "
        "OpenShift's user-workload monitoring is on cannot be read (the operator may not read "
        "ConfigMap openshift-monitoring/cluster-monitoring-config); if it is off, their "
        "ServiceMonitors are not scraped nor their PrometheusRules evaluated (no metrics, no "
        "alerts): set enableUserWorkload: true in config.yaml of ConfigMap "
        "openshift-monitoring/cluster-monitoring-config, or label the namespaces "
        "openshift.io/cluster-monitoring=true (platform monitoring)")


def test_the_scrape_note_and_foreign_objects_are_both_said() -> None:
    note = report(False, foreign=("ServiceMonitor ops/x exists and is managed by someone",)
                  ).note_for(scraped_config(True))
    assert note is not None
    assert note.startswith("feature OperandMonitoring: nothing scrapes namespace ops (operator): ")
    assert note.endswith("(platform monitoring); ServiceMonitor ops/x exists and is managed by "
                         "someone (not the operator's: left as they are; delete them to have "
                         "the operator apply its own)")


# --- the reads behind it --------------------------------------------------------------------

class FakeApi:
    """The API as OperatorMonitoring reads it: objects by path, and which kinds are served."""

    def __init__(self, objects: dict[str, JsonObject], *, openshift: bool = True,
                 forbidden: frozenset[str] = frozenset()):
        self.objects = objects
        self.openshift = openshift
        self.forbidden = forbidden
        self.requests: list[tuple[str, str]] = []

    async def resolve(self, api_version: str, kind: str) -> Resource | None:
        if api_version == "config.openshift.io/v1":
            return Resource(api_version, kind, "apiservers", False) if self.openshift else None
        plural = {"ServiceMonitor": "servicemonitors", "PrometheusRule": "prometheusrules"}
        return Resource(api_version, kind, plural[kind], True)

    async def require(self, api_version: str, kind: str) -> Resource:
        resource = await self.resolve(api_version, kind)
        assert resource is not None
        return resource

    async def get(self, path: str, *, accept: str = "application/json") -> JsonObject | None:
        del accept  # metadata or whole: the fake has the whole
        self.requests.append(("get", path))
        if path in self.forbidden:
            raise ApiError(403, "Forbidden", "no", "GET", path)
        return self.objects.get(path)

    async def apply(self, path: str, body: JsonObject, *, field_manager: str) -> JsonObject:
        assert field_manager == "external-secrets-operator"
        self.requests.append(("apply", path))
        self.objects[path] = body
        return body


CONFIG_PATH = operator_monitoring.CLUSTER_MONITORING_CONFIG_PATH
OWN_NAMESPACE = "/api/v1/namespaces/ops"
OWN_DEPLOYMENT = f"/apis/apps/v1/namespaces/ops/deployments/{OPERATOR_DEPLOYMENT}"


async def reconciled(api: FakeApi) -> MonitoringReport:
    monitoring = operator_monitoring.OperatorMonitoring(cast(Any, api), cast(Any, api), "ops")
    return await monitoring.reconcile(True)


@pytest.mark.parametrize(("objects", "scrapers"), [
    ({}, operator_monitoring.Scrapers(False, "", False)),
    ({CONFIG_PATH: {"data": {"config.yaml": "enableUserWorkload: true"}}},
     operator_monitoring.Scrapers(True, "", False)),
    ({OWN_NAMESPACE: {"metadata": {"labels": {"openshift.io/cluster-monitoring": "true"}}}},
     operator_monitoring.Scrapers(False, "", True)),
])
async def test_on_openshift_each_pass_reads_the_config_and_the_namespace_label(
        objects: dict[str, JsonObject], scrapers: operator_monitoring.Scrapers) -> None:
    api = FakeApi(objects)
    result = await reconciled(api)
    assert result.scrapers == scrapers
    reads = [path for verb, path in api.requests
             if verb == "get" and path in (CONFIG_PATH, OWN_NAMESPACE)]
    # The namespace's label matters only while user-workload monitoring is not on.
    assert reads == ([CONFIG_PATH] if scrapers.user_workload else [CONFIG_PATH, OWN_NAMESPACE])


async def test_elsewhere_nothing_more_is_read_and_nothing_is_said() -> None:
    api = FakeApi({}, openshift=False)
    result = await reconciled(api)
    assert result.scrapers is None
    assert ("get", CONFIG_PATH) not in api.requests
    assert ("get", OWN_NAMESPACE) not in api.requests


async def test_a_forbidden_read_of_the_config_is_unknown_not_an_error() -> None:
    api = FakeApi({}, forbidden=frozenset({CONFIG_PATH}))
    result = await reconciled(api)
    assert result.scrapers == operator_monitoring.Scrapers(
        None, "the operator may not read ConfigMap openshift-monitoring/cluster-monitoring-config",
        False)


async def test_the_objects_are_owned_by_the_operators_deployment_where_it_exists() -> None:
    api = FakeApi({OWN_DEPLOYMENT: {"metadata": {"uid": "u-7"}}})
    monitoring = operator_monitoring.OperatorMonitoring(cast(Any, api), cast(Any, api), "ops")
    await monitoring.reconcile(True)
    await monitoring.reconcile(True)
    applied = [body for path, body in api.objects.items() if "monitoring.coreos.com" in path]
    assert len(applied) == 2
    assert all(obj["metadata"]["ownerReferences"] == [
        {"apiVersion": "apps/v1", "kind": "Deployment", "name": OPERATOR_DEPLOYMENT,
         "uid": "u-7"}] for obj in applied)
    assert api.requests.count(("get", OWN_DEPLOYMENT)) == 1  # read once per process
