"""Kubernetes Events on the ExternalSecretsConfig for every write the operator performs.

The ESC is cluster-scoped, so its Events live in the operator's own namespace
(`POD_NAMESPACE` or the service account's namespace, else `default`). The API server accepts
an Event about a cluster-scoped object outside `default` only if its involvedObject names
that namespace too, so it does (kopf's convention); `kubectl get events -n <operator
namespace>` lists them, and with `default` (local runs) `kubectl describe esc cluster` shows
them as well. Posting an Event
never fails a pass: a lost Event is logged and the pass goes on.
"""

from __future__ import annotations

import logging
import os
import socket
from datetime import UTC, datetime

from manager.apply.results import Action, ObjectResult
from manager.constants import API_VERSION, ESC_KIND, OPERATOR_NAME, SINGLETON_NAME
from manager.kube import ApiError, JsonObject, Kube, own_namespace

logger = logging.getLogger(__name__)

REASONS = {Action.CREATED: "Created", Action.UPDATED: "Updated", Action.ADOPTED: "Adopted",
           Action.DELETED: "Deleted"}


def events_namespace() -> str:
    return own_namespace() or "default"


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class EventRecorder:
    def __init__(self, kube: Kube, namespace: str | None = None):
        self._kube = kube
        self.namespace = namespace or events_namespace()
        self._instance = os.environ.get("POD_NAME") or socket.gethostname()

    async def object_changed(self, esc: JsonObject, result: ObjectResult) -> None:
        reason = REASONS.get(result.action)
        if reason is not None:
            note = f" ({result.note})" if result.note else ""
            await self.post(esc, "Normal", reason, f"{result.action} {result.ref}{note}")

    async def post(self, esc: JsonObject, event_type: str, reason: str, message: str) -> None:
        metadata = esc.get("metadata", {})
        timestamp = now_rfc3339()
        involved = {"apiVersion": API_VERSION, "kind": ESC_KIND,
                    "name": metadata.get("name", SINGLETON_NAME), "uid": metadata.get("uid", "")}
        if self.namespace != "default":
            involved["namespace"] = self.namespace
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"generateName": f"{SINGLETON_NAME}.", "namespace": self.namespace},
            "involvedObject": involved,
            "type": event_type,
            "reason": reason,
            "message": message[:1024],
            "source": {"component": OPERATOR_NAME},
            "reportingComponent": OPERATOR_NAME,
            "reportingInstance": self._instance,
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
        }
        try:
            await self._kube.request("POST", f"/api/v1/namespaces/{self.namespace}/events",
                                     body=event)
        except ApiError as error:
            logger.warning("action=event result=error reason=%s error=%r", reason,
                           f"{error.status} {error.reason}: {error.message}")
