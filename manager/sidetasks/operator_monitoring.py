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
bundle (manager/olm/operator_manifests.py). Where the operator's Deployment exists, both
objects name it as their owner, so that uninstalling the operator (OLM deletes the
Deployment) takes them too: a rule left behind would report the operator down forever.

Whether anything reads them, on OpenShift (the config.openshift.io API is served): the
platform Prometheus scrapes the ServiceMonitors and evaluates the PrometheusRules of the
namespaces labelled openshift.io/cluster-monitoring=true; user-workload monitoring, when
`enableUserWorkload: true` is set in `config.yaml` of the ConfigMap
openshift-monitoring/cluster-monitoring-config (absent: off, OpenShift's default), those of
every other namespace. With the feature on, each pass reads that ConfigMap (only the flag
is kept) and, while user-workload monitoring is not on, the operator namespace's labels; the
operand namespace's label is a cluster fact of the pass (config.monitoring.platform_scraped).
`MonitoringReport.note_for` says which of the two namespaces nothing scrapes, and what to
do. The operator's ClusterRole reads ConfigMaps in every namespace; a refused read (RBAC
trimmed by hand) makes the note say that it cannot know. Elsewhere which Prometheus selects
what is the stack's own configuration, which the operator does not read.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import yaml

from manager.apply.convergence import applied_by, is_converged, prepare_for_apply
from manager.apply.discovery import Discovery
from manager.apply.ownership import managed_by, operator_owner_reference
from manager.apply.results import ObjectRef
from manager.client.kube import PARTIAL_METADATA, ApiError, JsonObject, Kube
from manager.config import EffectiveConfig
from manager.names import FIELD_MANAGER
from manager.olm import operator_manifests
from manager.render.alerts import (
    CLUSTER_MONITORING_LABEL,
    PLATFORM_MONITORING_NAMESPACE,
    operator_alerts,
)
from manager.steps.facts import APISERVER_API, APISERVER_KIND

logger = logging.getLogger(__name__)

MONITORING_API = "monitoring.coreos.com/v1"
NOT_SERVED = ("the cluster does not serve monitoring.coreos.com/v1 (ServiceMonitor, "
              "PrometheusRule), so nothing is scraped or alerted on: install the Prometheus "
              "Operator's CRDs (on OpenShift: they are always served; enable user-workload "
              "monitoring or label the namespaces openshift.io/cluster-monitoring=true)")


CLUSTER_MONITORING_CONFIG = "cluster-monitoring-config"
CLUSTER_MONITORING_CONFIG_PATH = (f"/api/v1/namespaces/{PLATFORM_MONITORING_NAMESPACE}/"
                                  f"configmaps/{CLUSTER_MONITORING_CONFIG}")
USER_WORKLOAD_FLAG = "enableUserWorkload"
_CONFIG_MAP = f"ConfigMap {PLATFORM_MONITORING_NAMESPACE}/{CLUSTER_MONITORING_CONFIG}"
_ENABLE = f"set {USER_WORKLOAD_FLAG}: true in config.yaml of {_CONFIG_MAP}"


@dataclass(frozen=True)
class Scrapers:
    """What decides, on OpenShift, whether a namespace's ServiceMonitors are scraped (and its
    PrometheusRules evaluated), as far as the operator could read it."""

    user_workload: bool | None
    """enableUserWorkload of the cluster monitoring config; None when it could not be read."""
    unknown: str = ""
    """Why `user_workload` is None."""
    operator_namespace_platform: bool = False
    """The operator's namespace is labelled openshift.io/cluster-monitoring=true (read only
    while user-workload monitoring is not known to be on)."""


def user_workload_enabled(configmap: JsonObject | None) -> tuple[bool | None, str]:
    """enableUserWorkload in `config.yaml` of the cluster monitoring ConfigMap, and why it is
    unknown (None). No ConfigMap, or no such key: off, as the cluster monitoring operator
    reads it."""
    text = ((configmap or {}).get("data") or {}).get("config.yaml")
    if not text:
        return False, ""
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError:
        return None, f"config.yaml of {_CONFIG_MAP} is not valid YAML"
    if config is None:
        return False, ""
    if not isinstance(config, dict):
        return None, f"config.yaml of {_CONFIG_MAP} is not a mapping"
    return config.get(USER_WORKLOAD_FLAG) is True, ""


@dataclass(frozen=True)
class MonitoringReport:
    """What the feature did this pass, for the ExternalSecretsManager's status."""

    enabled: bool
    served: bool
    foreign: tuple[str, ...] = ()  # objects of our names that are not the operator's
    scrapers: Scrapers | None = None  # None: not OpenShift, or not read (feature off)
    namespace: str | None = None  # the operator's, when it runs in a pod

    @property
    def note(self) -> str | None:
        """Why OperandMonitoring has less effect than asked, or None (the operator's side
        only: `note_for` with the pass's config adds the operand's namespace)."""
        return self.note_for(None)

    def note_for(self, config: EffectiveConfig | None) -> str | None:
        """Why OperandMonitoring has less effect than asked, or None. `config`: the pass's
        effective config (cluster facts included), when there is an operand."""
        if not self.enabled:
            return None
        if not self.served:
            return f"feature OperandMonitoring is enabled but has no effect: {NOT_SERVED}"
        notes = []
        if scraped := self._scrape_note(config):
            notes.append(scraped)
        if self.foreign:
            notes.append("; ".join(self.foreign)
                         + " (not the operator's: left as they are; delete them to have the "
                         "operator apply its own)")
        return "feature OperandMonitoring: " + "; ".join(notes) if notes else None

    def unscraped(self, config: EffectiveConfig | None) -> tuple[str, ...]:
        """The namespaces holding our monitoring objects that nothing is known to scrape, each
        with whose objects they hold: not labelled for OpenShift's platform monitoring, while
        user-workload monitoring is not on. Empty elsewhere than on OpenShift."""
        if self.scrapers is None or self.scrapers.user_workload is True:
            return ()
        found = []
        if config is not None and config.monitoring.active \
                and not config.monitoring.platform_scraped:
            found.append(f"{config.namespace} (operand)")
        if self.namespace is not None and not self.scrapers.operator_namespace_platform:
            found.append(f"{self.namespace} (operator)")
        return tuple(found)

    def _scrape_note(self, config: EffectiveConfig | None) -> str | None:
        """The namespaces first, so that the one line of the condition names them."""
        namespaces = self.unscraped(config)
        if not namespaces or self.scrapers is None:
            return None
        one = len(namespaces) == 1
        where = f"namespace{'' if one else 's'} {', '.join(namespaces)}"
        its = "its" if one else "their"
        not_labelled = (f"{'it is not' if one else 'neither is'} labelled "
                        f"{CLUSTER_MONITORING_LABEL}=true")
        unread = (f"{its} ServiceMonitors are not scraped nor {its} PrometheusRules evaluated "
                  "(no metrics, no alerts)")
        fix = (f"{_ENABLE}, or label {'the namespace' if one else 'the namespaces'} "
               f"{CLUSTER_MONITORING_LABEL}=true (platform monitoring)")
        if self.scrapers.user_workload is None:
            return (f"maybe nothing scrapes {where}: {not_labelled}, and whether OpenShift's "
                    "user-workload monitoring is on cannot be read "
                    f"({self.scrapers.unknown}); if it is off, {unread}: {fix}")
        return (f"nothing scrapes {where}: OpenShift's user-workload monitoring is off and "
                f"{not_labelled}, so {unread}; {fix}")


def desired(namespace: str, owner: JsonObject | None = None) -> list[JsonObject]:
    """The two objects; `owner` (the operator's Deployment, when it exists) becomes their
    owner, so that they go with it."""
    objects = [operator_manifests.service_monitor(namespace),
               operator_manifests.prometheus_rule(operator_alerts(namespace), namespace)]
    if owner is not None:
        for obj in objects:
            obj["metadata"]["ownerReferences"] = [owner]
    return objects


class OperatorMonitoring:
    def __init__(self, kube: Kube, discovery: Discovery, namespace: str | None):
        self._kube = kube
        self._discovery = discovery
        self._namespace = namespace
        self._cleared = False  # feature off and nothing of ours left: no read until it changes
        # The operator's Deployment as an owner reference, once read (None: none found). Its
        # uid lasts as long as this process: a Deployment deleted takes its pods along.
        self._owner: tuple[JsonObject | None] | None = None

    async def reconcile(self, enabled: bool) -> MonitoringReport:
        """Apply or delete the two objects; raises ApiError (the pass is retried)."""
        served = all([await self._discovery.resolve(MONITORING_API, kind) is not None
                       for kind in ("ServiceMonitor", "PrometheusRule")])
        scrapers = await self._scrapers() if enabled and served else None
        if self._namespace is None or not served:  # not in a pod, or nothing can exist
            self._cleared = False
            return MonitoringReport(enabled, served, scrapers=scrapers)
        if not enabled and self._cleared:
            return MonitoringReport(enabled, served)
        foreign: list[str] = []
        owner = await self._owner_reference(self._namespace) if enabled else None
        for obj in desired(self._namespace, owner):
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
        return MonitoringReport(enabled, served, tuple(foreign), scrapers, self._namespace)

    async def _scrapers(self) -> Scrapers | None:
        """What decides on OpenShift whether our monitoring objects are read (see the module
        doc); None elsewhere. The ConfigMap's content goes no further than its flag."""
        if await self._discovery.resolve(APISERVER_API, APISERVER_KIND) is None:
            return None
        try:
            configmap = await self._kube.get(CLUSTER_MONITORING_CONFIG_PATH)
        except ApiError as error:
            if error.status != 403:
                raise
            user_workload: bool | None = None
            unknown = f"the operator may not read {_CONFIG_MAP}"
        else:
            user_workload, unknown = user_workload_enabled(configmap)
            del configmap
        labelled = False
        if user_workload is not True and self._namespace is not None:
            live = await self._kube.get(f"/api/v1/namespaces/{self._namespace}",
                                        accept=PARTIAL_METADATA)
            labels = ((live or {}).get("metadata") or {}).get("labels") or {}
            labelled = labels.get(CLUSTER_MONITORING_LABEL) == "true"
        return Scrapers(user_workload, unknown, labelled)

    async def _owner_reference(self, namespace: str) -> JsonObject | None:
        """The operator's Deployment as an owner reference (read once), or None where it
        does not exist (a local run, a test)."""
        if self._owner is None:
            self._owner = (await operator_owner_reference(self._kube, namespace),)
        return self._owner[0]

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
