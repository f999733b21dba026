"""The operand's alerting rules (the PrometheusRule of the OperandMonitoring feature) and the
operator's own (`operator_alerts`). Pure.

Built here rather than written in the template because alert texts carry Prometheus'
own `{{ $labels.x }}` templating, which jinja2 would read as its own; the template prints
the result through `tojson` like any other value.

Metric names, and where they come from:

- kube_deployment_status_condition: kube-state-metrics (part of every Prometheus Operator
  stack and of OpenShift monitoring);
- externalsecret_status_condition: the external-secrets controller of the pinned release
  (pkg/controllers/externalsecret/esmetrics: labels name, namespace, condition, status);
- eso_operator_last_successful_pass_timestamp_seconds, eso_operator_leader and
  eso_operator_webhook_certificate_expiration_timestamp_seconds: this operator
  (manager/metrics.py), scraped through its own ServiceMonitor; those alerts are in the
  operator's own PrometheusRule (`operator_alerts`), which the operator applies in its own
  namespace at run time (manager/sidetasks/operator_monitoring.py). Every instance is
  scraped, the standby too, and only the leader (eso_operator_leader 1) runs passes.

Two ways the series get their labels, and the rules are right under both:

- a plain Prometheus Operator with the ServiceMonitor's `honorLabels: true`: the
  externalsecret_* series keep the `namespace` the controller exports (the ExternalSecret's);
- OpenShift's user-workload monitoring, which overrides honorLabels and enforces the object's
  namespace: each series gets `namespace` = the namespace of the ServiceMonitor (the operand's)
  and the exported one moves to `exported_namespace`; each rule expression gets
  `namespace="<the PrometheusRule's namespace>"` added to every selector. So no rule may
  depend on another namespace's series (the operator's alerts live in the operator's
  namespace, with its metrics), and the ExternalSecret's own namespace is read from
  `exported_namespace` where the series has one, else from `namespace`.

That is why the webhook certificate's expiry alert reads the operator's series and not
cert-manager's `certmanager_certificate_expiration_timestamp_seconds`: scraped by cert-manager's
own ServiceMonitor, those carry cert-manager's namespace under that enforcement, and no rule in
the operand's (or the operator's) namespace can ever see them. The operator exports the
Certificate's status.notAfter itself (the Certificate's namespace in `certificate_namespace`,
a label no scraper rewrites), scraped in the operator's namespace beside its other series, so
the alert is in the operator's rule and is right under both labellings.

Every alert has a `summary`, a `description` that names the commands to run, a
`runbook_url` (its page in docs/runbooks/: symptom, impact, diagnosis, mitigation) and a
`severity` label. tests/unit/render/test_promtool.py checks them with `promtool check rules` and
runs `promtool test rules` (tests/promtool/alerts_test.yaml, alerts_test_uwm.yaml) on each,
firing and not.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from manager.config import EffectiveConfig
from manager.names import (
    DEPLOYMENT_NAMES,
    LEASE_NAME,
    OPERATOR_DEPLOYMENT,
    OPERATOR_NAME,
    WEBHOOK_CERTIFICATE,
)
from manager.render import labels
from manager.render.components import CERT_CONTROLLER_APP, CONTROLLER_APP, WEBHOOK_APP

RULE_GROUP: Final = "external-secrets-operand"
OPERATOR_RULE_GROUP: Final = "external-secrets-operator"
CONTROLLER_METRICS_JOB: Final = "external-secrets-metrics"
OPERATOR_METRICS_JOB: Final = "external-secrets-operator-metrics"
DEPLOYMENTS: Final = tuple(DEPLOYMENT_NAMES.values())
# Seconds: a pass runs at least every resync (300 s) and retries faster while it fails.
OPERATOR_PASS_STALE: Final = 900
CERTIFICATE_WARNING_DAYS: Final = 7
# How long no instance may be seen leading before ExternalSecretsOperatorDown fires: longer
# than a restart takes (the Deployment's strategy is Recreate: the old pod stops within its
# 30 s grace, releasing the Lease, then the new one is scheduled, pulls its image, starts,
# takes the Lease and is scraped within 30 s; a crashed leader's Lease is taken over within
# 137 s plus a 26 s retry period, manager/runtime/leader.py LeaseTiming), with room for a slow pull.
OPERATOR_DOWN_FOR: Final = "15m"
# Where the runbooks (docs/runbooks/<alert>.md) are published: the project's repository, as
# the operator image's registry organisation names it. The one place to change for a fork or
# a mirror of the docs; tests/unit/render/test_runbooks.py checks every page exists.
RUNBOOK_BASE_URL: Final = (
    "https://github.com/external-secrets-operator/external-secrets-operator/blob/main/"
    "docs/runbooks/")


def runbook_url(alert: str) -> str:
    return f"{RUNBOOK_BASE_URL}{alert}.md"


def _alert(name: str, expr: str, duration: str, severity: str,
           *texts: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """An alerting rule; `texts` are its summary and its description."""
    summary, description = texts
    return {"alert": name, "expr": expr, "for": duration,
            "labels": {"severity": severity, **(labels or {})},
            "annotations": {"summary": summary, "description": description,
                            "runbook_url": runbook_url(name)}}


def operand_alerts(config: EffectiveConfig) -> list[dict[str, Any]]:
    """The rules of the PrometheusRule, for the operand in `config.namespace`."""
    namespace = config.namespace
    deployments = "|".join(DEPLOYMENTS)
    not_ready = (f'externalsecret_status_condition{{job="{CONTROLLER_METRICS_JOB}", '
                 'condition="Ready", status="False"')
    return [
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
            f"max by (namespace, name) ({own_namespace(not_ready, namespace)}) == 1",
            "15m", "warning",
            "ExternalSecret {{ $labels.namespace }}/{{ $labels.name }} fails to sync",
            "ExternalSecret {{ $labels.namespace }}/{{ $labels.name }} has not been Ready for "
            "15 minutes: its target Secret is not refreshed from the provider. Run: kubectl -n "
            "{{ $labels.namespace }} describe externalsecret {{ $labels.name }} (its Events "
            "carry the provider's error); kubectl -n {{ $labels.namespace }} get secretstore,"
            f"clustersecretstore; kubectl -n {namespace} logs deploy/external-secrets."),
    ]


def own_namespace(selector: str, scraped_in: str,
                  around: Callable[[str], str] = lambda series: series) -> str:
    """`selector` (without its closing brace) with `namespace` set to the namespace the
    series' object is in: `exported_namespace` where the scraper moved it there (user-workload
    monitoring; then `namespace` is the one the series was scraped in, which must be
    `scraped_in`, so that another operand's series are not ours even where no namespace is
    enforced), else `namespace` itself (honorLabels kept it). `around` wraps each of the two
    selectors (`rate(...[5m])` for a counter: the dashboard's panels)."""
    moved_series = around(f'{selector}, namespace="{scraped_in}", exported_namespace!=""}}')
    kept_series = around(f'{selector}, exported_namespace=""}}')
    moved = (f'label_replace({moved_series}, '
             '"namespace", "$1", "exported_namespace", "(.+)")')
    return f"{moved} or {kept_series}"


def operator_alerts(namespace: str) -> list[dict[str, Any]]:
    """The rules of the operator's own PrometheusRule, in the operator's namespace
    `namespace` (where its metrics are, so a namespace the scraper enforces matches them)."""
    job = f'job="{OPERATOR_METRICS_JOB}"'
    return [
        _alert(
            "ExternalSecretsOperatorPassesFailing",
            # The leader's only: a standby runs no pass, so its timestamp stays at its start.
            f"(time() - eso_operator_last_successful_pass_timestamp_seconds{{{job}}} "
            f"> {OPERATOR_PASS_STALE}) and eso_operator_leader{{{job}}} == 1",
            "5m", "warning",
            "the external-secrets operator has not completed a pass for 15 minutes",
            "The external-secrets operator in {{ $labels.namespace }} (the leader, pod "
            "{{ $labels.pod }}) has ended every pass Degraded or in error for 15 minutes: "
            "drift is not repaired and spec changes do not reach the operand. Run: kubectl "
            "get esc cluster -o wide; kubectl describe esc cluster (status.failure names the "
            "object and the fix); kubectl -n {{ $labels.namespace }} logs "
            "{{ $labels.pod }}."),
        _alert(
            "ExternalSecretsOperatorDown",
            # absent() of a comparison: no instance scraped (none runs, or Prometheus cannot
            # read its metrics), or none holds the Lease. Its result has no labels: the rule
            # names the namespace.
            f'absent(eso_operator_leader{{{job}, namespace="{namespace}"}} == 1)',
            OPERATOR_DOWN_FOR, "warning",
            "no external-secrets operator is running and leading",
            f"No instance of the external-secrets operator in {namespace} has been scraped "
            "while holding the leader Lease for 15 minutes: nothing reconciles the operand "
            "(drift is not repaired, spec changes do not reach it, status is not updated). "
            "Either no instance runs, Prometheus cannot scrape it (up{"
            f'{job}, namespace="{namespace}"}} is 0: the target\'s last error says why), '
            "or every instance waits for the Lease. Run: kubectl -n "
            f"{namespace} get deployment,pods -l app={OPERATOR_NAME}; kubectl -n {namespace} "
            f"describe deployment {OPERATOR_DEPLOYMENT} (why no pod runs); kubectl -n "
            f"{namespace} logs -l app={OPERATOR_NAME} --prefix --tail=50; kubectl -n "
            f"{namespace} get lease {LEASE_NAME} -o yaml (holderIdentity: the pod that "
            "leads).",
            labels={"namespace": namespace}),
        _webhook_certificate_expiring(job),
    ]


def _webhook_certificate_expiring(job: str) -> dict[str, Any]:
    """The operand webhook's certificate expires soon, as the operator reads cert-manager's
    Certificate (eso_operator_webhook_certificate_expiration_timestamp_seconds; no series
    while cert-manager does not issue it, so the rule is always there and quiet then).

    Here and not in the operand's rule: the series is scraped in the operator's namespace,
    which is this rule's, so user-workload monitoring's enforced `namespace` matches it; and
    without that enforcement `namespace` is the operator's too (the series exports no
    `namespace`, only `certificate_namespace`). cert-manager's own series could not serve:
    under the enforcement they carry cert-manager's namespace, which no rule of ours may read.
    Only the leader's series counts: it alone runs passes and exports it (manager/metrics.py
    drops it when the Lease is lost), and the join with eso_operator_leader == 1, the stale-
    pass alert's guard, keeps out the series of any instance not leading at that scrape."""
    days = CERTIFICATE_WARNING_DAYS
    where = "{{ $labels.certificate_namespace }}"
    return _alert(
        "ExternalSecretsWebhookCertificateExpiring",
        "min by (namespace, certificate_namespace) ("
        f"(eso_operator_webhook_certificate_expiration_timestamp_seconds{{{job}}} - time()) "
        f"and on (namespace, pod) eso_operator_leader{{{job}}} == 1) < {days} * 86400",
        "1h", "warning",
        f"the external-secrets webhook certificate expires in less than {days} days",
        f"cert-manager has not renewed Certificate {where}/{WEBHOOK_CERTIFICATE}, "
        "which expires in {{ $value | humanizeDuration }}; once expired the API server "
        f"refuses ExternalSecret and SecretStore changes. Run: kubectl -n {where} describe "
        f"certificate {WEBHOOK_CERTIFICATE}; kubectl -n {where} get certificaterequests; "
        f"cmctl renew -n {where} {WEBHOOK_CERTIFICATE} once the cause is fixed.")


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
