"""EffectiveConfig: the one merge of ExternalSecretsConfig, ExternalSecretsManager and the
operator's environment, validated. It is the only input of the renderer.

Precedence, for every setting the two specs share (see docs/configuration.md):

    ESC spec.appConfig  >  ESM spec.globalConfig  >  operator environment  >  defaults

A setting is taken whole from the first source that has it: `resources`, `affinity`,
`tolerations`, `nodeSelector` and `proxy` are never merged field by field, and an empty value
in a higher source ("tolerations: []", "proxy: {}") means "none", not "ask the next source".
Labels are the exception: they merge ESM globalConfig.labels < ESC controllerConfig.labels <
the operator's standard labels (added by the renderer).

The API server defaults `appConfig.logLevel` to 1 whenever `appConfig` exists (the seed's
CRD default), and the models do the same, so an ESC with any `appConfig` always has a log
level and the ESM's `globalConfig.logLevel` applies only to an ESC without `appConfig`. A
defaulted value cannot be told from one the administrator wrote (a create or update records
the default as the writer's field too), so instead of guessing, the result lists every
`globalConfig` setting the ESC hides (`hidden_global_settings`) and the ESM's status says so.

Pure: no I/O. Errors the user must fix raise `ConfigError` naming the field and the fix.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from manager import kube_values, versions
from manager.api import defaults, operand_flags
from manager.api.models import (
    ApplicationConfig,
    CertManagerConfig,
    CommonConfigs,
    ComponentConfig,
    ControllerConfig,
    ExternalSecretsConfigSpec,
    ExternalSecretsManagerSpec,
    GlobalConfig,
    ObjectReference,
    ProxyConfig,
)
from manager.api.patterns import (
    PLATFORM_ANNOTATION_KEYS,
    is_reserved_annotation_key,
    is_reserved_env_name,
    is_reserved_label_key,
    is_shared_namespace,
)
from manager.api.rules import (
    CERT_CONTROLLER_RENEW_AHEAD,
    CERT_CONTROLLER_REQUEUE_INTERVAL,
    LOOKAHEAD_MARGIN,
    OPERATOR_NETWORK_POLICIES,
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
KNOWN_FEATURES: frozenset[str] = frozenset({OPERAND_MONITORING})

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


# --- the merge ------------------------------------------------------------------------------


def config_of_objects(esc: Mapping[str, Any], esm: Mapping[str, Any] | None,
                      env: OperatorEnvironment) -> EffectiveConfig:
    """The configuration of an ExternalSecretsConfig and an ExternalSecretsManager as the API
    server returns them (raw objects); a spec the models refuse is a ConfigError."""
    try:
        esc_spec = ExternalSecretsConfigSpec.model_validate(esc.get("spec") or {})
        esm_spec = ExternalSecretsManagerSpec.model_validate((esm or {}).get("spec") or {})
    except ValidationError as error:
        first = error.errors()[0] if error.errors() else None
        location = ".".join(["spec", *(str(part) for part in first["loc"])]) if first else "spec"
        raise ConfigError(location, first["msg"] if first else str(error)) from None
    return effective_config(esc_spec, esm_spec, env)


def effective_config(esc: ExternalSecretsConfigSpec | None,
                     esm: ExternalSecretsManagerSpec | None,
                     env: OperatorEnvironment) -> EffectiveConfig:
    """Merge and validate; raises ConfigError for anything the user (or deployer) must fix."""
    esc = esc or ExternalSecretsConfigSpec()
    app = esc.app_config
    glob = esm.global_config if esm is not None else None
    namespace = _namespace(esc, env)
    cert_manager = _cert_manager(app.cert_manager_config if app else None)
    check_interval = _webhook_check_interval(app)
    _check_lookahead(cert_manager, check_interval)
    bitwarden = _bitwarden(app, cert_manager)
    return EffectiveConfig(
        namespace=namespace,
        labels=_user_labels(esc, glob),
        adopt_existing_objects=bool(esc.controller_config
                                    and esc.controller_config.adopt_existing_objects == "true"),
        log_level=_log_level(app, glob),
        operating_namespace=_operating_namespace(app),
        cert_manager=cert_manager,
        bitwarden=bitwarden,
        monitoring=MonitoringSettings(enabled=feature_enabled(esm, OPERAND_MONITORING)),
        webhook_check_interval=check_interval,
        **_pod_settings(app, glob),
        proxy=_proxy(app, glob, env),
        egress_policies=_egress_policies(esc.controller_config, bitwarden),
        images=_images(env, bitwarden),
        versions=_versions(env),
        hidden_global_settings=hidden_global_settings(app, glob),
        ignored_settings=(ignored_budgets(esc.controller_config)
                          + ignored_components(esc.controller_config, cert_manager, bitwarden)),
        unsupported_overrides=unsupported_overrides(esc.controller_config),
        annotations=_annotations(esc.controller_config),
        workloads={workload: _workload(workload, esc.controller_config, app, glob)
                   for workload in WORKLOADS},
        controller_flags=_controller_flags(esc.controller_config),
        webhook=_webhook(app),
        trusted_ca=_trusted_ca(app),
    )


# CommonConfigs fields, as the spec names them, and the CRD default of each (if any).
_COMMON_SETTINGS = {"log_level": 1, "resources": None, "affinity": None, "tolerations": None,
                    "node_selector": None, "proxy": None}


def hidden_global_settings(app: ApplicationConfig | None,
                           glob: GlobalConfig | None) -> tuple[str, ...]:
    """The globalConfig settings the ESC's appConfig overrides with another value. A
    globalConfig value equal to its CRD default is not listed: the API server may have put
    it there."""
    if app is None or glob is None:
        return ()
    hidden = []
    for field, default in _COMMON_SETTINGS.items():
        mine, theirs = getattr(app, field), getattr(glob, field)
        if mine is not None and theirs is not None and theirs not in (mine, default):
            hidden.append(to_camel(field))
    return tuple(hidden)


def feature_enabled(esm: ExternalSecretsManagerSpec | None, name: str) -> bool:
    """Whether `features` has an entry `name` with enabled "true" (absent: off)."""
    return any(feature.name == name and feature.enabled == "true"
               for feature in (esm.features if esm else None) or [])


def unknown_features(esm: ExternalSecretsManagerSpec | None) -> tuple[str, ...]:
    """Names in `features` that this operator does not implement."""
    names = [feature.name for feature in (esm.features if esm else None) or []]
    return tuple(name for name in names if name not in KNOWN_FEATURES)


def _pick(field: str, app: ApplicationConfig | None, glob: GlobalConfig | None,
          component: tuple[ComponentConfig, str] | None = None) -> tuple[Any, str]:
    """THE precedence: the first source that sets `field`, and its path. The sources, highest
    first: the component's entry of ESC controllerConfig.componentConfigs (when `component`
    names one: the entry and its path), ESC appConfig, ESM globalConfig; then the caller's
    default.

    Present-but-empty counts as set: it means "none" and hides the lower source.
    """
    sources: list[tuple[CommonConfigs | ComponentConfig | None, str]] = [
        (app, ESC_APP), (glob, ESM_GLOBAL)]
    if component is not None:
        sources.insert(0, component)
    for common, path in sources:
        value = getattr(common, field) if common is not None else None
        if value is not None:
            return value, f"{path}.{to_camel(field)}"
    return None, ""


_RECREATE = ("namespace is immutable: delete the ExternalSecretsConfig (the operand it "
             "installed stays) and create it again with a namespace of the operand's own, such "
             "as 'external-secrets'")


def _namespace(esc: ExternalSecretsConfigSpec, env: OperatorEnvironment) -> str:
    controller = esc.controller_config
    namespace = controller.namespace if controller else DEFAULT_OPERAND_NAMESPACE
    field = f"{ESC_CONTROLLER}.namespace"
    if not kube_values.is_dns_label(namespace):
        raise ConfigError(field, f"{namespace!r} is not a valid namespace name: use lowercase "
                                 "letters, digits and '-', starting and ending with a letter or "
                                 "digit")
    if is_shared_namespace(namespace):
        raise ConfigError(field, f"{namespace!r} is a shared or system namespace ('default', "
                                 "'openshift', 'kube-*', 'openshift-*'), which the operand must "
                                 f"not share; the {_RECREATE}")
    if namespace == env.own_namespace:
        raise ConfigError(field, f"{namespace!r} is the namespace the operator itself runs in; "
                                 "the operand's NetworkPolicies and pruning must not reach the "
                                 f"operator, so it needs a namespace of its own; the {_RECREATE}")
    return namespace


def _operating_namespace(app: ApplicationConfig | None) -> str | None:
    namespace = app.operating_namespace if app else None
    if namespace is not None and not kube_values.is_dns_label(namespace):
        raise ConfigError(f"{ESC_APP}.operatingNamespace",
                          f"{namespace!r} is not a valid namespace name: use lowercase letters, "
                          "digits and '-', starting and ending with a letter or digit")
    return namespace


def _checked_user_labels(labels: Mapping[str, str] | None, path: str) -> dict[str, str]:
    labels = dict(labels or {})
    for key in labels:
        if is_reserved_label_key(key):
            raise ConfigError(f"{path}[{key!r}]",
                              "this label key is reserved for the operator's own labels "
                              "('app', 'app.kubernetes.io/*', 'external-secrets.io/*', "
                              "'rbac.authorization.k8s.io/*', 'servicebinding.io/controller'); "
                              "choose another key")
    try:
        kube_values.check_label_map(labels)
    except kube_values.InvalidValueError as error:
        raise ConfigError(f"{path}{error.path}", error.message) from None
    return labels


def _user_labels(esc: ExternalSecretsConfigSpec, glob: GlobalConfig | None) -> dict[str, str]:
    from_esm = _checked_user_labels(glob.labels if glob else None, f"{ESM_GLOBAL}.labels")
    controller = esc.controller_config
    from_esc = _checked_user_labels(controller.labels if controller else None,
                                    f"{ESC_CONTROLLER}.labels")
    return {**from_esm, **from_esc}


def _log_level(app: ApplicationConfig | None, glob: GlobalConfig | None) -> int:
    level, _ = _pick("log_level", app, glob)
    return int(level) if level is not None else 1


def _duration(text: str, field: str) -> int:
    try:
        return kube_values.parse_go_duration(text)
    except kube_values.InvalidValueError as error:
        raise ConfigError(field, f"{error.message}; write a duration such as '30m', '1h30m' "
                                 "or '8760h'") from None


def _webhook_check_interval(app: ApplicationConfig | None) -> str:
    webhook = app.webhook_config if app else None
    interval = webhook.certificate_check_interval if webhook else None
    if interval is None:
        return kube_values.normal_go_duration(defaults.CERTIFICATE_CHECK_INTERVAL)
    field = f"{ESC_APP}.webhookConfig.certificateCheckInterval"
    nanoseconds = _duration(interval, field)
    if nanoseconds <= 0:
        raise ConfigError(field, "must be longer than zero, e.g. '5m'")
    return kube_values.format_go_duration(nanoseconds)


def webhook_lookahead(renew_ahead: int, check_interval: int) -> int:
    """The webhook's lookahead in nanoseconds: renew-ahead - checkInterval - margin."""
    return renew_ahead - check_interval - kube_values.parse_go_duration(LOOKAHEAD_MARGIN)


def _check_lookahead(cert_manager: CertManagerSettings, check_interval: str) -> None:
    """The lifetimes must leave a lookahead of at least one check interval (the CRD refuses
    the same at admission; this catches objects stored before the rule)."""
    interval = kube_values.parse_go_duration(check_interval)
    if webhook_lookahead(cert_manager.renew_ahead, interval) >= interval:
        return
    check = f"{ESC_APP}.webhookConfig.certificateCheckInterval"
    if cert_manager.enabled:
        raise ConfigError(
            f"{ESC_APP}.certManagerConfig.certificateRenewBefore",
            f"must be at least twice {check} plus {LOOKAHEAD_MARGIN} "
            f"({cert_manager.renew_before} < 2 x {check_interval} + {LOOKAHEAD_MARGIN}): the "
            "webhook checks every check interval that its certificate is valid that far "
            "ahead, and would exit before cert-manager renews it; raise "
            "certificateRenewBefore or lower certificateCheckInterval")
    raise ConfigError(
        check, f"must be at most ({CERT_CONTROLLER_RENEW_AHEAD} - "
               f"{CERT_CONTROLLER_REQUEUE_INTERVAL} - {LOOKAHEAD_MARGIN}) / 2 with the "
               "built-in cert-controller, which renews the webhook certificate 90 days before "
               "it expires; lower certificateCheckInterval")


def _cert_manager(config: CertManagerConfig | None) -> CertManagerSettings:
    path = f"{ESC_APP}.certManagerConfig"
    if config is None:
        return CertManagerSettings()
    # What the CRD checks whether enabled or not, checked alike (render, older objects).
    kind = _check_issuer_ref(config.issuer_ref, f"{path}.issuerRef")
    duration = _duration(config.certificate_duration or defaults.CERTIFICATE_DURATION,
                         f"{path}.certificateDuration")
    renew_before = _duration(config.certificate_renew_before or defaults.CERTIFICATE_RENEW_BEFORE,
                             f"{path}.certificateRenewBefore")
    if config.enabled != "true":
        if renew_before >= duration:  # with it on, _check_certificate_lifetime says more
            raise ConfigError(f"{path}.certificateRenewBefore",
                              "must be shorter than certificateDuration")
        if config.add_injector_annotations == "true":
            raise ConfigError(f"{path}.addInjectorAnnotations",
                              "can only be 'true' when enabled is 'true'")
        return CertManagerSettings()
    issuer = config.issuer_ref
    if issuer is None or kind is None:
        raise ConfigError(f"{path}.issuerRef", "is required when enabled is 'true': name the "
                                               "cert-manager Issuer or ClusterIssuer to use")
    _check_certificate_lifetime(duration, renew_before, path)
    return CertManagerSettings(
        enabled=True,
        add_injector_annotations=config.add_injector_annotations == "true",
        issuer_name=issuer.name,
        issuer_kind=kind,
        issuer_group=CERT_MANAGER_GROUP,
        duration=kube_values.format_go_duration(duration),
        renew_before=kube_values.format_go_duration(renew_before),
    )


def _check_issuer_ref(issuer: ObjectReference | None, path: str) -> str | None:
    """The issuer's kind as cert-manager spells it; None without an issuerRef."""
    if issuer is None:
        return None
    kind = ISSUER_KINDS.get((issuer.kind or "Issuer").lower())
    if kind is None:
        raise ConfigError(f"{path}.kind", "must be either 'Issuer' or 'ClusterIssuer'")
    if (issuer.group or CERT_MANAGER_GROUP).lower() != CERT_MANAGER_GROUP:
        raise ConfigError(f"{path}.group", "must be 'cert-manager.io'")
    if not kube_values.is_dns_subdomain(issuer.name):
        raise ConfigError(f"{path}.name", f"{issuer.name!r} is not a valid object name")
    return kind


def _check_certificate_lifetime(duration: int, renew_before: int, path: str) -> None:
    if duration < kube_values.parse_go_duration(MINIMUM_CERTIFICATE_DURATION):
        raise ConfigError(f"{path}.certificateDuration",
                          f"cert-manager requires at least {MINIMUM_CERTIFICATE_DURATION}")
    if renew_before < kube_values.parse_go_duration(MINIMUM_RENEW_BEFORE):
        raise ConfigError(f"{path}.certificateRenewBefore",
                          f"cert-manager requires at least {MINIMUM_RENEW_BEFORE}")
    if renew_before >= duration:
        raise ConfigError(f"{path}.certificateRenewBefore",
                          "must be shorter than certificateDuration")


def _bitwarden(app: ApplicationConfig | None,
               cert_manager: CertManagerSettings) -> BitwardenSettings:
    provider = app.bitwarden_secret_manager_provider if app else None
    if provider is None or provider.enabled != "true":
        return BitwardenSettings()
    path = f"{ESC_APP}.bitwardenSecretManagerProvider"
    if provider.secret_ref is not None:
        name = provider.secret_ref.name
        if not kube_values.is_dns_subdomain(name):
            raise ConfigError(f"{path}.secretRef.name", f"{name!r} is not a valid Secret name")
        return BitwardenSettings(enabled=True, tls_secret_name=name)
    if not cert_manager.enabled:
        raise ConfigError(f"{path}.secretRef",
                          "bitwarden-sdk-server needs a TLS key pair: set secretRef to a Secret "
                          "with tls.crt, tls.key and ca.crt; or, if the ExternalSecretsConfig has "
                          "no certManagerConfig yet, add one with enabled: 'true' so cert-manager "
                          "issues it (enabled cannot change once set)")
    return BitwardenSettings(enabled=True, tls_secret_name=BITWARDEN_CERTIFICATE_SECRET,
                             issue_certificate=True)


# The pod settings `_pick` takes whole, each with the check the API server would make of it
# (a CRD cannot: their schemas are Kubernetes' own, kept open in ours).
_POD_SETTING_CHECKS: dict[str, Callable[[Any], None]] = {
    "resources": kube_values.check_resource_requirements,
    "affinity": kube_values.check_affinity,
    "tolerations": kube_values.check_tolerations,
    "node_selector": kube_values.check_label_map,
}


def _pod_settings(app: ApplicationConfig | None, glob: GlobalConfig | None,
                  component: tuple[ComponentConfig, str] | None = None) -> dict[str, Any]:
    """resources, affinity, tolerations and nodeSelector by `_pick`, checked; an empty value
    is none."""
    settings: dict[str, Any] = {}
    for name, check in _POD_SETTING_CHECKS.items():
        value, field = _pick(name, app, glob, component)
        if not value:
            settings[name] = None
            continue
        try:
            check(value)
        except kube_values.InvalidValueError as error:
            raise ConfigError(f"{field}{error.path}", error.message) from None
        settings[name] = value
    return settings


def _proxy(app: ApplicationConfig | None, glob: GlobalConfig | None,
           env: OperatorEnvironment) -> ProxySettings | None:
    """The first proxy that is present: ESC, ESM, then the environment OLM injects.

    A present proxy with every field empty ("proxy: {}") is an explicit "no proxy" that also
    hides the lower sources (e.g. to keep the cluster-wide proxy away from the operand).
    """
    chosen: tuple[ProxyConfig, ProxySource] | None = None
    if app is not None and app.proxy is not None:
        chosen = (_checked_proxy(app.proxy, f"{ESC_APP}.proxy"), "ExternalSecretsConfig")
    elif glob is not None and glob.proxy is not None:
        chosen = (_checked_proxy(glob.proxy, f"{ESM_GLOBAL}.proxy"), "ExternalSecretsManager")
    elif env.http_proxy or env.https_proxy or env.no_proxy:
        chosen = (ProxyConfig(http_proxy=env.http_proxy, https_proxy=env.https_proxy,
                              no_proxy=env.no_proxy), "environment")
    if chosen is None:
        return None
    proxy, source = chosen
    if not (proxy.http_proxy or proxy.https_proxy or proxy.no_proxy):
        return None
    return ProxySettings(http_proxy=proxy.http_proxy or None,
                         https_proxy=proxy.https_proxy or None,
                         no_proxy=proxy.no_proxy or None, source=source)


def with_api_server_addresses(config: EffectiveConfig,
                              addresses: tuple[str, ...]) -> EffectiveConfig:
    """`config` with the cluster fact of ProxySettings.api_server_addresses (no change
    without a proxy: nothing renders it)."""
    if config.proxy is None:
        return config
    return config.model_copy(update={
        "proxy": config.proxy.model_copy(update={"api_server_addresses": tuple(addresses)})})


def _checked_proxy(proxy: ProxyConfig, path: str) -> ProxyConfig:
    """The CRD's URL rule, for `render` and objects stored before it existed. The
    environment's proxy is OLM's copy of the cluster proxy, which OpenShift validates."""
    for field, value in (("httpProxy", proxy.http_proxy), ("httpsProxy", proxy.https_proxy),
                         ("noProxy", proxy.no_proxy)):
        if value and kube_values.has_control_character(value):
            raise ConfigError(f"{path}.{field}", "must not contain control characters such as "
                                                  "newlines or tabs")
        problem = kube_values.proxy_url_problem(value) if value and field != "noProxy" else None
        if problem is not None:
            raise ConfigError(f"{path}.{field}", problem)
    return proxy


def _egress_policies(controller: ControllerConfig | None,
                     bitwarden: BitwardenSettings) -> tuple[EgressPolicy, ...]:
    """Per component that calls out: the administrator's policies if any name it, else the
    default that allows all egress. The CRD's name rules are checked again for `render`."""
    declared = list(controller.network_policies or []) if controller else []
    path = f"{ESC_CONTROLLER}.networkPolicies"
    names = [policy.name for policy in declared]
    for index, name in enumerate(names):
        if name in OPERATOR_NETWORK_POLICIES or not kube_values.is_dns_subdomain(name):
            raise ConfigError(f"{path}[{index}].name",
                              f"{name!r} must be an object name that none of the operator's own "
                              "NetworkPolicies has")
        if names.count(name) > 1:
            raise ConfigError(f"{path}[{index}].name", f"{name!r} is used twice; names must "
                                                       "be unique (each is one NetworkPolicy)")
    workloads: tuple[EgressWorkload, ...] = (("controller", "bitwarden") if bitwarden.enabled
                                              else ("controller",))
    policies: list[EgressPolicy] = []
    for workload in workloads:
        mine = [EgressPolicy(name=p.name, workload=workload, egress=tuple(p.egress))
                for p in declared if EGRESS_WORKLOADS[p.component_name] == workload]
        policies.extend(mine or [EgressPolicy(name=DEFAULT_EGRESS_POLICIES[workload],
                                              workload=workload, egress=ALLOW_ALL_EGRESS)])
    return tuple(policies)


def _images(env: OperatorEnvironment, bitwarden: BitwardenSettings) -> Images:
    if not env.external_secrets_image:
        raise ConfigError("env.RELATED_IMAGE_EXTERNAL_SECRETS",
                          "the operator has no external-secrets image: set "
                          "RELATED_IMAGE_EXTERNAL_SECRETS on the operator Deployment (or unset "
                          "it to use the pinned default)")
    if bitwarden.enabled and not env.bitwarden_image:
        raise ConfigError(f"{ESC_APP}.bitwardenSecretManagerProvider.enabled",
                          "bitwarden is enabled but the operator has no bitwarden-sdk-server "
                          "image: set RELATED_IMAGE_BITWARDEN_SDK_SERVER on the operator "
                          "Deployment, or disable bitwarden")
    return Images(external_secrets=env.external_secrets_image,
                  bitwarden_sdk_server=env.bitwarden_image)


def _versions(env: OperatorEnvironment) -> Versions:
    for variable, value in (("OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION", env.operand_version),
                            ("BITWARDEN_SDK_SERVER_IMAGE_VERSION", env.bitwarden_version)):
        problem = kube_values.label_value_problem(value)
        if problem is not None:
            raise ConfigError(f"env.{variable}", f"becomes the app.kubernetes.io/version label, "
                                                 f"so {problem}")
    return Versions(external_secrets=env.operand_version,
                    bitwarden_sdk_server=env.bitwarden_version)



# --- administrator knobs: annotations, per-component settings, webhook, trusted CA ----------


def _annotations(controller: ControllerConfig | None) -> dict[str, str]:
    """The CRD's annotation rules, again for `render` and objects stored before them."""
    annotations = dict((controller.annotations if controller else None) or {})
    path = f"{ESC_CONTROLLER}.annotations"
    for key in annotations:
        if is_reserved_annotation_key(key):
            raise ConfigError(f"{path}[{key!r}]",
                              "this annotation key is reserved (kubernetes.io/, k8s.io/, "
                              "openshift.io/ and their subdomains, cert-manager.io/, "
                              "external-secrets.io/, external-secrets-operator.io/; allowed "
                              f"among them: {', '.join(PLATFORM_ANNOTATION_KEYS)}); choose "
                              "another key")
        problem = kube_values.qualified_name_problem(key)
        if problem is not None:
            raise ConfigError(f"{path}[{key!r}]", problem)
    return annotations


def _component_config(controller: ControllerConfig | None,
                      workload: Workload) -> tuple[ComponentConfig, str] | None:
    """The componentConfigs entry of `workload`, and its path."""
    entries = (controller.component_configs if controller else None) or []
    for index, entry in enumerate(entries):
        if COMPONENT_NAME_WORKLOADS[entry.component_name] == workload:
            return entry, f"{ESC_CONTROLLER}.componentConfigs[{index}]"
    return None


def _check_budget_fields(max_unavailable: int | None, min_available: int | None,
                         path: str) -> None:
    """Exactly one of the two, as the CRD's rule says and the PodDisruptionBudget API
    requires: rendering both (or neither) would make an object the API server refuses."""
    if (max_unavailable is None) == (min_available is None):
        raise ConfigError(f"{path}.deploymentConfigs.podDisruptionBudget",
                          "set exactly one of maxUnavailable and minAvailable")


def _check_budget(min_available: int | None, replicas: int | None, path: str) -> None:
    """A budget that would be rendered and can never allow an eviction (the CRD refuses the
    same at admission; this catches objects stored before the rules)."""
    field = f"{path}.deploymentConfigs.podDisruptionBudget.minAvailable"
    if not min_available:
        return
    if replicas is None:
        raise ConfigError(field, "cannot be above 0 when manageReplicas is 'false': the "
                                 "operator does not know how many pods run; use "
                                 "podDisruptionBudget.maxUnavailable")
    if replicas > 1 and min_available >= replicas:  # one replica: not rendered, reported
        raise ConfigError(field, f"must be lower than replicas ({replicas}), or no pod could "
                                 "ever be evicted (node drains would hang)")


def ignored_budgets(controller: ControllerConfig | None) -> tuple[str, ...]:
    """The podDisruptionBudgets asked for that are not rendered (one replica), each with the
    field and the reason, for status.ignoredSettings."""
    ignored = []
    for index, entry in enumerate((controller.component_configs if controller else None) or []):
        deployment = entry.deployment_configs
        if deployment is None or deployment.pod_disruption_budget is None:
            continue
        if deployment.manage_replicas == "false" or (deployment.replicas or 1) > 1:
            continue
        ignored.append(
            f"{ESC_CONTROLLER}.componentConfigs[{index}].deploymentConfigs."
            f"podDisruptionBudget: not rendered: {entry.component_name} runs 1 replica and a "
            "PodDisruptionBudget could only block node drains; set replicas to 2 or more to "
            "get one, or remove podDisruptionBudget")
    return tuple(ignored)


def ignored_components(controller: ControllerConfig | None, cert_manager: CertManagerSettings,
                       bitwarden: BitwardenSettings) -> tuple[str, ...]:
    """componentConfigs and networkPolicies entries for a component that does not run (the
    cert-controller once cert-manager issues the certificate, bitwarden-sdk-server while it is
    off), each with the field and the reason, for status.ignoredSettings."""
    why = {"CertController": ("the cert-controller does not run while cert-manager issues the "
                              "webhook certificate (appConfig.certManagerConfig.enabled)")
           if cert_manager.enabled else None,
           "BitwardenSDKServer": ("bitwarden-sdk-server does not run while "
                                  "appConfig.bitwardenSecretManagerProvider.enabled is not 'true'")
           if not bitwarden.enabled else None}
    named: list[tuple[str, str]] = [  # (field, componentName)
        *((f"componentConfigs[{index}]", entry.component_name) for index, entry in
          enumerate((controller.component_configs if controller else None) or [])),
        *((f"networkPolicies[{index}]", entry.component_name) for index, entry in
          enumerate((controller.network_policies if controller else None) or []))]
    return tuple(f"{ESC_CONTROLLER}.{field} ({component}): no effect: {reason}; remove the "
                 "entry or enable the component"
                 for field, component in named if (reason := why.get(component)))


def _workload(workload: Workload, controller: ControllerConfig | None,
              app: ApplicationConfig | None, glob: GlobalConfig | None) -> WorkloadSettings:
    """One Deployment's settings: scheduling and resources by `_pick` (component >
    appConfig > globalConfig > none), the rest from the component's entry only."""
    component = _component_config(controller, workload)
    entry = component[0] if component else None
    deployment = entry.deployment_configs if entry else None
    replicas: int | None = 1
    if deployment is not None and deployment.manage_replicas == "false":
        replicas = None
    elif deployment is not None and deployment.replicas is not None:
        replicas = deployment.replicas
    budget = deployment.pod_disruption_budget if deployment else None
    if budget is not None and component is not None:
        _check_budget_fields(budget.max_unavailable, budget.min_available, component[1])
        _check_budget(budget.min_available, replicas, component[1])
    disruption_budget = None
    if budget is not None and (budget.max_unavailable is not None
                               or budget.min_available is not None):
        disruption_budget = DisruptionBudget(max_unavailable=budget.max_unavailable,
                                             min_available=budget.min_available)
    if disruption_budget is not None and replicas is not None and replicas <= 1:
        disruption_budget = None  # one pod: a budget would only block node drains
    elif disruption_budget is None and replicas is not None and replicas > 1:
        disruption_budget = DisruptionBudget(max_unavailable=1)
    spread, _ = _pick("topology_spread_constraints", None, None, component)
    return WorkloadSettings(
        replicas=replicas,
        revision_history_limit=(deployment.revision_history_limit
                                if deployment and deployment.revision_history_limit
                                else defaults.REVISION_HISTORY_LIMIT),
        disruption_budget=disruption_budget,
        spread_across_nodes=spread is None and replicas is not None and replicas > 1,
        override_env=_override_env(entry, component[1] if component else ""),
        override_args=_override_args(entry, component[1] if component else ""),
        **_pod_settings(app, glob, component),
        topology_spread_constraints=[dict(c) for c in spread] if spread else None,
        priority_class_name=entry.priority_class_name if entry else None,
    )


def _override_env(entry: ComponentConfig | None, path: str) -> tuple[dict[str, Any], ...]:
    variables = list((entry.override_env if entry else None) or [])
    for index, variable in enumerate(variables):
        name = str(variable.get("name", ""))
        if is_reserved_env_name(name):
            raise ConfigError(f"{path}.overrideEnv[{index}].name",
                              f"{name!r} is reserved: the operator sets it (proxy: use "
                              "appConfig.proxy; SSL_CERT_*: use appConfig.trustedCABundle) or "
                              "the platform does (HOSTNAME, KUBERNETES_*, EXTERNAL_SECRETS_*)")
    return tuple(dict(variable) for variable in variables)


def _override_args(entry: ComponentConfig | None, path: str) -> tuple[str, ...]:
    """The CRD's overrideArgs rules, again for `render` and objects stored before them, and
    what CEL cannot say (a flag given twice)."""
    args = tuple((entry.override_args if entry else None) or ())
    for index, problem in operand_flags.problems(entry.component_name if entry else "", args):
        raise ConfigError(f"{path}.overrideArgs[{index}]", problem)
    return args


def unsupported_overrides(controller: ControllerConfig | None) -> tuple[str, ...]:
    """Every overrideArgs entry, with its field (status.unsupportedOverrides)."""
    return tuple(f"{ESC_CONTROLLER}.componentConfigs[{index}].overrideArgs "
                 f"({entry.component_name}): {arg}"
                 for index, entry in enumerate((controller.component_configs if controller
                                                else None) or [])
                 for arg in entry.override_args or ())


def _controller_flags(controller: ControllerConfig | None) -> ControllerFlags:
    component = _component_config(controller, "controller")
    tuning = component[0].tuning if component else None
    if tuning is None:
        return ControllerFlags()
    interval = None
    if tuning.store_requeue_interval is not None:
        field = f"{component[1] if component else ''}.tuning.storeRequeueInterval"
        nanoseconds = _duration(tuning.store_requeue_interval, field)
        if nanoseconds <= 0:
            raise ConfigError(field, "must be longer than zero, e.g. '5m'")
        interval = kube_values.format_go_duration(nanoseconds)
    if (tuning.client_qps is not None and tuning.client_burst is not None
            and tuning.client_burst < tuning.client_qps):
        raise ConfigError(f"{component[1] if component else ''}.tuning.clientBurst",
                          "clientBurst must be at least clientQPS")

    def flag(value: str | None) -> bool | None:
        return None if value is None else value == "true"

    return ControllerFlags(
        concurrent=tuning.concurrent or 1,
        client_qps=tuning.client_qps,
        client_burst=tuning.client_burst,
        enable_secrets_caching=flag(tuning.enable_secrets_caching),
        enable_config_maps_caching=flag(tuning.enable_config_maps_caching),
        enable_managed_secrets_caching=flag(tuning.enable_managed_secrets_caching),
        store_requeue_interval=interval,
    )


def _webhook(app: ApplicationConfig | None) -> WebhookSettings:
    webhook = app.webhook_config if app else None
    if webhook is None:
        return WebhookSettings()
    return WebhookSettings(failure_policy=webhook.failure_policy or "Fail",
                           timeout_seconds=webhook.timeout_seconds or 5)


def _trusted_ca(app: ApplicationConfig | None) -> TrustedCA | None:
    bundle = app.trusted_ca_bundle if app else None
    if bundle is None:
        return None
    if not kube_values.is_dns_subdomain(bundle.config_map_name):
        raise ConfigError(f"{ESC_APP}.trustedCABundle.configMapName",
                          f"{bundle.config_map_name!r} is not a valid ConfigMap name")
    return TrustedCA(config_map_name=bundle.config_map_name, key=bundle.key)
