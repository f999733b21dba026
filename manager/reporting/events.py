"""Kubernetes Events about the ExternalSecretsConfig (and the ExternalSecretsManager), where
administrators look for them.

The ESC is cluster-scoped, so its Events live in `default` with a `regarding` reference
without namespace, as the Events of Nodes do: `kubectl describe esc cluster` lists them,
wherever the operator runs (POD_NAMESPACE plays no part).

Events are written with the events.k8s.io/v1 API. An Event identical to one posted in the
last SERIES_WINDOW (same object, type, reason, action and note) is not posted again: the
earlier one's `series` (count, lastObservedTime) is patched, which `kubectl describe` shows
as "(x4 over 10m)". That is how client-go's event recorder deduplicates. What to post for a
pass is decided elsewhere (manager.reporting.pass_events). Posting never fails a pass: a
lost Event is logged and the pass goes on.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from manager.client.kube import NOT_FOUND, ApiError, JsonObject, Kube
from manager.names import API_VERSION, ESC_KIND, OPERATOR_NAME, SINGLETON_NAME

logger = logging.getLogger(__name__)

EVENTS_NAMESPACE = "default"
EVENTS_PATH = f"/apis/events.k8s.io/v1/namespaces/{EVENTS_NAMESPACE}/events"
SERIES_WINDOW_SECONDS = 6 * 60  # client-go's: a repeat after a longer pause starts anew
NOTE_LIMIT = 1024  # the API server's limit on `note`


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def now_micro() -> str:
    """An RFC 3339 time with microseconds (metav1.MicroTime, required by events.k8s.io)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class EventSpec:
    """One Event to post about the ESC."""

    type: str  # Normal or Warning
    reason: str
    note: str
    action: str = "Reconcile"


@dataclass
class _Series:
    name: str
    count: int
    last_seen: float  # monotonic


class EventRecorder:
    def __init__(self, kube: Kube):
        self._kube = kube
        self._instance = os.environ.get("POD_NAME") or socket.gethostname()
        self._series: dict[tuple[str, ...], _Series] = {}

    async def post(self, esc: JsonObject, event: EventSpec, kind: str = ESC_KIND) -> None:
        """Post `event` about `esc` (or about the ExternalSecretsManager, with its `kind`)."""
        metadata = esc.get("metadata", {})
        uid = str(metadata.get("uid", ""))
        note = _bounded(event.note)
        key = (uid, event.type, event.reason, event.action, note)
        self._forget_finished_series()
        try:
            series = self._series.get(key)
            if series is not None and await self._repeat(series):
                return
            name = await self._create(metadata, event, note, kind)
            self._series[key] = _Series(name, 1, time.monotonic())
        except ApiError as error:
            logger.warning("action=event result=error reason=%s error=%r", event.reason,
                           f"{error.status} {error.reason}: {error.message}")

    async def _create(self, metadata: JsonObject, event: EventSpec, note: str,
                      kind: str) -> str:
        name = f"{metadata.get('name', SINGLETON_NAME)}.{time.time_ns():x}"
        body = {
            "apiVersion": "events.k8s.io/v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": EVENTS_NAMESPACE},
            "eventTime": now_micro(),
            "reportingController": OPERATOR_NAME,
            "reportingInstance": self._instance,
            "action": event.action,
            "reason": event.reason,
            "type": event.type,
            "note": note,
            "regarding": {"apiVersion": API_VERSION, "kind": kind,
                          "name": metadata.get("name", SINGLETON_NAME),
                          "uid": metadata.get("uid", "")},
        }
        await self._kube.request("POST", EVENTS_PATH, body=body)
        return name

    async def _repeat(self, series: _Series) -> bool:
        """Count one more occurrence on the existing Event; False if it is gone (the API
        server expires Events after an hour by default)."""
        patch = {"series": {"count": series.count + 1, "lastObservedTime": now_micro()}}
        try:
            await self._kube.request("PATCH", f"{EVENTS_PATH}/{series.name}", body=patch,
                                     content_type="application/merge-patch+json",
                                     expected=NOT_FOUND)
        except ApiError as error:
            if error.not_found:
                return False
            raise
        series.count += 1
        series.last_seen = time.monotonic()
        return True

    def _forget_finished_series(self) -> None:
        horizon = time.monotonic() - SERIES_WINDOW_SECONDS
        for key in [key for key, series in self._series.items() if series.last_seen < horizon]:
            del self._series[key]


def _bounded(note: str) -> str:
    if len(note.encode()) <= NOTE_LIMIT:
        return note
    suffix = "... (see the status)"
    cut = note.encode()[:NOTE_LIMIT - len(suffix)].decode(errors="ignore")
    return cut + suffix
