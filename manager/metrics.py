"""The operator's own metrics: the series and what records them, with prometheus_client.
manager/metrics_endpoint/server.py serves them (GET /metrics); this module serves nothing, so that
the API client (manager/client/kube.py) can count its requests without importing the server.

Every series is named `eso_operator_*` and registered once, in prometheus_client's default
registry (which adds the process_* and python_* collectors: RSS, CPU, open files). Labels
take values from short, closed sets: a result, a verb, a resource or kind, an HTTP status,
a condition type; never an object's name, a path or a message, so the number of series stays
flat whatever the cluster holds.

Importing prometheus_client adds about 1 MB to the operator's RSS (docs/performance.md).
"""

from __future__ import annotations

import re
import time
from collections import Counter as Tally
from collections.abc import Iterable
from typing import Final

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
