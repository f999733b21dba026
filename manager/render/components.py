"""The components of the operand and the one place that decides which are enabled.

A component is a directory of templates under `manifests/operand/` whose objects come and go
together; the controller prunes managed objects of a disabled component.

    component              objects                                          enabled when
    namespace              Namespace                                        always
    controller             ServiceAccount, ClusterRoles view, edit,         always
                           servicebindings, leader-election Role and
                           RoleBinding, metrics Service, Deployment,
                           NetworkPolicy
    controller-cluster-rbac
                           ClusterRole and ClusterRoleBinding               no operatingNamespace
                           external-secrets-controller
    controller-namespace-rbac
                           Role and RoleBinding external-secrets-controller operatingNamespace
                           in the operating namespace
    generic-targets-cluster-rbac
                           ClusterRole and ClusterRoleBinding               UnsafeAllowGeneric-
                           external-secrets-controller-generic-targets      Targets on, no
                                                                            operatingNamespace
    generic-targets-namespace-rbac
                           Role and RoleBinding of that name in the         UnsafeAllowGeneric-
                           operating namespace                              Targets on, and
                                                                            operatingNamespace
    webhook                ServiceAccount, Service, Deployment,             always
                           NetworkPolicy, 2 ValidatingWebhookConfigurations
    cert-controller        ServiceAccount, ClusterRole, ClusterRoleBinding, cert-manager off
                           webhook Secret, metrics Service, Deployment,
                           NetworkPolicy
    webhook-certificate    Certificate external-secrets-webhook             cert-manager on
    bitwarden              ServiceAccount, Service, Deployment,             bitwarden on
                           2 NetworkPolicies
    bitwarden-certificate  Certificate bitwarden-tls-certs                  bitwarden on without
                                                                            secretRef
    network-policy         NetworkPolicies deny-all-traffic, allow-to-dns   always
    provider-egress        one egress NetworkPolicy per policy of the       always
                           config (controller; bitwarden-sdk-server while
                           it is on): the default or the declared ones
    proxy-ca               ConfigMap external-secrets-trusted-ca-bundle     a proxy is set
    disruption-budget      one PodDisruptionBudget per Deployment that      a workload has more
                           runs more than one replica (or asks for one)     than one replica
    monitoring             ServiceMonitors of the controller and the        OperandMonitoring
                           webhook, PrometheusRule external-secrets         on, and served
    monitoring-cert-controller
                           ServiceMonitor of the cert-controller            both of the above
    console-dashboard      ConfigMap external-secrets-operator-dashboard    monitoring, and the
                           in openshift-config-managed: the operand's       namespace exists
                           dashboard in OpenShift's console                 (OpenShift)
"""

from __future__ import annotations

from typing import Final

from manager.config import EffectiveConfig, Workload
from manager.names import (
    BITWARDEN_DEPLOYMENT,
    CERT_CONTROLLER_DEPLOYMENT,
    CONTROLLER_DEPLOYMENT,
    WEBHOOK_DEPLOYMENT,
)

NAMESPACE: Final = "namespace"
CONTROLLER: Final = "controller"
CONTROLLER_CLUSTER_RBAC: Final = "controller-cluster-rbac"
CONTROLLER_NAMESPACE_RBAC: Final = "controller-namespace-rbac"
GENERIC_TARGETS_CLUSTER_RBAC: Final = "generic-targets-cluster-rbac"
GENERIC_TARGETS_NAMESPACE_RBAC: Final = "generic-targets-namespace-rbac"
WEBHOOK: Final = "webhook"
CERT_CONTROLLER: Final = "cert-controller"
WEBHOOK_CERTIFICATE: Final = "webhook-certificate"
BITWARDEN: Final = "bitwarden"
BITWARDEN_CERTIFICATE: Final = "bitwarden-certificate"
NETWORK_POLICY: Final = "network-policy"
PROVIDER_EGRESS: Final = "provider-egress"
PROXY_CA: Final = "proxy-ca"
DISRUPTION_BUDGET: Final = "disruption-budget"
MONITORING: Final = "monitoring"
MONITORING_CERT_CONTROLLER: Final = "monitoring-cert-controller"
CONSOLE_DASHBOARD: Final = "console-dashboard"

# Every component, in the order the state lists them.
COMPONENTS: Final = (NAMESPACE, CONTROLLER, CONTROLLER_CLUSTER_RBAC, CONTROLLER_NAMESPACE_RBAC,
                     GENERIC_TARGETS_CLUSTER_RBAC, GENERIC_TARGETS_NAMESPACE_RBAC, WEBHOOK,
                     CERT_CONTROLLER, WEBHOOK_CERTIFICATE, BITWARDEN,
                     BITWARDEN_CERTIFICATE, NETWORK_POLICY, PROVIDER_EGRESS, PROXY_CA,
                     DISRUPTION_BUDGET, MONITORING, MONITORING_CERT_CONTROLLER,
                     CONSOLE_DASHBOARD)

# app.kubernetes.io/name of each component's objects (and pods).
CONTROLLER_APP: Final = CONTROLLER_DEPLOYMENT
WEBHOOK_APP: Final = WEBHOOK_DEPLOYMENT
CERT_CONTROLLER_APP: Final = CERT_CONTROLLER_DEPLOYMENT
BITWARDEN_APP: Final = BITWARDEN_DEPLOYMENT
APP_NAMES: Final = {
    NAMESPACE: CONTROLLER_APP,
    CONTROLLER: CONTROLLER_APP,
    CONTROLLER_CLUSTER_RBAC: CONTROLLER_APP,
    CONTROLLER_NAMESPACE_RBAC: CONTROLLER_APP,
    GENERIC_TARGETS_CLUSTER_RBAC: CONTROLLER_APP,
    GENERIC_TARGETS_NAMESPACE_RBAC: CONTROLLER_APP,
    WEBHOOK: WEBHOOK_APP,
    CERT_CONTROLLER: CERT_CONTROLLER_APP,
    WEBHOOK_CERTIFICATE: WEBHOOK_APP,
    BITWARDEN: BITWARDEN_APP,
    BITWARDEN_CERTIFICATE: BITWARDEN_APP,
    NETWORK_POLICY: CONTROLLER_APP,
    PROVIDER_EGRESS: CONTROLLER_APP,  # each policy takes the labels of its own component
    PROXY_CA: CONTROLLER_APP,
    DISRUPTION_BUDGET: CONTROLLER_APP,  # each budget takes the labels of its own component
    MONITORING: CONTROLLER_APP,
    MONITORING_CERT_CONTROLLER: CERT_CONTROLLER_APP,
    CONSOLE_DASHBOARD: CONTROLLER_APP,
}

# The component of each workload's Deployment, and back.
WORKLOAD_COMPONENTS: Final[dict[Workload, str]] = {
    "controller": CONTROLLER, "webhook": WEBHOOK, "cert-controller": CERT_CONTROLLER,
    "bitwarden": BITWARDEN}
COMPONENT_WORKLOADS: Final[dict[str, Workload]] = {
    component: workload for workload, component in WORKLOAD_COMPONENTS.items()}


def budgeted_workloads(config: EffectiveConfig,
                       enabled: frozenset[str] | set[str]) -> tuple[Workload, ...]:
    """The running workloads that get a PodDisruptionBudget."""
    return tuple(workload for workload, component in WORKLOAD_COMPONENTS.items()
                 if component in enabled
                 and config.workloads[workload].disruption_budget is not None)


def enabled_components(config: EffectiveConfig) -> tuple[str, ...]:
    """The components `config` asks for; everything else is to be absent."""
    enabled = {NAMESPACE, CONTROLLER, WEBHOOK, NETWORK_POLICY, PROVIDER_EGRESS}
    # operatingNamespace narrows the controller's rights to that namespace.
    enabled.add(CONTROLLER_NAMESPACE_RBAC if config.operating_namespace
                else CONTROLLER_CLUSTER_RBAC)
    if config.generic_targets:  # ConfigMaps as targets, where the controller syncs
        enabled.add(GENERIC_TARGETS_NAMESPACE_RBAC if config.operating_namespace
                    else GENERIC_TARGETS_CLUSTER_RBAC)
    enabled.add(WEBHOOK_CERTIFICATE if config.cert_manager.enabled else CERT_CONTROLLER)
    if config.bitwarden.enabled:
        enabled.add(BITWARDEN)
        if config.bitwarden.issue_certificate:
            enabled.add(BITWARDEN_CERTIFICATE)
    if config.proxy is not None:
        enabled.add(PROXY_CA)
    if budgeted_workloads(config, enabled):
        enabled.add(DISRUPTION_BUDGET)
    if config.monitoring.active:
        enabled.add(MONITORING)
        if not config.cert_manager.enabled:
            enabled.add(MONITORING_CERT_CONTROLLER)
        if config.monitoring.console_dashboards:  # OpenShift's console reads it there
            enabled.add(CONSOLE_DASHBOARD)
    return tuple(component for component in COMPONENTS if component in enabled)
