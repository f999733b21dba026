"""Facts of the cluster that shape the desired objects (the "cluster facts" input of
ARCHITECTURE.md's data flow), gathered before rendering.

Monitoring: with the OperandMonitoring feature on, whether the API server serves
ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1) right now; a CRD watch
(preflight.dependency_watches) starts a pass when they arrive or go, so no restart is needed.

The CA bundle: with cert-manager on and its CA injector off (addInjectorAnnotations "false"),
nothing else would put a CA into the webhooks' caBundle, so the operator takes the CA that
cert-manager published with the issued certificate (`ca.crt` of the Certificate's Secret)
and renders it into the ValidatingWebhookConfigurations. Only that one key is kept; the
Secret's other keys (the private key) are dropped with the response and never logged.
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.apply.discovery import Discovery
from manager.config import EffectiveConfig
from manager.kube import Kube
from manager.render.context import WEBHOOK_SECRET_CERT_MANAGER

MONITORING_API = "monitoring.coreos.com/v1"
MONITORING_KINDS = ("ServiceMonitor", "PrometheusRule")


@dataclass(frozen=True)
class ClusterFacts:
    kube: Kube
    discovery: Discovery

    async def complete(self, config: EffectiveConfig) -> EffectiveConfig:
        """`config` with the cluster facts its rendering needs."""
        config = await self._monitoring(config)
        settings = config.cert_manager
        if not settings.operator_fills_ca_bundle:
            return config
        secret = await self.kube.get(
            f"/api/v1/namespaces/{config.namespace}/secrets/{WEBHOOK_SECRET_CERT_MANAGER}")
        ca_bundle = ((secret or {}).get("data") or {}).get("ca.crt") or None
        del secret
        return config.model_copy(update={
            "cert_manager": settings.model_copy(update={"ca_bundle": ca_bundle})})

    async def _monitoring(self, config: EffectiveConfig) -> EffectiveConfig:
        if not config.monitoring.enabled:
            return config
        served = all([await self.discovery.resolve(MONITORING_API, kind) is not None
                      for kind in MONITORING_KINDS])
        return config.model_copy(update={
            "monitoring": config.monitoring.model_copy(update={"served": served})})
