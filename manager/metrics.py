"""The operator's own metrics: the series and what records them, with prometheus_client.
manager/metrics_endpoint/server.py serves them (GET /metrics); this module serves nothing, so that
the API client (manager/client/kube.py) can count its requests without importing the server.

Every series is named `eso_operator_*` and registered once, in prometheus_client's default
registry (which adds the process_* and python_* collectors: RSS, CPU, open files). Labels
take values from short, closed sets: a result, a verb, a resource or kind, an HTTP status,
a condition type; never an object's name, a path or a message, so the number of series stays
flat whatever the cluster holds. The one exception, `certificate_namespace` of the webhook
Certificate's series, is the operand namespace: one value at a time (the ESC is a singleton),
the old series removed when it changes.

Importing prometheus_client adds about 1 MB to the operator's RSS (docs/performance.md).
"""

from __future__ import annotations

import re
import time
from collections import Counter as Tally
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from prometheus_client import Counter, Gauge, Histogram, generate_latest

PASSES = Counter("eso_operator_passes", "Reconcile passes, by how they ended "
                 "(Ready, Progressing, Degraded, Retrying, Unmanaged, Removed, NoConfig, Error).",
                 ["result"])
PASS_DURATION = Histogram("eso_operator_pass_duration_seconds",
                          "Duration of reconcile passes.",
                          buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120))
API_REQUESTS = Counter("eso_operator_api_requests", "Requests to the Kubernetes API, by verb "
                       "(get, list, watch, create, apply, patch, delete) and resource.",
                       ["verb", "resource"])
API_ERRORS = Counter("eso_operator_api_errors", "Failed Kubernetes API requests, by HTTP "
                     "status (0: the server was not reached). A 404 that answers an "
                     "existence check (a missing object, an API group not served) is not an error.",
                     ["status"])
OBJECT_WRITES = Counter("eso_operator_object_writes", "Writes of operand objects by passes, "
                        "by action (created, updated, adopted, deleted) and kind.",
                        ["action", "kind"])
MANAGED_OBJECTS = Gauge("eso_operator_managed_objects", "Objects of the operand the last "
                        "applying pass rendered, by kind.", ["kind"])
CONDITION = Gauge("eso_operator_condition", "Conditions the operator reports: 1 True, 0 False. "
                  "resource ExternalSecretsConfig (status.conditions) or ExternalSecretsManager "
                  "(status.controllerStatuses[controller].conditions).",
                  ["resource", "controller", "type"])
LAST_SUCCESSFUL_PASS = Gauge("eso_operator_last_successful_pass_timestamp_seconds",
                             "When the last pass ended without error or Degraded (Unix time; "
                             "the process start until the first one).")
WATCH_RESTARTS = Counter("eso_operator_watch_restarts", "Watches started again, by kind and "
                         "reason (ended: the server closed the stream; expired: 410; error).",
                         ["kind", "reason"])
LEADER = Gauge("eso_operator_leader", "1 while this instance reconciles: it holds the "
               "leader Lease, or leader election is off; 0 while it waits for the Lease.")
# The operand webhook's serving certificate as cert-manager reports it on its Certificate,
# so that its expiry alert reads a series scraped in the operator's namespace (where the
# operator's rule is, manager/render/alerts.py). Only the leader exports them; none while
# cert-manager does not issue the webhook certificate.
WEBHOOK_CERTIFICATE_EXPIRY = Gauge(
    "eso_operator_webhook_certificate_expiration_timestamp_seconds",
    "When the operand webhook's serving certificate expires (Unix time): status.notAfter of "
    "cert-manager's Certificate external-secrets-webhook in certificate_namespace, as the "
    "leader's last pass read it. Absent while cert-manager does not issue it, or has not yet.",
    ["certificate_namespace"])
WEBHOOK_CERTIFICATE_READY = Gauge(
    "eso_operator_webhook_certificate_ready",
    "The Ready condition of cert-manager's Certificate external-secrets-webhook in "
    "certificate_namespace, as the leader's last pass read it: 1 True, 0 otherwise. Absent "
    "while cert-manager does not issue the webhook certificate.",
    ["certificate_namespace"])
LAST_SUCCESSFUL_PASS.set(time.time())

# Results of a pass that count as successful for LAST_SUCCESSFUL_PASS.
SUCCESSFUL_RESULTS: Final = frozenset({"Ready", "Progressing", "Unmanaged", "Removed",
                                       "NoConfig"})


def record_pass(result: str, seconds: float) -> None:
    PASSES.labels(result).inc()
    PASS_DURATION.observe(seconds)
    if result in SUCCESSFUL_RESULTS:
        LAST_SUCCESSFUL_PASS.set(time.time())


# /api/v1/namespaces/NS/pods/NAME, /apis/GROUP/VERSION/RESOURCE, ... -> the resource plural.
_RESOURCE = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/[^/]+)?/(?P<resource>[^/?]+)"
                       r"(?P<name>/[^/?]+)?(?P<sub>/[^/?]+)?")


def request_labels(method: str, path: str, content_type: str, query: object) -> tuple[str, str]:
    """(verb, resource) of one API request, as the API server's audit log names them."""
    match = _RESOURCE.match(path)
    if match is None:  # discovery (/apis/GROUP/VERSION), /version, ...
        return ("get" if method == "GET" else method.lower()), "discovery"
    resource = match["resource"]
    named = match["name"] is not None
    if match["sub"]:
        resource = f"{resource}{match['sub']}"  # a subresource: deployments/status
    if method == "GET":
        watching = isinstance(query, dict) and query.get("watch") == "true"
        verb = "watch" if watching else ("get" if named else "list")
    elif method == "PATCH":
        verb = "apply" if "apply-patch" in content_type else "patch"
    else:
        verb = {"POST": "create", "PUT": "update", "DELETE": "delete"}.get(method, method.lower())
    return verb, resource


def record_request(method: str, path: str, content_type: str, query: object) -> None:
    API_REQUESTS.labels(*request_labels(method, path, content_type, query)).inc()


def record_error(status: int) -> None:
    API_ERRORS.labels(str(status)).inc()


def record_leader(leading: bool) -> None:
    LEADER.set(1 if leading else 0)
    if not leading:  # what this instance last read is no longer its to report
        record_webhook_certificate(None)


def record_webhook_certificate(certificate: Mapping[str, Any] | None) -> None:
    """The webhook Certificate as a pass read it (its live object), or None: there is none
    (cert-manager off, the Certificate not created, the operand removed). Only the leader
    reports it: a pass still running as the Lease is lost records nothing."""
    if certificate is None or not _leading():
        WEBHOOK_CERTIFICATE_EXPIRY.clear()
        WEBHOOK_CERTIFICATE_READY.clear()
        return
    namespace = str((certificate.get("metadata") or {}).get("namespace") or "")
    status = certificate.get("status") or {}
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions
                if isinstance(c, Mapping))
    expiry = _timestamp(status.get("notAfter"))
    # The other namespace's series go (the operand moved); this one's are set in place, so
    # that no scrape finds them missing between a pass's two calls.
    for gauge in (WEBHOOK_CERTIFICATE_EXPIRY, WEBHOOK_CERTIFICATE_READY):
        for labels in _children(gauge):
            if labels["certificate_namespace"] != namespace:
                gauge.remove(labels["certificate_namespace"])
    WEBHOOK_CERTIFICATE_READY.labels(namespace).set(1 if ready else 0)
    if expiry is None:  # not issued yet, or a value cert-manager never writes
        if {"certificate_namespace": namespace} in _children(WEBHOOK_CERTIFICATE_EXPIRY):
            WEBHOOK_CERTIFICATE_EXPIRY.remove(namespace)
    else:
        WEBHOOK_CERTIFICATE_EXPIRY.labels(namespace).set(expiry)


def _leading() -> bool:
    """What LEADER says (the process starts as a standby until told otherwise)."""
    return any(sample.value == 1 for family in LEADER.collect() for sample in family.samples)


def _timestamp(value: object) -> float | None:
    """An RFC 3339 time (a Kubernetes `metav1.Time`: 2026-11-28T11:34:05Z) as Unix time."""
    if not isinstance(value, str):
        return None
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    return moment.timestamp() if moment.tzinfo is not None else None


def record_writes(writes: Iterable[tuple[str, str]]) -> None:
    """(action, kind) of each object a pass wrote."""
    for action, kind in writes:
        OBJECT_WRITES.labels(action, kind).inc()


def record_managed(kinds: Iterable[str]) -> None:
    """The kinds of the objects an applying pass rendered (one entry per object)."""
    counts = Tally(kinds)
    for labels in _children(MANAGED_OBJECTS):  # kinds no longer rendered
        if labels["kind"] not in counts:
            MANAGED_OBJECTS.labels(**labels).set(0)
    for kind, count in counts.items():
        MANAGED_OBJECTS.labels(kind).set(count)


def record_conditions(resource: str, controller: str,
                      conditions: Iterable[tuple[str, str]]) -> None:
    """(type, status) of the conditions reported for `resource` (its `controller` entry)."""
    for condition_type, status in conditions:
        CONDITION.labels(resource, controller, condition_type).set(
            1 if status == "True" else 0)


def forget_conditions(resource: str) -> None:
    """`resource` is gone (the ESC deleted): its conditions are no longer reported."""
    for labels in _children(CONDITION):
        if labels["resource"] == resource:
            CONDITION.remove(labels["resource"], labels["controller"], labels["type"])


def _children(gauge: Gauge) -> list[dict[str, str]]:
    """The label sets a gauge currently reports."""
    return [dict(sample.labels) for family in gauge.collect() for sample in family.samples]


def record_watch_restart(kind: str, reason: str) -> None:
    WATCH_RESTARTS.labels(kind, reason).inc()


def exposition() -> bytes:
    return generate_latest()
