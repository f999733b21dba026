"""The operator's own ServiceMonitor and PrometheusRule, in the operator's namespace.

They cannot ship in the bundle (OLM fails the install where monitoring.coreos.com is not
served), so every pass applies them here while the ExternalSecretsManager's feature
OperandMonitoring is on and the cluster serves ServiceMonitor and PrometheusRule; with the
feature off they are deleted. They follow the operand's rules of ownership without joining
the operand: they are the operator's when its field manager applied them (an object of the
same name that someone else made is left alone and named in status), they are written only
when they differ (server-side apply; a steady pass reads two objects and writes nothing),
and they carry the operator's labels but not the operand's managed-by label, so the
operand's watches, pruning and `uninstall --operand` never see them. When the API goes
(the Prometheus Operator's CRDs removed) the objects go with it and there is nothing to do.

Tied to OperandMonitoring rather than always on: the administrator turns monitoring objects
on in one place, and the operator creates nothing in a monitoring stack nobody asked for.
The scrape credentials they name (the scraper's token Secret, the CA ConfigMap) ship in the
bundle (manager/olm/operator_manifests.py).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from manager.apply.convergence import applied_by, is_converged, prepare_for_apply
from manager.apply.discovery import Discovery
from manager.apply.ownership import managed_by
from manager.apply.results import ObjectRef
from manager.constants import FIELD_MANAGER
from manager.kube import JsonObject, Kube
from manager.olm import operator_manifests
from manager.render.alerts import operator_alerts

logger = logging.getLogger(__name__)

MONITORING_API = "monitoring.coreos.com/v1"
NOT_SERVED = ("the cluster does not serve monitoring.coreos.com/v1 (ServiceMonitor, "
              "PrometheusRule), so nothing is scraped or alerted on: install the Prometheus "
              "Operator's CRDs (on OpenShift: they are always served; enable user-workload "
              "monitoring or label the namespaces openshift.io/cluster-monitoring=true)")


@dataclass(frozen=True)
class MonitoringReport:
    """What the feature did this pass, for the ExternalSecretsManager's status."""

    enabled: bool
    served: bool
    foreign: tuple[str, ...] = ()  # objects of our names that are not the operator's

    @property
    def note(self) -> str | None:
        """Why OperandMonitoring has less effect than asked, or None."""
        if not self.enabled:
            return None
        if not self.served:
            return f"feature OperandMonitoring is enabled but has no effect: {NOT_SERVED}"
        if self.foreign:
            return ("feature OperandMonitoring: " + "; ".join(self.foreign)
                    + " (not the operator's: left as they are; delete them to have the "
                    "operator apply its own)")
        return None


def desired(namespace: str) -> list[JsonObject]:
    return [operator_manifests.service_monitor(namespace),
            operator_manifests.prometheus_rule(operator_alerts(), namespace)]


class OperatorMonitoring:
    def __init__(self, kube: Kube, discovery: Discovery, namespace: str | None):
        self._kube = kube
        self._discovery = discovery
        self._namespace = namespace
        self._cleared = False  # feature off and nothing of ours left: no read until it changes

    async def reconcile(self, enabled: bool) -> MonitoringReport:
        """Apply or delete the two objects; raises ApiError (the pass is retried)."""
        served = all([await self._discovery.resolve(MONITORING_API, kind) is not None
                       for kind in ("ServiceMonitor", "PrometheusRule")])
        if self._namespace is None or not served:  # not in a pod, or nothing can exist
            self._cleared = False
            return MonitoringReport(enabled, served)
        if not enabled and self._cleared:
            return MonitoringReport(enabled, served)
        foreign: list[str] = []
        for obj in desired(self._namespace):
            ref = ObjectRef.of(obj)
            resource = await self._discovery.require(ref.api_version, ref.kind)
            path = resource.object_path(ref.name, ref.namespace)
            live = await self._kube.get(path)
            ours = live is not None and applied_by(live, FIELD_MANAGER) is not None
            if live is not None and not ours:
                if enabled:
                    foreign.append(f"{ref} exists and is managed by {managed_by(live)}")
            elif enabled:
                await self._apply(path, obj, live, ref)
            elif live is not None:
                await self._kube.delete(path, uid=live["metadata"].get("uid"))
                logger.info("action=delete result=deleted kind=%s name=%s reason=%r", ref.kind,
                            ref.where, "OperandMonitoring is off")
        self._cleared = not enabled
        return MonitoringReport(enabled, served, tuple(foreign))

    async def _apply(self, path: str, obj: JsonObject, live: JsonObject | None,
                     ref: ObjectRef) -> None:
        body = prepare_for_apply(obj)
        if is_converged(body, live, FIELD_MANAGER):
            return
        await self._kube.apply(path, body, field_manager=FIELD_MANAGER)
        logger.info("action=apply result=%s kind=%s name=%s",
                    "created" if live is None else "updated", ref.kind, ref.where)

    def forget(self) -> None:
        """Read again next pass (after an error, or when the API may have changed)."""
        self._cleared = False

