"""Facts of the cluster that shape the desired objects (the "cluster facts" input of
docs/architecture.md's flow), gathered before rendering.

Monitoring: with the OperandMonitoring feature on, whether the API server serves
ServiceMonitor and PrometheusRule (monitoring.coreos.com/v1) right now; a CRD watch
(preflight.dependency_watches) starts a pass when they arrive or go, so no restart is needed.
Always: whether the operand namespace carries openshift.io/cluster-monitoring=true, which
decides which Prometheus the NetworkPolicies admit (render/alerts.metrics_scrapers). With
the feature on and its API served: whether the namespace openshift-config-managed exists
(OpenShift, whose console reads dashboards there: render/dashboard.py), one metadata read
per pass; a watch of that namespace by name (preflight.dependency_watches) starts a pass
when it comes or goes.

The CA bundle: with cert-manager on, the operator takes the CA that cert-manager published
with the issued certificate (`ca.crt` of the Certificate's Secret) and renders it into the
ValidatingWebhookConfigurations; with the CA injector on too (addInjectorAnnotations "true")
that is the CA the injector writes, rendered so that the operator can bridge a CA change
(steps/ca_overlap.py). With the cert-controller, the caBundle is the cert-controller's to
write, except on the way back from cert-manager (ca_overlap.way_back): the watch cache
says whether one is under way, and only then is the cert-controller's Secret read. Only
`ca.crt` is kept; a Secret's other keys (the private keys) are dropped with the response
and never logged.

Content loaded once: Go processes read their root CAs once (SSL_CERT_DIR: the trustedCABundle
ConfigMap and the proxy's CA bundle) and bitwarden-sdk-server loads its key pair once, so the
operator keeps a digest of that content (a SHA-256, never the content) for the renderer, which
puts it on the pod templates of exactly the processes that read it: a rotation rolls them.

The API server's Service address: with a proxy, the components that get it (the controller,
bitwarden-sdk-server) must reach the API server directly. In a pod, client-go calls it at
KUBERNETES_SERVICE_HOST, the ClusterIP(s) of the `kubernetes` Service in `default`, which no
host suffix in NO_PROXY matches; the operator reads the Service and the renderer adds its
addresses to NO_PROXY (ProxySettings.effective_no_proxy). Read only while a proxy resolves.

The TLS security profile (manager/tls_profile.py): OpenShift's
`apiservers.config.openshift.io/cluster` `spec.tlsSecurityProfile`, read from the watch cache
(TLS_PROFILE_WATCHES, standing: the object by name and its CRD), else from the server (the
first read at start-up, before the watch has listed). Without that API (plain Kubernetes),
or without the object, Intermediate; Discovery remembers the absence, so such a cluster
costs no request per pass and logs nothing. The profile is logged when it changes, with the
names the webhook cannot use.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from manager.apply.cache import ObjectCache
from manager.apply.discovery import Discovery
from manager.apply.results import ObjectRef
from manager.client.kube import PARTIAL_METADATA, JsonObject, Kube
from manager.client.watch_spec import WatchSpec
from manager.config import EffectiveConfig, LoadedSource, with_api_server_addresses
from manager.names import (
    CONSOLE_DASHBOARDS_NAMESPACE,
    DEPLOYMENT_NAMES,
    WEBHOOK_SECRET,
    WEBHOOK_SECRET_CERT_MANAGER,
)
from manager.render.alerts import CLUSTER_MONITORING_LABEL
from manager.render.context import TRUSTED_CA_CONFIGMAP, WEBHOOK_CONFIGURATIONS
from manager.steps import ca_overlap
from manager.steps.preflight import crd_watch
from manager.steps.readiness import last_change
from manager.tls_profile import INTERMEDIATE, TLSProfile, go_tls, profile_of

logger = logging.getLogger(__name__)

MONITORING_API = "monitoring.coreos.com/v1"
MONITORING_KINDS = ("ServiceMonitor", "PrometheusRule")
KUBERNETES_SERVICE = "/api/v1/namespaces/default/services/kubernetes"
WEBHOOKS_API = "admissionregistration.k8s.io/v1"
WEBHOOK_KIND = "ValidatingWebhookConfiguration"
WEBHOOKS_PATH = f"/apis/{WEBHOOKS_API}/validatingwebhookconfigurations"
APISERVER_API = "config.openshift.io/v1"
APISERVER_KIND = "APIServer"
APISERVER_NAME = "cluster"
APISERVER_CRD = "apiservers.config.openshift.io"
TLS_PROFILE_FIELD = "tlsSecurityProfile"
TLS_PROFILE_WATCHES = frozenset({
    WatchSpec(APISERVER_API, APISERVER_KIND, field_selector=f"metadata.name={APISERVER_NAME}",
              cached=True, spec_field=TLS_PROFILE_FIELD),
    crd_watch(APISERVER_CRD)})
"""The APIServer (only its profile counts: other edits start no pass) and its CRD (the API
arriving or going)."""


def service_addresses(service: dict[str, Any] | None) -> tuple[str, ...]:
    """The ClusterIPs of a Service (both families when dual-stack); none when headless."""
    spec = (service or {}).get("spec") or {}
    addresses = spec.get("clusterIPs") or [spec.get("clusterIP")]
    return tuple(str(address) for address in addresses if address and address != "None")


@dataclass(frozen=True)
class ClusterFacts:
    kube: Kube
    discovery: Discovery
    cache: ObjectCache = field(default_factory=ObjectCache)  # empty: ask the server
    _logged: dict[str, TLSProfile] = field(default_factory=dict)  # the last profile logged

    async def complete(self, config: EffectiveConfig) -> EffectiveConfig:
        """`config` with the cluster facts its rendering needs."""
        config = config.model_copy(update={"tls_profile": await self.tls_profile()})
        config = await self._monitoring(config)
        config = await self._loaded_once(config)
        config = await self._api_server_addresses(config)
        return await self._webhook_certificate(config)

    async def tls_profile(self) -> TLSProfile:
        """The cluster's TLS security profile (see the module doc)."""
        ref = ObjectRef(APISERVER_API, APISERVER_KIND, "", APISERVER_NAME)
        if self.cache.synced((ref.group, ref.kind)):
            apiserver = self.cache.get(ref)
        else:
            resource = await self.discovery.resolve(APISERVER_API, APISERVER_KIND)
            apiserver = None if resource is None else await self.kube.get(
                resource.object_path(APISERVER_NAME))
        if apiserver is None:
            profile, note = INTERMEDIATE, None
        else:
            profile, note = profile_of((apiserver.get("spec") or {}).get(TLS_PROFILE_FIELD))
        self._log_change(profile, note, found=apiserver is not None)
        return profile

    def _log_change(self, profile: TLSProfile, note: str | None, *, found: bool) -> None:
        if self._logged.get("profile") == profile:
            return
        self._logged["profile"] = profile
        source = (f"{APISERVER_CRD}/{APISERVER_NAME}" if found
                  else "default (no APIServer config)")
        logger.info("action=tls-profile profile=%s minTLSVersion=%s source=%s%s", profile.type,
                    profile.min_tls_version, source, f" note={note!r}" if note else "")
        if line := go_tls(profile).describe("webhook"):
            logger.info("action=tls-profile profile=%s %s", profile.type, line)

    async def _webhook_certificate(self, config: EffectiveConfig) -> EffectiveConfig:
        """With cert-manager on: which Secret the webhook serves, the CA cert-manager
        published and, while the pods move to a new CA, the caBundle that trusts both.
        With the cert-controller: the same while the webhook comes back to it."""
        settings = config.cert_manager
        if not settings.enabled:
            return await self._way_back(config)
        secrets = f"/api/v1/namespaces/{config.namespace}/secrets"
        secret = await self.kube.get(f"{secrets}/{WEBHOOK_SECRET_CERT_MANAGER}")
        facts: dict[str, object] = {
            "issued": secret is not None,
            "mount_previous": secret is None and (await self._live(
                ObjectRef("v1", "Secret", config.namespace, WEBHOOK_SECRET),
                PARTIAL_METADATA) is not None)}
        published = ((secret or {}).get("data") or {}).get("ca.crt") or None
        if published and secret is not None:
            facts.update(await self._overlap(config, published, last_change(secret)))
        del secret  # the private key goes no further
        return config.model_copy(update={"cert_manager": settings.model_copy(
            update={**facts, "ca_bundle": published})})

    async def _way_back(self, config: EffectiveConfig) -> EffectiveConfig:
        """With the cert-controller: nothing, once the webhook is settled on it (the watch
        cache shows it); on the way back from cert-manager, what ca_overlap.way_back says."""
        name = DEPLOYMENT_NAMES["webhook"]
        deployment = await self._built_in(
            ObjectRef("apps/v1", "Deployment", config.namespace, name),
            f"/apis/apps/v1/namespaces/{config.namespace}/deployments/{name}")
        configurations = [await self._built_in(
            ObjectRef(WEBHOOKS_API, WEBHOOK_KIND, "", name), f"{WEBHOOKS_PATH}/{name}")
            for name in WEBHOOK_CONFIGURATIONS]
        if ca_overlap.settled_on_cert_controller(deployment, configurations):
            return config
        secrets = f"/api/v1/namespaces/{config.namespace}/secrets"
        secret = await self.kube.get(f"{secrets}/{WEBHOOK_SECRET}")
        ca = ((secret or {}).get("data") or {}).get("ca.crt") or None
        written = last_change(secret) if secret is not None else 0.0
        del secret  # the private keys go no further
        way = ca_overlap.way_back(deployment, ca_overlap.live_bundles(configurations), ca,
                                  secret_written=written, now=time.time())
        return config.model_copy(update={"cert_manager": config.cert_manager.model_copy(
            update={"mount_previous": way.mount_previous, "bundle_overlap": way.bundle,
                    "overlap_until": way.until, "ca_bundle": way.handover})})

    async def _overlap(self, config: EffectiveConfig, published: str,
                       written: float) -> dict[str, object]:
        """The caBundle while the webhook pods move to the published CA (ca_overlap.py)."""
        deployment = await self._live(
            ObjectRef("apps/v1", "Deployment", config.namespace, DEPLOYMENT_NAMES["webhook"]))
        lasting = ca_overlap.overlap(deployment, WEBHOOK_SECRET_CERT_MANAGER, written,
                                     time.time())
        if lasting is None:
            return {}
        configurations = [await self._live(ObjectRef(WEBHOOKS_API, WEBHOOK_KIND, "", name))
                          for name in WEBHOOK_CONFIGURATIONS]
        bundle = ca_overlap.trusted_bundle(published, ca_overlap.live_bundles(configurations),
                                           keep_previous=True)
        if bundle == published:
            return {}
        return {"bundle_overlap": bundle, "overlap_until": lasting.until}

    async def _live(self, ref: ObjectRef, accept: str = "application/json") -> JsonObject | None:
        """One of the operator's objects: from the watch cache when it has listed the
        kind, else from the server."""
        if self.cache.synced((ref.group, ref.kind)):
            return self.cache.get(ref)
        resource = await self.discovery.require(ref.api_version, ref.kind)
        return await self.kube.get(resource.object_path(ref.name, ref.namespace or None),
                                   accept=accept)

    async def _built_in(self, ref: ObjectRef, path: str) -> JsonObject | None:
        """An object of a built-in kind (no discovery needed): from the watch cache when it
        has listed the kind (every pass but those before the first listing), else read."""
        if self.cache.synced((ref.group, ref.kind)):
            return self.cache.get(ref)
        return await self.kube.get(path)

    async def _monitoring(self, config: EffectiveConfig) -> EffectiveConfig:
        facts = {"platform_scraped": await self._platform_scraped(config.namespace)}
        if config.monitoring.enabled:
            facts["served"] = all([await self.discovery.resolve(MONITORING_API, kind) is not None
                                   for kind in MONITORING_KINDS])
            if facts["served"]:
                facts["console_dashboards"] = await self._console_dashboards()
        return config.model_copy(update={
            "monitoring": config.monitoring.model_copy(update=facts)})

    async def _console_dashboards(self) -> bool:
        """Whether the console's dashboards namespace exists and is not being deleted (no
        ConfigMap can be created in a terminating namespace)."""
        live = await self.kube.get(f"/api/v1/namespaces/{CONSOLE_DASHBOARDS_NAMESPACE}",
                                   accept=PARTIAL_METADATA)
        return live is not None and not (live.get("metadata") or {}).get("deletionTimestamp")

    async def _platform_scraped(self, namespace: str) -> bool:
        """Whether the operand namespace is labelled for OpenShift's platform monitoring:
        from the watch cache when the operator created it, else one metadata read (a
        namespace created beforehand, or not yet created: then it has no such label)."""
        ref = ObjectRef("v1", "Namespace", "", namespace)
        live = self.cache.get(ref) if self.cache.synced(("", "Namespace")) else None
        if live is None:
            live = await self.kube.get(f"/api/v1/namespaces/{namespace}",
                                       accept=PARTIAL_METADATA)
        labels = ((live or {}).get("metadata") or {}).get("labels") or {}
        return labels.get(CLUSTER_MONITORING_LABEL) == "true"

    async def _loaded_once(self, config: EffectiveConfig) -> EffectiveConfig:
        namespace = f"/api/v1/namespaces/{config.namespace}"
        sources: dict[LoadedSource, tuple[str, tuple[str, ...] | None]] = {}
        if config.trusted_ca is not None:
            sources["trusted-ca"] = (f"{namespace}/configmaps/{config.trusted_ca.config_map_name}",
                                     (config.trusted_ca.key,))
        if config.proxy is not None:
            sources["proxy-ca"] = (f"{namespace}/configmaps/{TRUSTED_CA_CONFIGMAP}", None)
        if config.bitwarden.enabled:
            sources["bitwarden-tls"] = (
                f"{namespace}/secrets/{config.bitwarden.tls_secret_name}",
                ("tls.crt", "tls.key", "ca.crt"))
        digests: dict[LoadedSource, str] = {}
        for source, (path, keys) in sources.items():
            # Missing reads as empty: the proxy's CA ConfigMap, which this pass creates empty,
            # digests the same before and after, so an install does not roll the controller.
            found = await self.kube.get(path) or {}
            digests[source] = content_digest(found, keys)
            del found  # a Secret's values go no further than the digest
        return config.model_copy(update={"loaded_once": digests})

    async def _api_server_addresses(self, config: EffectiveConfig) -> EffectiveConfig:
        if config.proxy is None:
            return config
        return with_api_server_addresses(
            config, service_addresses(await self.kube.get(KUBERNETES_SERVICE)))


def content_digest(obj: JsonObject, keys: tuple[str, ...] | None) -> str:
    """SHA-256 of the data of a ConfigMap or Secret (only `keys`, if given)."""
    data = {**(obj.get("data") or {}), **(obj.get("binaryData") or {})}
    chosen = {key: data.get(key) for key in keys} if keys is not None else data
    return hashlib.sha256(json.dumps(chosen, sort_keys=True).encode()).hexdigest()
