"""The operand's dashboard in OpenShift's console: the `console-dashboard` component. Pure.

Where and how the console finds it (openshift/console, monitoring/dashboards): it lists the
ConfigMaps of `openshift-config-managed` labelled `console.openshift.io/dashboard: "true"`,
takes the first value of each one's `data` as a Grafana dashboard in JSON, and names the
dashboard by the ConfigMap (its URL) and by the JSON's `title` (its menu entry). A value that
is not JSON puts an error on the whole Dashboards page, so the text is `json.dumps` of a dict.
The namespace and the label are the console's convention; the ConfigMap, of a name no one else
uses (`DASHBOARD_CONFIGMAP`), is the operator's: labelled, applied and pruned like every
operand object, and rendered only where that namespace exists (OpenShift; a cluster fact).

What the console draws of the JSON, and so all this module writes:

- the old, row-based layout (`rows`, each with `panels`; Grafana's schemaVersion 14, which
  Grafana itself still imports) or a flat `panels` list cut into rows by `row` panels;
- panels of type `graph`, `singlestat`, `gauge`, `table` and `grafana-piechart-panel` (a bar
  chart); a panel of any other type is left out without a word;
- of a panel: `title`, `span` (columns of 12: three panels of span 4 fill a row),
  `targets[].expr` and `.legendFormat` (`{{label}}`), `yaxes[0].format` (`short`, `s`, `ms`,
  `bytes`, `percentunit`, ...), `stack`, `legend.show`; of a singlestat the first sample
  only, with `decimals`, `format`, `postfix`, `valueMaps` (`"null"`: no sample) and the colour
  of the last `thresholds` entry at or below the value;
- templating variables of type `query` and `interval` (none here: the operand namespace is
  known when rendering);
- no `datasource`: the console asks the cluster's Thanos Querier, which serves the platform's
  and the user workloads' series together and enforces no namespace in the administrator's
  view. A `datasource` object naming a ConfigMap labelled
  `console.openshift.io/dashboard-datasource` is for another Prometheus (the dashboards
  console plugin) and is not wanted here.

The queries read the operand's own series under both ways they get their labels (as the
alerts do, manager/render/alerts.py): user-workload monitoring moves the namespace of an
ExternalSecret into `exported_namespace` and sets `namespace` to the operand's, honorLabels
keeps it in `namespace` (`alerts.own_namespace`). The series, by release (external-secrets
v1.3.2 and v2.9.0 export the same names):

- `externalsecret_sync_calls_total`, `externalsecret_sync_calls_error` (counters, without a
  `_total` on the second), `externalsecret_status_condition` (gauge): the controller
  (pkg/controllers/externalsecret/esmetrics; labels `name`, `namespace`, and `condition`,
  `status` on the gauge), job `external-secrets-metrics`;
- `controller_runtime_webhook_latency_seconds` and `controller_runtime_webhook_requests_total`
  (label `webhook`: the path; `code` on the counter): the webhook's controller-runtime
  (v0.22 in v1.3.2, v0.24 in v2.9.0), job `external-secrets-webhook`. v0.22 declares the
  latency a native histogram without classic buckets, so a Prometheus that does not ingest
  native histograms (OpenShift's, by default) stores only its `_sum` and `_count` (and a lone
  `+Inf` bucket); v0.24 has classic buckets again, but a factor of 10 apart (10 ns to
  1000 s). So the panel shows the mean latency, `_sum` over `_count`, right with both, and
  no quantile;
- `eso_operator_webhook_certificate_expiration_timestamp_seconds`: this operator, the
  leader's only (manager/metrics.py), scraped in the operator's namespace, job
  `external-secrets-operator-metrics`; no series while cert-manager does not issue the
  webhook's certificate (the cert-controller renews its own), which the panel says.

tests/unit/render/test_dashboard.py checks the shape and the names (against both release
trees); tests/unit/render/test_promtool.py turns every panel's query into a recording rule
for `promtool check rules` and evaluates it with `promtool test rules` against recorded
series in both labellings (tests/promtool/dashboard_test.yaml).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from manager.config import EffectiveConfig
from manager.names import (
    CONSOLE_DASHBOARD_LABEL,
    CONSOLE_DASHBOARDS_NAMESPACE,
    DASHBOARD_CONFIGMAP,
    WEBHOOK_DEPLOYMENT,
)
from manager.render.alerts import CONTROLLER_METRICS_JOB, OPERATOR_METRICS_JOB, own_namespace

DATA_KEY: Final = "external-secrets.json"
WEBHOOK_METRICS_JOB: Final = WEBHOOK_DEPLOYMENT
"""The webhook's Service, which its ServiceMonitor selects: the Prometheus Operator's job."""
TITLE: Final = "External Secrets / Operand"
WINDOW: Final = "5m"
"""The rate window: ten scrapes at the ServiceMonitors' 30 s interval."""
SUPPORTED_PANELS: Final = frozenset(
    {"graph", "singlestat", "gauge", "table", "grafana-piechart-panel"})
"""The panel types the console draws (a `row` only groups)."""
# Seconds in a day: the certificate's remaining life is shown in days.
DAY: Final = 86400
CERTIFICATE_THRESHOLDS: Final = ((0, "red"), (7, "orange"), (30, "green"))
"""Colours of the days left: under a week is the alert's threshold (alerts.py)."""


def _rate(series: str) -> str:
    return f"rate({series}[{WINDOW}])"


def _controller(metric: str, *matchers: str) -> str:
    """A controller series' selector without its closing brace (own_namespace closes it)."""
    return f"{metric}{{" + ", ".join((f'job="{CONTROLLER_METRICS_JOB}"', *matchers))


def _webhook(metric: str, namespace: str) -> str:
    return f'{metric}{{job="{WEBHOOK_METRICS_JOB}", namespace="{namespace}"}}'


def _target(expr: str, legend: str | None = None) -> dict[str, Any]:
    target: dict[str, Any] = {"expr": expr}
    if legend is not None:
        target["legendFormat"] = legend
    return target


def _graph(title: str, description: str, unit: str, *targets: dict[str, Any],
           stack: bool = False) -> dict[str, Any]:
    return {"type": "graph", "title": title, "description": description, "span": 4,
            "targets": list(targets), "yaxes": [{"format": unit}, {"format": "short"}],
            "legend": {"show": True}, "stack": stack}


def _singlestat(title: str, description: str, expr: str, **display: Any) -> dict[str, Any]:
    return {"type": "singlestat", "title": title, "description": description, "span": 4,
            "targets": [_target(expr)], "decimals": 0, "format": "short", **display}


def sync_panels(namespace: str) -> list[dict[str, Any]]:
    """Sync rate, sync errors by namespace, and the ExternalSecrets not Ready now."""
    calls = own_namespace(_controller("externalsecret_sync_calls_total"), namespace, _rate)
    errors = own_namespace(_controller("externalsecret_sync_calls_error"), namespace, _rate)
    not_ready = own_namespace(
        _controller("externalsecret_status_condition", 'condition="Ready"', 'status="False"'),
        namespace)
    return [
        _singlestat("ExternalSecrets not Ready",
                    "ExternalSecrets whose Ready condition is False now (the alert "
                    "ExternalSecretSyncFailing fires for one after 15 minutes)",
                    f"count(({not_ready}) == 1) or vector(0)"),
        _graph("Sync rate", "Sync calls of the controller per second, and those that failed",
               "short", _target(f"sum({calls})", "syncs/s"),
               _target(f"sum({errors})", "errors/s")),
        _graph("Sync errors by namespace",
               "Failed sync calls per second, by the namespace of the ExternalSecret",
               "short", _target(f"sum by (namespace) ({errors})", "{{namespace}}"),
               stack=True),
    ]


def webhook_panels(namespace: str) -> list[dict[str, Any]]:
    """The webhook certificate's remaining life, its mean latency and its answers."""
    latency = "controller_runtime_webhook_latency_seconds"
    mean = (f"sum by (webhook) ({_rate(_webhook(f'{latency}_sum', namespace))}) / "
            f"sum by (webhook) ({_rate(_webhook(f'{latency}_count', namespace))})")
    requests = _rate(_webhook("controller_runtime_webhook_requests_total", namespace))
    job = f'job="{OPERATOR_METRICS_JOB}"'
    expiry = (f"min((eso_operator_webhook_certificate_expiration_timestamp_seconds{{{job}, "
              f'certificate_namespace="{namespace}"}} - time()) '
              f"and on (namespace, pod) eso_operator_leader{{{job}}} == 1) / {DAY}")
    return [
        _singlestat(
            "Webhook certificate expires in",
            "Days until the webhook's serving certificate expires, as cert-manager's "
            "Certificate says (the operator exports it); none while the cert-controller "
            "issues it", expiry, decimals=1, postfix=" days",
            valueMaps=[{"op": "=", "value": "null", "text": "not issued by cert-manager"}],
            options={"fieldOptions": {"thresholds": [
                {"value": days, "color": colour} for days, colour in CERTIFICATE_THRESHOLDS]}}),
        _graph("Webhook latency",
               "Mean time the webhook takes to answer an admission request, by webhook",
               "s", _target(mean, "{{webhook}}")),
        _graph("Webhook requests by code",
               "Admission requests the webhook answered per second, by HTTP status code",
               "short", _target(f"sum by (code) ({requests})", "{{code}}"), stack=True),
    ]


def dashboard(config: EffectiveConfig) -> dict[str, Any]:
    """The Grafana dashboard (as the console reads it) of the operand in `config.namespace`."""
    rows = [("ExternalSecrets", sync_panels(config.namespace)),
            ("Webhook", webhook_panels(config.namespace))]
    number = iter(range(1, 100))
    return {
        "title": TITLE,
        "tags": ["external-secrets"],
        "schemaVersion": 14,
        "editable": False,
        "time": {"from": "now-1h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": []},
        "annotations": {"list": []},
        "rows": [{"title": title, "showTitle": True, "collapse": False,
                  "panels": [{"id": next(number), **panel} for panel in panels]}
                 for title, panels in rows],
    }


def panels(board: dict[str, Any]) -> list[dict[str, Any]]:
    """Every panel of a dashboard, row by row."""
    return [panel for row in board["rows"] for panel in row["panels"]]


def record_name(panel: dict[str, Any], index: int) -> str:
    """The name of a recording rule for the `index`-th query of `panel` (the promtool tests
    evaluate the panels' queries as recording rules): its title as a metric name."""
    slug = re.sub(r"[^a-z0-9]+", "_", str(panel["title"]).lower()).strip("_")
    return f"dashboard:{slug}:{index}"


def recording_rules(board: dict[str, Any]) -> list[dict[str, str]]:
    """Every query of the dashboard as a recording rule (`record_name`)."""
    return [{"record": record_name(panel, index), "expr": target["expr"]}
            for panel in panels(board) for index, target in enumerate(panel["targets"])]


def dashboard_context(config: EffectiveConfig) -> dict[str, Any]:
    """What the console-dashboard template sees as `dashboard`."""
    return {"name": DASHBOARD_CONFIGMAP, "namespace": CONSOLE_DASHBOARDS_NAMESPACE,
            "labels": {CONSOLE_DASHBOARD_LABEL: "true"},
            "data": {DATA_KEY: json.dumps(dashboard(config), indent=2)}}
