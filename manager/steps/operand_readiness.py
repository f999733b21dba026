"""The readiness step's reads: the live state readiness.py judges (the applied objects, the
pods of a Deployment that is not available, the CA the webhook serves), whether the
cert-controller must stay until cert-manager's certificate is there; and the webhook
Certificate's expiry and readiness, for the operator's metrics (`record_webhook_certificate`)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterable, Sequence

from manager import metrics
from manager.apply import ObjectResult, Observed
from manager.client.kube import PARTIAL_METADATA, JsonObject, Kube
from manager.config import EffectiveConfig
from manager.names import WEBHOOK_CERTIFICATE, WEBHOOK_SECRET_CERT_MANAGER
from manager.render.context import webhook_secret
from manager.steps import readiness

_SecretVersion = tuple[str, str | None]  # a Secret's path and resourceVersion


class OperandReadiness:
    def __init__(self, kube: Kube):
        self.kube = kube
        # The served CA by (Secret path, resourceVersion): a steady pass reads no Secret.
        self._serving_ca_seen: tuple[_SecretVersion, readiness.ServingCA | None] | None = None

    async def read(self, config: EffectiveConfig,
                   applied: Sequence[ObjectResult]) -> readiness.Readiness:
        """What the applied objects' live state says about the operand (readiness.py)."""
        parts = []
        serving = await self._serving_ca(config, applied)
        waiting = {r.ref: r.live for r in applied
                   if r.ref.kind == "Deployment" and _pods_may_explain(r.live or {})}
        pods = dict(zip(waiting, await asyncio.gather(
            *(self._pods_of(live or {}) for live in waiting.values())), strict=True))
        for result in applied:
            live = result.live or {}
            if result.ref.kind == "Deployment":
                parts.append(readiness.deployment_readiness(live, pods.get(result.ref, [])))
            elif result.ref.kind == "ValidatingWebhookConfiguration":
                parts.append(readiness.webhook_readiness(live, _ca_bundle_source(config),
                                                         serving, time.time()))
            elif result.ref.kind == "Certificate":
                parts.append(readiness.certificate_readiness(live))
        return readiness.combine(parts)

    async def cert_controller_held(self, config: EffectiveConfig,
                                   applied: Sequence[ObjectResult]) -> bool:
        """With cert-manager on, the cert-controller goes only once cert-manager's webhook
        Certificate is Ready and its Secret exists (the seed's safe transition)."""
        if not config.cert_manager.enabled:
            return False
        certificate = next((r.live for r in applied if r.ref.kind == "Certificate"
                            and r.ref.name == WEBHOOK_CERTIFICATE), None)
        if not readiness.certificate_ready(certificate):
            return True
        secret = f"/api/v1/namespaces/{config.namespace}/secrets/{WEBHOOK_SECRET_CERT_MANAGER}"
        return await self.kube.get(secret, accept=PARTIAL_METADATA) is None

    async def _serving_ca(self, config: EffectiveConfig, applied: Sequence[ObjectResult],
                          ) -> readiness.ServingCA | None:
        """The CA of the certificate the webhook serves: `ca.crt` of the Secret its pods
        mount (the cert-controller's, applied in this pass, or cert-manager's). The Secret is
        read whole only when its resourceVersion moved (the cache keeps metadata), and only
        `ca.crt` and its write times are kept: the private key goes with the response."""
        name = webhook_secret(config.cert_manager)
        path = f"/api/v1/namespaces/{config.namespace}/secrets/{name}"
        result = next((r for r in applied if r.ref.kind == "Secret" and r.ref.name == name),
                      None)
        secret = result.live if result else None
        if secret is None and config.cert_manager.enabled:
            secret = await self.kube.get(path, accept=PARTIAL_METADATA)
        if secret is None:
            return None
        seen = (path, secret["metadata"].get("resourceVersion"))
        # A Secret written in this pass is whole (the apply's response): without data it
        # holds none yet. One from the cache or a metadata GET is read whole if it moved.
        if "data" not in secret and not (result and result.wrote):
            if self._serving_ca_seen is not None and self._serving_ca_seen[0] == seen:
                return self._serving_ca_seen[1]
            secret = await self.kube.get(path)
            if secret is None:
                return None
            seen = (path, secret["metadata"].get("resourceVersion"))
        ca = (secret.get("data") or {}).get("ca.crt")
        serving = (readiness.ServingCA(ca, f"Secret {config.namespace}/{name}",
                                       readiness.last_change(secret)) if ca else None)
        self._serving_ca_seen = (seen, serving)
        return serving

    async def _pods_of(self, deployment: JsonObject) -> list[JsonObject]:
        """The pods of a Deployment that is not available (to say why)."""
        meta = deployment.get("metadata", {})
        match = ((deployment.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if not match:
            return []
        selector = ",".join(f"{key}={value}" for key, value in sorted(match.items()))
        listing = await self.kube.list(f"/api/v1/namespaces/{meta.get('namespace')}/pods",
                                       label_selector=selector)
        return list(listing.get("items") or [])


def record_webhook_certificate(config: EffectiveConfig,
                               objects: Iterable[Observed | ObjectResult]) -> None:
    """Export status.notAfter and Ready of cert-manager's webhook Certificate among a pass's
    observed `objects` (manager/metrics.py), or no series: cert-manager off, or no such
    Certificate yet. Its expiry alert is the operator's (manager/render/alerts.py) because
    these series are scraped in the operator's namespace. The observed state is the one
    before this pass's writes (the watch keeps Certificates whole; an apply does not change
    the status), so a Certificate held back from applying is still reported."""
    certificate = next((o.live for o in objects if config.cert_manager.enabled
                        and o.ref.kind == "Certificate" and o.ref.name == WEBHOOK_CERTIFICATE
                        and o.ref.namespace == config.namespace), None)
    metrics.record_webhook_certificate(certificate)


def _pods_may_explain(deployment: JsonObject) -> bool:
    """Whether the pods can say why a Deployment is not available: not when it is, and not
    before its controller has created any (a Deployment just created or re-created)."""
    return (not readiness.deployment_available(deployment)
            and bool((deployment.get("status") or {}).get("replicas")))


def _ca_bundle_source(config: EffectiveConfig) -> str:
    """Who fills the webhooks' caBundle in this configuration."""
    if not config.cert_manager.enabled:
        return "the cert-controller"
    if config.cert_manager.add_injector_annotations:
        return "the operator and cert-manager's CA injector, from the CA of the issued certificate"
    return "the operator, from the CA of the issued certificate"
