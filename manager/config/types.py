"""What the effective config is: the settings the renderer reads, as frozen models, and the
error a spec the operator cannot use raises (ConfigError). No logic beyond derived values."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, model_validator

from manager import kube_values, versions
from manager.api import defaults
from manager.api.rules import (
    CERT_CONTROLLER_RENEW_AHEAD,
    CERT_CONTROLLER_REQUEUE_INTERVAL,
    LOOKAHEAD_MARGIN,
)
from manager.errors import PassError
from manager.names import DEFAULT_OPERAND_NAMESPACE
from manager.tls_profile import INTERMEDIATE, TLSProfile

ESC_APP = "spec.appConfig"
ESC_CONTROLLER = "spec.controllerConfig"
ESM_GLOBAL = "spec.globalConfig"

# The optional features of ExternalSecretsManager.spec.features this operator implements. Any
# other name there is reported (manager.reporting.esm_status), never silently ignored.
# OperandMonitoring: ServiceMonitors and a PrometheusRule for the operand, while the cluster
# serves monitoring.coreos.com/v1 (docs/operations.md, "Monitoring").
OPERAND_MONITORING = "OperandMonitoring"
# UnsafeAllowGenericTargets (Red Hat's operator's name for it since its 1.2): the controller's
# --unsafe-allow-generic-targets, so ExternalSecrets may write ConfigMaps and custom resources
# (spec.target.manifest), and the RBAC for ConfigMaps (docs/operations.md, "Generic targets").
UNSAFE_ALLOW_GENERIC_TARGETS = "UnsafeAllowGenericTargets"
KNOWN_FEATURES: frozenset[str] = frozenset({OPERAND_MONITORING,
                                            UNSAFE_ALLOW_GENERIC_TARGETS})

# cert-manager refuses shorter certificates and earlier renewals (its webhook validation).
MINIMUM_CERTIFICATE_DURATION = "1h"
MINIMUM_RENEW_BEFORE = "5m"

# The webhook's --lookahead-interval (docs/configuration.md, "Webhook certificate lifetimes").
# Every --check-interval the webhook checks that its certificate is still valid at now +
# lookahead and exits when it is not (cmd/controller/webhook.go), so the
# lookahead must end before the issuer renews: lookahead = renew-ahead - checkInterval -
# LOOKAHEAD_MARGIN, and at least checkInterval (so that a certificate that really expires is
# still caught one check before it does).
# - cert-manager renews certificateRenewBefore ahead of expiry;
# - the cert-controller renews when its certificate is no longer valid 90 days ahead
#   (crds.LookaheadInterval), checked every --crd-requeue-interval (rendered as 5m), so at
#   the latest 2160h - 5m ahead of expiry.
# The margin covers the issuance (cert-manager's CA issuers take seconds) and the kubelet
# updating the mounted Secret (about a minute), with room for a retry.
# The numbers live in manager/api/rules.py, whose CEL rules refuse the same combinations.

IssuerKind = Literal["Issuer", "ClusterIssuer"]
ISSUER_KINDS: dict[str, IssuerKind] = {"issuer": "Issuer", "clusterissuer": "ClusterIssuer"}
CERT_MANAGER_GROUP = "cert-manager.io"
# The Secret of the Certificate cert-manager issues for bitwarden-sdk-server.
BITWARDEN_CERTIFICATE_SECRET = "bitwarden-tls-certs"  # noqa: S105  # a name, not a password


class ConfigError(PassError, ValueError):
    """A spec (or the operator environment) that cannot become a working installation.

    `field` is the JSON path of the culprit ("spec.appConfig.resources.limits.cpu"; fields of
    the operator's environment are "env.<VARIABLE>"); `message` says what is wrong and how
    to fix it.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


class _Frozen(BaseModel):
    # Validators are built when first used, not at import (start-up time).
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# --- the operator's environment -------------------------------------------------------------


class OperatorEnvironment(_Frozen):
    """What the operator's own Deployment tells it (OLM sets these variables)."""

    external_secrets_image: str | None = versions.EXTERNAL_SECRETS_IMAGE
    bitwarden_image: str | None = versions.BITWARDEN_SDK_SERVER_IMAGE
    operand_version: str = versions.EXTERNAL_SECRETS_VERSION
    bitwarden_version: str = versions.BITWARDEN_SDK_SERVER_VERSION
    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: str | None = None
    own_namespace: str | None = None
    """The namespace the operator runs in, when known (`manager.client.kube.own_namespace`)."""
    operator_condition: str | None = None
    """The OLM OperatorCondition of the operator's CSV (OPERATOR_CONDITION_NAME, which OLM
    sets): where the upgrade gate is published (manager/sidetasks/upgrade_gate.py)."""

    @classmethod
    def from_environ(cls, environ: Mapping[str, str],
                     own_namespace: str | None = None) -> OperatorEnvironment:
        """Read the variables; an absent image or version falls back to manager/versions.py.

        An image variable that is present but empty means "no such image here" (for example
        a mirror without bitwarden-sdk-server): rendering then fails only if that image is
        needed.
        """
        def image(name: str, default: str) -> str | None:
            return environ[name] or None if name in environ else default

        return cls(
            external_secrets_image=image("RELATED_IMAGE_EXTERNAL_SECRETS",
                                         versions.EXTERNAL_SECRETS_IMAGE),
            bitwarden_image=image("RELATED_IMAGE_BITWARDEN_SDK_SERVER",
                                  versions.BITWARDEN_SDK_SERVER_IMAGE),
            operand_version=(environ.get("OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION")
                             or versions.EXTERNAL_SECRETS_VERSION),
            bitwarden_version=(environ.get("BITWARDEN_SDK_SERVER_IMAGE_VERSION")
                               or versions.BITWARDEN_SDK_SERVER_VERSION),
            http_proxy=environ.get("HTTP_PROXY") or None,
            https_proxy=environ.get("HTTPS_PROXY") or None,
            no_proxy=environ.get("NO_PROXY") or None,
            own_namespace=own_namespace,
            operator_condition=environ.get("OPERATOR_CONDITION_NAME") or None,
        )


# --- the result -----------------------------------------------------------------------------


class CertManagerSettings(_Frozen):
    """cert-manager issues the webhook certificate instead of the built-in cert-controller."""

    enabled: bool = False
    add_injector_annotations: bool = False
    issuer_name: str | None = None
    issuer_kind: IssuerKind = "Issuer"
    issuer_group: str = CERT_MANAGER_GROUP
    duration: str = kube_values.normal_go_duration(defaults.CERTIFICATE_DURATION)
    renew_before: str = kube_values.normal_go_duration(defaults.CERTIFICATE_RENEW_BEFORE)
    ca_bundle: str | None = None
    """A cluster fact, not a setting: the CA of the issued webhook certificate (its Secret's
    `ca.crt`, base64 as the API carries it), which the operator puts into the webhooks'
    caBundle (with the CA injector too: the same CA the injector writes, steps/ca_overlap.py)."""

    bundle_overlap: str | None = None
    """A cluster fact: while the webhook pods move to a new CA (steps/ca_overlap.py),
    the caBundle to render instead of `ca_bundle` alone: it, then the CAs trusted before."""
    overlap_until: float | None = None
    """A cluster fact: when that overlap ends unless something else changes first (epoch
    seconds), so that a pass then drops the previous CAs."""
    mount_previous: bool = False
    """A cluster fact: cert-manager has not issued the webhook's Secret yet but the
    cert-controller's still exists, so the webhook keeps serving that one until then."""
    issued: bool = False
    """A cluster fact: the Secret cert-manager fills for the webhook exists, so the webhook
    can be served from it whatever happens to the Issuer."""

    @property
    def renew_ahead(self) -> int:
        """Nanoseconds before expiry by which the webhook certificate is renewed at the
        latest: certificateRenewBefore with cert-manager, the cert-controller's 90 days less
        one of its requeue intervals without."""
        if self.enabled:
            return kube_values.parse_go_duration(self.renew_before)
        return (kube_values.parse_go_duration(CERT_CONTROLLER_RENEW_AHEAD)
                - kube_values.parse_go_duration(CERT_CONTROLLER_REQUEUE_INTERVAL))


class MonitoringSettings(_Frozen):
    """The OperandMonitoring feature: ServiceMonitors and a PrometheusRule for the operand."""

    enabled: bool = False
    served: bool = False
    """A cluster fact, not a setting: the API server serves ServiceMonitor and PrometheusRule
    (monitoring.coreos.com/v1). Without them there is nothing to render."""

    platform_scraped: bool = False
    """A cluster fact: the operand namespace is labelled openshift.io/cluster-monitoring=true,
    so OpenShift's platform Prometheus (openshift-monitoring) scrapes it, and user-workload
    monitoring does not. It decides which namespace the NetworkPolicies admit to the metrics
    ports, whether the feature is on or not."""

    console_dashboards: bool = False
    """A cluster fact: the namespace openshift-config-managed exists (OpenShift), where the
    console reads dashboards, so the operand's dashboard is rendered there. Read only while
    the feature is on and its API served."""

    @property
    def active(self) -> bool:
        return self.enabled and self.served


class BitwardenSettings(_Frozen):
    """The bitwarden-sdk-server and where its TLS key pair comes from."""

    enabled: bool = False
    tls_secret_name: str | None = None
    """The Secret mounted into bitwarden-sdk-server (secretRef, or the Certificate's)."""
    issue_certificate: bool = False
    """cert-manager issues `bitwarden-tls-certs` (bitwarden on, no secretRef)."""


EgressWorkload = Literal["controller", "bitwarden"]
# componentName of controllerConfig.networkPolicies -> the workload whose pods it selects.
EGRESS_WORKLOADS: dict[str, EgressWorkload] = {
    "ExternalSecretsCoreController": "controller", "BitwardenSDKServer": "bitwarden"}
# The operator's own egress policy of each workload: all egress (the providers are unknown).
DEFAULT_EGRESS_POLICIES: dict[EgressWorkload, str] = {
    "controller": "allow-provider-egress-for-main-controller",
    "bitwarden": "allow-provider-egress-for-bitwarden-server",
}
ALLOW_ALL_EGRESS: tuple[dict[str, Any], ...] = ({},)


class EgressPolicy(_Frozen):
    """One egress NetworkPolicy of a workload: the default, or one the administrator
    declared (which replace the default of that workload)."""

    name: str
    workload: EgressWorkload
    egress: tuple[dict[str, Any], ...]


ProxySource = Literal["ExternalSecretsConfig", "ExternalSecretsManager", "environment"]


# What must never go through the proxy, after the API server's Service address: Go's
# ProxyFromEnvironment (client-go, the providers' SDKs) bypasses only loopback and NO_PROXY
# matches, so without these the components' calls to the API server (the `kubernetes` Service,
# KUBERNETES_SERVICE_HOST) and to in-cluster Services would go to the proxy. A leading dot
# matches every subdomain.
IN_CLUSTER_NO_PROXY: tuple[str, ...] = (
    "kubernetes.default.svc", ".svc", ".cluster.local", "localhost", "127.0.0.1")


def merged_no_proxy(admin: str | None, required: tuple[str, ...]) -> str:
    """NO_PROXY: the administrator's entries first, in their order (trimmed, blank ones
    dropped), then each
    of `required` they do not already list. Entries compare as Go compares them (trimmed,
    case-insensitive); the first of duplicates stays."""
    entries: list[str] = []
    seen: set[str] = set()
    for entry in (item.strip() for item in [*(admin or "").split(","), *required]):
        if entry and entry.lower() not in seen:
            seen.add(entry.lower())
            entries.append(entry)
    return ",".join(entries)


class ProxySettings(_Frozen):
    """The proxy of the components that call out of the cluster (the controller and
    bitwarden-sdk-server); only non-empty values are set."""

    http_proxy: str | None = None
    https_proxy: str | None = None
    no_proxy: str | None = None
    """The administrator's noProxy (or the environment's NO_PROXY), as given."""
    source: ProxySource = "ExternalSecretsConfig"
    api_server_addresses: tuple[str, ...] = ()
    """A cluster fact, not a setting: the ClusterIPs of the `kubernetes` Service in
    `default`, the address the components' in-cluster client configuration
    (KUBERNETES_SERVICE_HOST) calls the API server at (`with_api_server_addresses`)."""

    @property
    def effective_no_proxy(self) -> str:
        """The NO_PROXY the components get: the administrator's entries, then the API
        server's Service addresses and IN_CLUSTER_NO_PROXY."""
        return merged_no_proxy(self.no_proxy, (*self.api_server_addresses, *IN_CLUSTER_NO_PROXY))


Workload = Literal["controller", "webhook", "cert-controller", "bitwarden"]
WORKLOADS: tuple[Workload, ...] = ("controller", "webhook", "cert-controller", "bitwarden")
# controllerConfig.componentConfigs[].componentName -> the workload (Deployment) it configures.
COMPONENT_NAME_WORKLOADS: dict[str, Workload] = {
    "ExternalSecretsCoreController": "controller", "Webhook": "webhook",
    "CertController": "cert-controller", "BitwardenSDKServer": "bitwarden"}


class DisruptionBudget(_Frozen):
    """The PodDisruptionBudget of one workload: exactly one of the two is set."""

    max_unavailable: int | None = None
    min_available: int | None = None


class WorkloadSettings(_Frozen):
    """The Deployment settings of one workload, merged (see `_workload`)."""

    replicas: int | None = 1
    """None: the operator leaves replicas to a HorizontalPodAutoscaler or kubectl scale."""
    revision_history_limit: int = defaults.REVISION_HISTORY_LIMIT
    disruption_budget: DisruptionBudget | None = None
    """Rendered as a PodDisruptionBudget when set (replicas > 1, or asked for)."""
    spread_across_nodes: bool = False
    """Add the soft topology spread across nodes (replicas > 1 and no constraints given)."""
    override_env: tuple[dict[str, Any], ...] = ()
    override_args: tuple[str, ...] = ()
    """componentConfigs[].overrideArgs, checked (manager/api/operand_flags.py): appended to
    the main container's arguments."""
    resources: dict[str, Any] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    node_selector: dict[str, str] | None = None
    topology_spread_constraints: list[dict[str, Any]] | None = None
    priority_class_name: str | None = None


class ControllerFlags(_Frozen):
    """Flags of the external-secrets controller; None leaves the operand's default."""

    concurrent: int = 1
    client_qps: int | None = None
    client_burst: int | None = None
    enable_secrets_caching: bool | None = None
    enable_config_maps_caching: bool | None = None
    enable_managed_secrets_caching: bool | None = None
    store_requeue_interval: str | None = None


class WebhookSettings(_Frozen):
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    timeout_seconds: int = 5


# Mounted sources whose content processes read once, at start (render.context.LOADED_ONCE).
LoadedSource = Literal["trusted-ca", "proxy-ca", "bitwarden-tls"]


class TrustedCA(_Frozen):
    """A ConfigMap of PEM certificates the controller and bitwarden-sdk-server trust."""

    config_map_name: str
    key: str = "ca-bundle.crt"


class Images(_Frozen):
    external_secrets: str = versions.EXTERNAL_SECRETS_IMAGE
    bitwarden_sdk_server: str | None = None
    """None when the environment names no image (allowed while bitwarden is off)."""


class Versions(_Frozen):
    external_secrets: str = versions.EXTERNAL_SECRETS_VERSION
    bitwarden_sdk_server: str = versions.BITWARDEN_SDK_SERVER_VERSION



def webhook_lookahead(renew_ahead: int, check_interval: int) -> int:
    """The webhook's lookahead in nanoseconds: renew-ahead - checkInterval - margin."""
    return renew_ahead - check_interval - kube_values.parse_go_duration(LOOKAHEAD_MARGIN)



class EffectiveConfig(_Frozen):
    """Everything the renderer needs, merged and validated (see the module docstring)."""

    namespace: str = DEFAULT_OPERAND_NAMESPACE
    labels: dict[str, str] = {}
    """User labels, merged (ESM < ESC); the renderer adds the standard labels over them."""
    adopt_existing_objects: bool = False
    """Apply over objects of the rendered names that the operator did not create."""
    log_level: int = 1
    operating_namespace: str | None = None
    cert_manager: CertManagerSettings = CertManagerSettings()
    bitwarden: BitwardenSettings = BitwardenSettings()
    monitoring: MonitoringSettings = MonitoringSettings()
    generic_targets: bool = False
    """The UnsafeAllowGenericTargets feature: the controller's --unsafe-allow-generic-targets
    and the right to write ConfigMaps where it syncs."""
    webhook_check_interval: str = kube_values.normal_go_duration(
        defaults.CERTIFICATE_CHECK_INTERVAL)
    resources: dict[str, Any] | None = None
    affinity: dict[str, Any] | None = None
    tolerations: list[dict[str, Any]] | None = None
    node_selector: dict[str, str] | None = None
    proxy: ProxySettings | None = None
    egress_policies: tuple[EgressPolicy, ...] = (
        EgressPolicy(name=DEFAULT_EGRESS_POLICIES["controller"], workload="controller",
                     egress=ALLOW_ALL_EGRESS),)
    """Egress NetworkPolicies of the components that call out (bitwarden's only while it is
    enabled)."""
    images: Images = Images()
    versions: Versions = Versions()
    unsupported_overrides: tuple[str, ...] = ()
    """Each overrideArgs entry in effect, as "<field>: <flag>" (status.unsupportedOverrides;
    they make the operator not Upgradeable)."""
    ignored_settings: tuple[str, ...] = ()
    """Settings of the spec that have no effect, each with its field and the reason
    (status.ignoredSettings)."""
    hidden_global_settings: tuple[str, ...] = ()
    """ExternalSecretsManager globalConfig settings that have no effect because the
    ExternalSecretsConfig's appConfig sets them too, with another value."""
    annotations: dict[str, str] = {}
    """controllerConfig.annotations: on every rendered object and pod template."""
    workloads: dict[Workload, WorkloadSettings] = {
        workload: WorkloadSettings() for workload in WORKLOADS}
    """Per Deployment: componentConfigs over appConfig over globalConfig over defaults."""
    controller_flags: ControllerFlags = ControllerFlags()
    webhook: WebhookSettings = WebhookSettings()
    trusted_ca: TrustedCA | None = None
    loaded_once: dict[LoadedSource, str] = {}
    """A cluster fact: a digest of the content of each mounted source that a process reads
    only when it starts (see render.context.LOADED_ONCE); a change rolls those pods."""
    tls_profile: TLSProfile = INTERMEDIATE
    """A cluster fact: the cluster's TLS security profile (manager/tls_profile.py), which the
    operand's TLS servers follow as far as they can (the webhook's --tls-* flags)."""

    @property
    def webhook_lookahead_interval(self) -> str:
        """The webhook's --lookahead-interval (see LOOKAHEAD_MARGIN)."""
        return kube_values.format_go_duration(webhook_lookahead(
            self.cert_manager.renew_ahead,
            kube_values.parse_go_duration(self.webhook_check_interval)))

    @model_validator(mode="before")
    @classmethod
    def _global_workloads(cls, data: Any) -> Any:
        """A config built without `workloads` (tests, tools) gives every workload the global
        scheduling and resources; `effective_config` always passes them, merged."""
        if isinstance(data, dict) and "workloads" not in data:
            shared = {field: data[field] for field in
                      ("resources", "affinity", "tolerations", "node_selector")
                      if data.get(field) is not None}
            data = {**data, "workloads": {workload: WorkloadSettings(**shared)
                                          for workload in WORKLOADS}}
        return data

    @model_validator(mode="after")
    def _consistent(self) -> EffectiveConfig:
        """Combinations the renderer cannot turn into working objects (programming errors:
        `effective_config` reports the user-facing cause as a ConfigError first)."""
        if not 1 <= self.log_level <= 5:
            raise ValueError("log_level must be 1 to 5")
        if self.cert_manager.enabled and not self.cert_manager.issuer_name:
            raise ValueError("cert_manager.enabled needs cert_manager.issuer_name")
        if self.bitwarden.enabled and not self.bitwarden.tls_secret_name:
            raise ValueError("bitwarden.enabled needs bitwarden.tls_secret_name")
        if self.bitwarden.issue_certificate and not (self.bitwarden.enabled
                                                     and self.cert_manager.enabled):
            raise ValueError("bitwarden.issue_certificate needs bitwarden and cert_manager")
        if self.bitwarden.enabled and not self.images.bitwarden_sdk_server:
            raise ValueError("bitwarden.enabled needs images.bitwarden_sdk_server")
        return self
