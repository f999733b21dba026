"""The operand's alerting rules (the PrometheusRule of the OperandMonitoring feature). Pure.

Built here rather than written in the template because alert texts carry Prometheus'
own `{{ $labels.x }}` templating, which jinja2 would read as its own; the template prints
the result through `tojson` like any other value.

Metric names, and where they come from:

- kube_deployment_status_condition: kube-state-metrics (part of every Prometheus Operator
  stack and of OpenShift monitoring);
- certmanager_certificate_expiration_timestamp_seconds: cert-manager's controller (only
  rendered when cert-manager issues the webhook certificate);
- externalsecret_status_condition: the external-secrets controller of the pinned release
  (pkg/controllers/externalsecret/esmetrics: labels name, namespace, condition, status);
- eso_operator_last_successful_pass_timestamp_seconds: this operator (manager/metrics.py),
  scraped through its own ServiceMonitor; that alert is in the operator's own PrometheusRule
  (`operator_alerts`), which the operator applies in its own namespace at run time
  (manager/controllers/operator_monitoring.py).

Two ways the series get their labels, and the rules are right under both:

- a plain Prometheus Operator with the ServiceMonitor's `honorLabels: true`: the
  externalsecret_* series keep the `namespace` the controller exports (the ExternalSecret's);
- OpenShift's user-workload monitoring, which overrides honorLabels and enforces the object's
  namespace: each series gets `namespace` = the namespace of the ServiceMonitor (the operand's)
  and the exported one moves to `exported_namespace`; each rule expression gets
  `namespace="<the PrometheusRule's namespace>"` added to every selector. So no rule may
  depend on another namespace's series (the operator's alert lives in the operator's
  namespace, with its metrics), and the ExternalSecret's own namespace is read from
  `exported_namespace` where the series has one, else from `namespace`.

Every alert has a `summary`, a `description` that names the commands to run, and a
`severity` label. tests/unit/test_promtool.py checks them with `promtool check rules` and
runs `promtool test rules` (tests/promtool/alerts_test.yaml) on each, firing and not.
"""

from __future__ import annotations

from typing import Any, Final

from manager.config import EffectiveConfig
from manager.constants import OPERATOR_DEPLOYMENT
from manager.render import labels
from manager.render.components import CERT_CONTROLLER_APP, CONTROLLER_APP, WEBHOOK_APP

RULE_GROUP: Final = "external-secrets-operand"
OPERATOR_RULE_GROUP: Final = "external-secrets-operator"
WEBHOOK_CERTIFICATE: Final = "external-secrets-webhook"
CONTROLLER_METRICS_JOB: Final = "external-secrets-metrics"
OPERATOR_METRICS_JOB: Final = "external-secrets-operator-metrics"
DEPLOYMENTS: Final = ("external-secrets", "external-secrets-webhook",
                      "external-secrets-cert-controller", "bitwarden-sdk-server")
# Seconds: a pass runs at least every resync (300 s) and retries faster while it fails.
OPERATOR_PASS_STALE: Final = 900
CERTIFICATE_WARNING_DAYS: Final = 7


def _alert(name: str, expr: str, duration: str, severity: str,
           *texts: str) -> dict[str, Any]:
    """An alerting rule; `texts` are its summary and its description."""
    summary, description = texts
    return {"alert": name, "expr": expr, "for": duration, "labels": {"severity": severity},
            "annotations": {"summary": summary, "description": description}}


def operand_alerts(config: EffectiveConfig) -> list[dict[str, Any]]:
    """The rules of the PrometheusRule, for the operand in `config.namespace`."""
    namespace = config.namespace
    deployments = "|".join(DEPLOYMENTS)
    not_ready = (f'externalsecret_status_condition{{job="{CONTROLLER_METRICS_JOB}", '
                 'condition="Ready", status="False"')
    rules = [
        _alert(
            "ExternalSecretsDeploymentUnavailable",
            f'kube_deployment_status_condition{{namespace="{namespace}", '
            f'deployment=~"{deployments}", condition="Available", status="false"}} == 1',
            "10m", "critical",
            "external-secrets component {{ $labels.deployment }} is unavailable",
            "Deployment {{ $labels.namespace }}/{{ $labels.deployment }} has had no available "
            "replica for 10 minutes: ExternalSecrets are not synced (controller), or "
            "ExternalSecrets and SecretStores cannot be changed (webhook). Run: kubectl -n "
            "{{ $labels.namespace }} describe deployment {{ $labels.deployment }}; kubectl -n "
            "{{ $labels.namespace }} get pods -l app.kubernetes.io/name={{ $labels.deployment }}"
            "; kubectl get esc cluster -o wide (the operator's view)."),
        _alert(
            "ExternalSecretSyncFailing",
            f"max by (namespace, name) ({_own_namespace(not_ready)}) == 1",
            "15m", "warning",
            "ExternalSecret {{ $labels.namespace }}/{{ $labels.name }} fails to sync",
            "ExternalSecret {{ $labels.namespace }}/{{ $labels.name }} has not been Ready for "
            "15 minutes: its target Secret is not refreshed from the provider. Run: kubectl -n "
            "{{ $labels.namespace }} describe externalsecret {{ $labels.name }} (its Events "
            "carry the provider's error); kubectl -n {{ $labels.namespace }} get secretstore,"
            f"clustersecretstore; kubectl -n {namespace} logs deploy/external-secrets."),
    ]
    if config.cert_manager.enabled:
        days = CERTIFICATE_WARNING_DAYS
        rules.append(_alert(
            "ExternalSecretsWebhookCertificateExpiring",
            f'certmanager_certificate_expiration_timestamp_seconds{{namespace="{namespace}", '
            f'name="{WEBHOOK_CERTIFICATE}"}} - time() < {days} * 86400',
            "1h", "warning",
            "the external-secrets webhook certificate expires in less than "
            f"{days} days",
            f"cert-manager has not renewed Certificate {namespace}/{WEBHOOK_CERTIFICATE}, "
            "which expires in {{ $value | humanizeDuration }}; once expired the API server "
            "refuses ExternalSecret and SecretStore changes. Run: kubectl -n "
            f"{namespace} describe certificate {WEBHOOK_CERTIFICATE}; kubectl -n {namespace} "
            "get certificaterequests; cmctl renew -n "
            f"{namespace} {WEBHOOK_CERTIFICATE} once the cause is fixed."))
    return rules


def _own_namespace(selector: str) -> str:
    """`selector` (without its closing brace) with `namespace` set to the namespace the
    series' object is in: `exported_namespace` where the scraper moved it there (user-workload
    monitoring), else `namespace` itself (honorLabels kept it)."""
    moved = (f'label_replace({selector}, exported_namespace!=""}}, '
             '"namespace", "$1", "exported_namespace", "(.+)")')
    return f'{moved} or {selector}, exported_namespace=""}}'


def operator_alerts() -> list[dict[str, Any]]:
    """The rules of the operator's own PrometheusRule, in the operator's namespace (where its
    metrics are, so a namespace the scraper enforces matches them)."""
    return [
        _alert(
            "ExternalSecretsOperatorPassesFailing",
            f'time() - eso_operator_last_successful_pass_timestamp_seconds{{'
            f'job="{OPERATOR_METRICS_JOB}"}} > {OPERATOR_PASS_STALE}',
            "5m", "warning",
            "the external-secrets operator has not completed a pass for 15 minutes",
            "The external-secrets operator in {{ $labels.namespace }} has ended every pass "
            "Degraded or in error for 15 minutes: drift is not repaired and spec changes do "
            "not reach the operand. Run: kubectl get esc cluster -o wide; kubectl describe esc "
            "cluster (status.failure names the object and the fix); kubectl -n "
            "{{ $labels.namespace }} logs deploy/" + OPERATOR_DEPLOYMENT + "."),
    ]


# The label that puts a namespace under OpenShift's platform monitoring (and out of
# user-workload monitoring), and the namespaces of the two Prometheus stacks.
CLUSTER_MONITORING_LABEL: Final = "openshift.io/cluster-monitoring"
PLATFORM_MONITORING_NAMESPACE: Final = "openshift-monitoring"
USER_WORKLOAD_MONITORING_NAMESPACE: Final = "openshift-user-workload-monitoring"


def metrics_scrapers(config: EffectiveConfig) -> list[dict[str, Any]]:
    """The NetworkPolicy peers that may reach the operand's metrics ports: the Prometheus
    that scrapes the operand namespace on OpenShift. `kubernetes.io/metadata.name`, which the
    API server sets on every namespace, names it (no other label is promised)."""
    scraper = (PLATFORM_MONITORING_NAMESPACE if config.monitoring.platform_scraped
               else USER_WORKLOAD_MONITORING_NAMESPACE)
    return [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scraper}}}]


def monitoring_context(config: EffectiveConfig) -> dict[str, Any]:
    """What the monitoring templates see as `monitoring`: the rule groups, and the labels
    that select each metrics Service (its component's name, and ours only)."""
    def selector(app_name: str) -> dict[str, str]:
        return {**labels.selector_labels(app_name), labels.MANAGED_BY_KEY: labels.MANAGED_BY}

    return {
        "scrapers": metrics_scrapers(config),
        "rule_groups": [{"name": RULE_GROUP, "rules": operand_alerts(config)}],
        "service_selectors": {"controller": selector(CONTROLLER_APP),
                              "webhook": selector(WEBHOOK_APP),
                              "cert_controller": selector(CERT_CONTROLLER_APP)},
    }
