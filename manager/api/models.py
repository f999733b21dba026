"""The ExternalSecretsConfig and ExternalSecretsManager APIs (operator.openshift.io/v1alpha1).

These pydantic models are the single source of truth for both CRDs: `manager.api.crd`
generates `manifests/crds/*.yaml` from them, and the operator parses the objects it reads
with them. They mirror the seed's Go types field by field:

- attribute docstrings are the seed's field comments and become the CRD descriptions
  (so `kubectl explain` prints them);
- pydantic constraints (`min_length`, `ge`, ...) are the seed's bounds, `Literal` types its
  enums, field defaults its `+kubebuilder:default` values (a default applies only when the
  parent object is present, exactly as the API server defaults);
- `Schema(...)` markers and `__cel_rules__` carry list/map topology and every CEL rule with
  its exact message (see `manager.api.rules`).

Always dump with `model_dump(by_alias=True, exclude_none=True)`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

from manager.api import defaults, rules
from manager.api.markers import Rule, Schema

BoolString = Literal["true", "false"]
"""The seed spells booleans as the strings "true" and "false" (`+kubebuilder:validation:Enum`)."""

ConditionStatus = Literal["True", "False", "Unknown"]

LabelValue = Annotated[str, Field(max_length=63), Schema(rules=rules.LABEL_VALUE)]
"""A label value (also used for node selector values): at most 63 characters of the label
value syntax, checked by the API server so a bad value is rejected at admission."""

Duration = Annotated[
    str | None,
    Field(min_length=1, max_length=rules.DURATION_MAX_LENGTH),
    Schema(rules=rules.DURATION),
]
"""A metav1.Duration: a Go duration string such as "5m" or "8760h" (bounded so its CEL
rule has a bounded cost)."""


class ApiModel(BaseModel):
    """Base of every API model: camelCase JSON names, unknown fields rejected, immutable.

    Start-up cost: each model builds its validator when first used, not at import (a
    pass with no ExternalSecretsConfig never uses most of them), and the field docstrings
    are read by the generators (`manager.api.docstrings`), not parsed at every start.
    """

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        defer_build=True,
    )

    __cel_rules__: ClassVar[tuple[Rule, ...]] = ()
    """CEL rules attached to this type's object schema (`+kubebuilder:validation:XValidation`)."""


# --- shared types ---------------------------------------------------------------------------


class ProxyConfig(ApiModel):
    """ProxyConfig is for setting the proxy configurations which will be made available
    in operand containers managed by the operator as environment variables."""

    http_proxy: Annotated[
        str | None, Field(min_length=0, max_length=2048),
        Schema(rules=(*rules.PROXY_VALUE, *rules.PROXY_URL)),
    ] = None
    """httpProxy is the URL of the proxy for HTTP requests: an http, https or socks5 URL with a
    host, at most 2048 characters, such as http://proxy.example.com:3128. Every operand
    container gets it as HTTP_PROXY and http_proxy. Default: none (no variable is set)."""

    https_proxy: Annotated[
        str | None, Field(min_length=0, max_length=2048),
        Schema(rules=(*rules.PROXY_VALUE, *rules.PROXY_URL)),
    ] = None
    """httpsProxy is the URL of the proxy for HTTPS requests (the secret providers' APIs): an
    http, https or socks5 URL with a host, at most 2048 characters. Every operand container
    gets it as HTTPS_PROXY and https_proxy. Default: none."""

    no_proxy: Annotated[
        str | None, Field(min_length=0, max_length=4096), Schema(rules=rules.PROXY_VALUE)
    ] = None
    """noProxy is a comma-separated list of hostnames and/or CIDRs and/or IPs for which the
    proxy should not be used, at most 4096 characters; it becomes NO_PROXY and no_proxy.
    Default: none."""


class CommonConfigs(ApiModel):
    """CommonConfigs are the common configurations available for all the operands managed
    by the operator."""

    log_level: Annotated[int | None, Field(ge=1, le=5), Schema(fmt="int32")] = 1
    """logLevel supports value range as per [Kubernetes logging guidelines](https://github.com/kubernetes/community/blob/master/contributors/devel/sig-instrumentation/logging.md#what-method-to-use).
    Range 1 to 5; it sets `--loglevel` of the controller, webhook and cert-controller: 1
    (normal information), 2 (steady-state information) and 3 (extended information about
    changes) give `info`; 4 (debug) and 5 (trace) give `debug`. Warnings and errors are
    logged at every level. Default: 1, which the API server fills in whenever the parent
    object exists; the ExternalSecretsConfig's appConfig.logLevel therefore always hides the
    ExternalSecretsManager's globalConfig.logLevel once appConfig exists (the
    ExternalSecretsManager's status says so)."""

    resources: Annotated[dict[str, Any] | None, Schema(core_type="ResourceRequirements")] = None
    """resources is for defining the resource requirements of every container of the
    operand's Deployments (core/v1 ResourceRequirements, checked at admission). Changing it
    rolls the Deployments. In the ExternalSecretsConfig it replaces the ExternalSecretsManager's
    as a whole. Default: none (no requests or limits).
    ref: https://kubernetes.io/docs/concepts/configuration/manage-resources-containers/"""

    affinity: Annotated[dict[str, Any] | None, Schema(core_type="Affinity")] = None
    """affinity is for setting scheduling affinity rules of the operand's pods (core/v1
    Affinity). In the ExternalSecretsConfig it replaces the ExternalSecretsManager's as a
    whole. Default: none.
    ref: https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/"""

    tolerations: Annotated[
        list[dict[str, Any]] | None,
        Field(min_length=0, max_length=10),
        Schema(core_type="Toleration", list_type="atomic"),
    ] = None
    """tolerations is for setting the pod tolerations of the operand's pods: 0 to 10 core/v1
    Tolerations. In the ExternalSecretsConfig they replace the ExternalSecretsManager's (an
    empty list means none). Default: none.
    ref: https://kubernetes.io/docs/concepts/scheduling-eviction/taint-and-toleration/"""

    node_selector: Annotated[
        dict[str, LabelValue] | None,
        Field(min_length=0, max_length=10),
        Schema(map_type="atomic", rules=rules.NODE_SELECTOR_KEYS),
    ] = None
    """nodeSelector is for defining the scheduling criteria using node labels: 0 to 10 label
    keys and values the operand's pods require. In the ExternalSecretsConfig it replaces the
    ExternalSecretsManager's. Default: none.
    ref: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/"""

    proxy: ProxyConfig | None = None
    """proxy is for setting the proxy configurations which will be made available
    in operand containers managed by the operator as environment variables. The first one
    present wins: the ExternalSecretsConfig's, the ExternalSecretsManager's, then the cluster
    proxy that OLM gives the operator; `proxy: {}` means no proxy and hides the others.
    Default: none (the cluster proxy, if any)."""


class ObjectReference(ApiModel):
    """ObjectReference is a reference to an object with a given name, kind and group."""

    name: Annotated[str, Field(min_length=1, max_length=253), Schema(rules=rules.OBJECT_NAME)]
    """Name of the resource being referred to: an object name of 1 to 253 characters.
    Required, no default."""

    kind: Annotated[str | None, Field(min_length=1, max_length=253)] = None
    """Kind of the resource being referred to: Issuer (in the operand namespace) or
    ClusterIssuer, in any letter case. Default: Issuer."""

    group: Annotated[str | None, Field(min_length=1, max_length=253)] = None
    """Group of the resource being referred to: cert-manager.io, in any letter case. Default:
    cert-manager.io."""


class SecretReference(ApiModel):
    """SecretReference is a reference to the secret with the given name, which should exist
    in the same namespace where it will be utilized."""

    name: Annotated[str, Field(min_length=1, max_length=253), Schema(rules=rules.OBJECT_NAME)]
    """Name of the secret resource being referred to: an object name of 1 to 253 characters.
    Required, no default."""


# --- ExternalSecretsConfig --------------------------------------------------------------------


class BitwardenSecretManagerProvider(ApiModel):
    """BitwardenSecretManagerProvider is for enabling the bitwarden secrets manager provider and
    for setting up the additional service required for connecting with the bitwarden server."""

    enabled: BoolString = "false"
    """enabled is for enabling the bitwarden secrets manager provider, which can be indicated
    by setting `true` or `false`. "true" installs bitwarden-sdk-server (Deployment, Service,
    ServiceAccount, NetworkPolicies) and lets the controller reach it; "false" removes them.
    Default: "false"."""

    secret_ref: SecretReference | None = None
    """SecretRef is the Kubernetes secret containing the TLS key pair to be used for the bitwarden
    server. The issuer in CertManagerConfig will be utilized to generate the required certificate
    if the secret reference is not provided and CertManagerConfig is configured. The key names in
    secret for certificate must be `tls.crt`, for private key must be `tls.key` and for CA
    certificate key name must be `ca.crt`. The Secret lives in the operand namespace; until it
    exists with those keys the ExternalSecretsConfig is Degraded. Default: none (then
    cert-manager must be enabled)."""


class WebhookConfig(ApiModel):
    """WebhookConfig is for configuring external-secrets webhook specifics."""

    certificate_check_interval: Duration = defaults.CERTIFICATE_CHECK_INTERVAL
    """CertificateCheckInterval is for configuring the polling interval to check the certificate
    validity: a duration such as "5m" or "1h30m" (1 to 32 characters), the webhook's
    `--check-interval`. The operator renders the webhook's `--lookahead-interval` as the
    renew-ahead of the certificate less this interval and 10m; with cert-manager it must be
    at most (certificateRenewBefore - 10m) / 2, with the built-in cert-controller at most
    1079h52m30s. Default: "5m"."""

    failure_policy: Literal["Fail", "Ignore"] | None = None
    """failurePolicy is what the API server does with an ExternalSecret, SecretStore or
    ClusterSecretStore change when the webhook cannot be reached: `Fail` refuses the change,
    `Ignore` lets it through unvalidated. It applies to every webhook of both
    ValidatingWebhookConfigurations (externalsecret-validate, secretstore-validate).
    Default: Fail."""

    timeout_seconds: Annotated[int | None, Field(ge=1, le=30), Schema(fmt="int32")] = None
    """timeoutSeconds is how long the API server waits for the webhook's answer before
    applying failurePolicy: 1 to 30 seconds, on every webhook of both configurations.
    Default: 5."""


class TrustedCABundle(ApiModel):
    """TrustedCABundle names a ConfigMap of PEM certificates the operand trusts, besides the
    system roots, when it calls the secret providers."""

    config_map_name: Annotated[
        str, Field(min_length=1, max_length=253), Schema(rules=rules.OBJECT_NAME)
    ]
    """configMapName is the ConfigMap, in the operand namespace, that holds the PEM bundle.
    It is mounted read-only into the controller and bitwarden-sdk-server at
    /etc/external-secrets/trusted-ca, and SSL_CERT_DIR makes the operand read it in addition
    to the system roots. Until it exists with that key the ExternalSecretsConfig is Degraded
    and nothing is changed. Required, no default."""

    key: Annotated[
        str, Field(min_length=1, max_length=253), Schema(rules=rules.CONFIGMAP_KEY)
    ] = "ca-bundle.crt"
    """key is the ConfigMap key that holds the PEM bundle (one or more certificates).
    Default: "ca-bundle.crt"."""


class CertManagerConfig(ApiModel):
    """CertManagerConfig is for configuring cert-manager specifics, which will be used for
    generating certificates for webhook and bitwarden-sdk-server components."""

    __cel_rules__ = rules.CERT_MANAGER_CONFIG

    enabled: Annotated[BoolString, Schema(required=True, rules=rules.ENABLED_IMMUTABLE)] = "false"
    """enabled is for enabling the use of cert-manager for obtaining and renewing the
    certificates used for webhook server, instead of built-in certificates.
    Use `true` or `false` to indicate the preference. This field is immutable once set.
    "true" needs issuerRef; the operator then requests Certificates from cert-manager and
    removes the built-in cert-controller once the webhook Certificate is Ready. To switch
    later, delete the ExternalSecretsConfig (the operand keeps running) and create it again.
    Default: "false"."""

    add_injector_annotations: BoolString = "false"
    """addInjectorAnnotations is for adding the `cert-manager.io/inject-ca-from` annotation to the
    webhooks and CRDs to automatically setup webhook to the cert-manager CA. This requires
    CA Injector to be enabled in cert-manager. Use `true` or `false` to indicate the preference.
    Only with enabled "true". Either way the operator copies the issued CA into the webhooks
    itself, and while the webhook moves to a new CA it withholds the annotation so that the
    webhooks trust the old and the new CA until every pod serves the new one. Default:
    "false"."""

    issuer_ref: Annotated[
        ObjectReference | None, Schema(rules=rules.ISSUER_REF)
    ] = None
    """issuerRef contains details of the referenced object used for obtaining certificates. When
    `issuerRef.Kind` is `Issuer`, it must exist in the `.spec.controllerConfig.namespace`.
    This field is immutable once set; to use another issuer, delete the ExternalSecretsConfig
    (the operand keeps running) and create it again. Required when enabled is "true"; until
    the issuer exists the ExternalSecretsConfig is Degraded and nothing is removed. Default:
    none."""

    certificate_duration: Duration = defaults.CERTIFICATE_DURATION
    """certificateDuration is the validity period of the webhook certificate: a duration of
    at least 1h, longer than certificateRenewBefore (cert-manager's own limits). Default:
    "8760h" (one year)."""

    certificate_renew_before: Duration = defaults.CERTIFICATE_RENEW_BEFORE
    """certificateRenewBefore is the ahead time to renew the webhook certificate
    before expiry: a duration of at least 5m, shorter than certificateDuration, and with
    cert-manager enabled at least twice webhookConfig.certificateCheckInterval plus 10m (the
    webhook's lookahead is certificateRenewBefore - certificateCheckInterval - 10m). Default:
    "30m"."""


class ApplicationConfig(CommonConfigs):
    """ApplicationConfig is for specifying the configurations for the external-secrets operand."""

    __cel_rules__ = rules.APPLICATION_CONFIG

    operating_namespace: Annotated[
        str | None, Field(min_length=1, max_length=63), Schema(rules=rules.NAMESPACE_NAME)
    ] = None
    """operatingNamespace is for restricting the external-secrets operations to the provided
    namespace. And when enabled `ClusterSecretStore` and `ClusterExternalSecret` are implicitly
    disabled. A namespace name of 1 to 63 characters; the controller's rights on Secrets then
    come from a Role there instead of a ClusterRole, and until the namespace exists the
    ExternalSecretsConfig is Degraded. Default: none (every namespace)."""

    bitwarden_secret_manager_provider: BitwardenSecretManagerProvider | None = None
    """bitwardenSecretManagerProvider is for enabling the bitwarden secrets manager provider and
    for setting up the additional service required for connecting with the bitwarden server.
    Default: none (bitwarden off)."""

    webhook_config: WebhookConfig | None = None
    """webhookConfig is for configuring external-secrets webhook specifics. Default: none (its
    defaults apply)."""

    cert_manager_config: CertManagerConfig | None = None
    """CertManagerConfig is for configuring cert-manager specifics, which will be used for
    generating certificates for webhook and bitwarden-sdk-server components. Once enabled is
    "true" it cannot be removed. Default: none (the built-in cert-controller)."""

    trusted_ca_bundle: Annotated[TrustedCABundle | None, Field(alias="trustedCABundle")] = None
    """trustedCABundle makes the controller and bitwarden-sdk-server trust the certificates of
    a ConfigMap (for example a private CA of a Vault server), in addition to the system roots,
    without a cluster proxy. Removing it removes the mount and the variable. Default: none."""


class NetworkPolicy(ApiModel):
    """NetworkPolicy is an egress NetworkPolicy the operator creates for one component of the
    operand."""

    name: Annotated[
        str, Field(min_length=1, max_length=253),
        Schema(rules=(*rules.OBJECT_NAME, *rules.NETWORK_POLICY_NAME)),
    ]
    """name of the NetworkPolicy the operator creates in the operand namespace: an object name
    of 1 to 253 characters, unique in the list and none of the operator's own policies.
    Required, no default."""

    component_name: Literal["ExternalSecretsCoreController", "BitwardenSDKServer"]
    """componentName is the component whose pods the policy selects: the external-secrets
    controller (`ExternalSecretsCoreController`) or the bitwarden-sdk-server
    (`BitwardenSDKServer`). Declaring any policy for a component replaces the operator's
    default egress policy of that component, which allows all egress. Required, no
    default."""

    egress: Annotated[
        list[dict[str, Any]], Schema(core_type="NetworkPolicyEgressRule", list_type="atomic")
    ]
    """egress is the list of egress rules of the policy (networking.k8s.io/v1
    NetworkPolicyEgressRule): the connections the component may open, besides the API server
    and DNS, which the operator always allows. An empty list allows no other connection.
    Required, no default."""


ComponentName = Literal["ExternalSecretsCoreController", "Webhook", "CertController",
                        "BitwardenSDKServer"]


class PodDisruptionBudgetConfig(ApiModel):
    """PodDisruptionBudgetConfig sets the PodDisruptionBudget of one component: exactly one of
    maxUnavailable and minAvailable, as numbers of pods."""

    __cel_rules__ = rules.POD_DISRUPTION_BUDGET

    max_unavailable: Annotated[int | None, Field(ge=1, le=10), Schema(fmt="int32")] = None
    """maxUnavailable is how many of the component's pods a voluntary disruption (a node
    drain) may take down at once: 1 to 10. Default: 1 (when neither is set the operator
    renders maxUnavailable 1 for a component with more than one replica)."""

    min_available: Annotated[int | None, Field(ge=0, le=9), Schema(fmt="int32")] = None
    """minAvailable is how many of the component's pods must stay up during a voluntary
    disruption: 0 to 9, lower than replicas (1 when unset), and 0 when manageReplicas is
    "false" (the operator cannot know the pod count; use maxUnavailable). Default: none."""


class DeploymentConfig(ApiModel):
    """DeploymentConfig holds the Deployment settings of one component."""

    __cel_rules__ = rules.DEPLOYMENT_CONFIG

    replicas: Annotated[int | None, Field(ge=1, le=10), Schema(fmt="int32")] = None
    """replicas is the number of pods of the component: 1 to 10. More than one renders a
    PodDisruptionBudget (maxUnavailable 1 unless podDisruptionBudget says otherwise) and a
    soft topology spread across nodes; the controller elects a leader (Lease
    external-secrets-controller) and the cert-controller turns on its leader election (Lease
    crd-certs-controller). Default: 1."""

    manage_replicas: BoolString | None = None
    """manageReplicas "false" leaves the Deployment's replicas to someone else (a
    HorizontalPodAutoscaler, `kubectl scale`): the operator stops setting the field, so the
    value they set stays. The operator then renders a PodDisruptionBudget only if
    podDisruptionBudget is set (maxUnavailable, or minAvailable 0). Cannot be combined with
    replicas. Default: "true"."""

    revision_history_limit: Annotated[int | None, Field(ge=1, le=50), Schema(fmt="int32")] = (
        defaults.REVISION_HISTORY_LIMIT)
    """revisionHistoryLimit is the number of old ReplicaSets the Deployment keeps for
    rollbacks: 1 to 50. Default: 10."""

    pod_disruption_budget: PodDisruptionBudgetConfig | None = None
    """podDisruptionBudget sets the component's PodDisruptionBudget. With one replica no
    budget is rendered (it could only block node drains) and status.ignoredSettings says so.
    Default: maxUnavailable 1 while replicas is more than 1, no PodDisruptionBudget
    otherwise."""


class ControllerTuning(ApiModel):
    """ControllerTuning holds flags of the external-secrets controller
    (`cmd/controller/root.go`, the same in v1.3.2 and v2.9.0), typed and bounded."""

    __cel_rules__ = rules.TUNING

    concurrent: Annotated[int | None, Field(ge=1, le=100), Schema(fmt="int32")] = None
    """concurrent is the number of concurrent reconciles (`--concurrent`): 1 to 100.
    Default: 1."""

    client_qps: Annotated[
        int | None, Field(ge=1, le=10000, alias="clientQPS"), Schema(fmt="int32")
    ] = None
    """clientQPS is the steady rate of requests per second to the API server
    (`--client-qps`): 1 to 10000. Default: the operand's, 50."""

    client_burst: Annotated[int | None, Field(ge=1, le=20000), Schema(fmt="int32")] = None
    """clientBurst is the burst of requests to the API server allowed above clientQPS
    (`--client-burst`): 1 to 20000, at least clientQPS. Default: the operand's, 100."""

    enable_secrets_caching: BoolString | None = None
    """enableSecretsCaching caches every Secret of the cluster in the controller
    (`--enable-secrets-caching`): fewer API requests, more memory. Default: "false"."""

    enable_config_maps_caching: Annotated[
        BoolString | None, Field(alias="enableConfigMapsCaching")
    ] = None
    """enableConfigMapsCaching caches every ConfigMap of the cluster in the controller
    (`--enable-configmaps-caching`). Default: "false"."""

    enable_managed_secrets_caching: BoolString | None = None
    """enableManagedSecretsCaching caches the Secrets that ExternalSecrets manage
    (`--enable-managed-secrets-caching`). Default: "true"."""

    store_requeue_interval: Duration = None
    """storeRequeueInterval is how often the controller re-checks SecretStores and
    ClusterSecretStores (`--store-requeue-interval`): a duration such as "5m" (longer than
    zero). Default: the operand's, 5m."""


class ComponentConfig(ApiModel):
    """ComponentConfig holds the settings of one component of the operand; each overrides
    the appConfig and globalConfig setting of the same name for that component only."""

    __cel_rules__ = (*rules.COMPONENT_CONFIG, *rules.OVERRIDE_ARGS)

    component_name: ComponentName
    """componentName is the component: the controller (`ExternalSecretsCoreController`), the
    webhook (`Webhook`), the cert-controller (`CertController`) or bitwarden-sdk-server
    (`BitwardenSDKServer`). Required, no default."""

    deployment_configs: DeploymentConfig | None = None
    """deploymentConfigs are the component's Deployment settings (replicas,
    revisionHistoryLimit, podDisruptionBudget). Default: none."""

    override_env: Annotated[
        list[dict[str, Any]] | None,
        Field(min_length=0, max_length=50),
        Schema(core_type="EnvVar", list_type="map", list_map_keys=("name",),
               rules=rules.OVERRIDE_ENV),
    ] = None
    """overrideEnv are environment variables (core/v1 EnvVar) of the component's main
    container, replacing a variable of the same name the operator sets, else added. At most
    50; the proxy and CA variables and the prefixes HOSTNAME, KUBERNETES_ and
    EXTERNAL_SECRETS_ are refused. Default: none."""

    override_args: Annotated[
        list[Annotated[str, Field(min_length=3, max_length=1024)]] | None,
        Field(min_length=0, max_length=20),
        Schema(list_type="atomic"),
    ] = None
    """overrideArgs are command-line flags added to the component's main container, for what
    the API does not model: UNSUPPORTED (docs/operations.md, "overrideArgs (unsupported)").
    Each is `--flag=value` with a flag of the pinned external-secrets release that the
    operator does not render itself, and a value of the flag's type, for example
    `--enable-flood-gate=false`; at most 20, each once. Not for BitwardenSDKServer. While any
    is set, status.unsupportedOverrides lists them and the operator tells OLM it is not
    Upgradeable. Default: none."""

    resources: Annotated[dict[str, Any] | None, Schema(core_type="ResourceRequirements")] = None
    """resources of the component's containers (core/v1 ResourceRequirements); replaces
    appConfig's and globalConfig's for this component. Default: none."""

    node_selector: Annotated[
        dict[str, LabelValue] | None,
        Field(min_length=0, max_length=10),
        Schema(map_type="atomic", rules=rules.NODE_SELECTOR_KEYS),
    ] = None
    """nodeSelector of the component's pods (0 to 10 labels); replaces appConfig's and
    globalConfig's for this component. Default: none."""

    tolerations: Annotated[
        list[dict[str, Any]] | None,
        Field(min_length=0, max_length=10),
        Schema(core_type="Toleration", list_type="atomic"),
    ] = None
    """tolerations of the component's pods (0 to 10 core/v1 Tolerations); replace appConfig's
    and globalConfig's for this component. Default: none."""

    affinity: Annotated[dict[str, Any] | None, Schema(core_type="Affinity")] = None
    """affinity of the component's pods (core/v1 Affinity); replaces appConfig's and
    globalConfig's for this component. Default: none."""

    topology_spread_constraints: Annotated[
        list[dict[str, Any]] | None,
        Field(min_length=0, max_length=8),
        Schema(core_type="TopologySpreadConstraint", list_type="atomic"),
    ] = None
    """topologySpreadConstraints of the component's pods (0 to 8 core/v1
    TopologySpreadConstraints); replace the soft spread across nodes that the operator adds
    when replicas is more than 1. Default: none."""

    priority_class_name: Annotated[
        str | None, Field(min_length=1, max_length=253), Schema(rules=rules.OBJECT_NAME)
    ] = None
    """priorityClassName of the component's pods, such as system-cluster-critical. Default:
    none."""

    tuning: ControllerTuning | None = None
    """tuning holds flags of the external-secrets controller; only for componentName
    ExternalSecretsCoreController. Default: none (the operand's defaults)."""


AnnotationValue = Annotated[str, Field(max_length=4096)]


class ControllerConfig(ApiModel):
    """ControllerConfig is for specifying the configurations for the controller to use while
    installing the `external-secrets` operand."""

    __cel_rules__ = rules.CONTROLLER_CONFIG

    namespace: Annotated[
        str,
        Field(min_length=1, max_length=63),
        Schema(rules=(*rules.NAMESPACE_IMMUTABLE, *rules.NAMESPACE_NAME,
                      *rules.OPERAND_NAMESPACE_NOT_SHARED)),
    ] = "external-secrets"
    """namespace is for configuring the namespace to install the external-secret operand.
    This field is immutable once set. A namespace name of 1 to 63 characters that is not
    default, openshift, kube-* or openshift-*, nor the operator's own. To move the operand,
    delete the ExternalSecretsConfig (the operand keeps running) and create it again with
    the new namespace; the operator removes what it created in the old one. Default:
    "external-secrets"."""

    labels: Annotated[
        dict[str, LabelValue] | None,
        Field(min_length=0, max_length=20),
        Schema(map_type="granular", rules=rules.USER_LABEL_KEYS),
    ] = None
    """labels to apply to all resources created for the external-secrets operand deployment:
    at most 20, valid label keys and values, not the operator's own keys (app,
    app.kubernetes.io/*, external-secrets.io/*, rbac.authorization.k8s.io/*,
    servicebinding.io/controller). They go on every object and pod template (never on
    selectors) and win over the ExternalSecretsManager's labels of the same key. Default:
    none."""

    adopt_existing_objects: BoolString | None = None
    """adoptExistingObjects lets the operator take over objects that exist under the names it
    renders but that it did not create, for example when migrating from a Helm release or an
    earlier manual install. With "true" it applies its configuration over them, records an
    Event for each, and from then on manages them like its own (it may prune them, and the
    uninstall command removes them). Otherwise (the default) it leaves such objects untouched
    and reports them, with who manages them, in the Degraded condition. Set it back to "false"
    once the migration is done. The operand namespace is never adopted: a namespace the
    operator did not create is used as it is. Default: "false"."""

    network_policies: Annotated[
        list[NetworkPolicy] | None,
        Field(min_length=0, max_length=50),
        Schema(list_type="map", list_map_keys=("name", "componentName"),
               rules=rules.NETWORK_POLICIES),
    ] = None
    """networkPolicies are egress NetworkPolicies for the operand's components, for example
    to narrow the controller's connections to the secret providers in use. Without any for a
    component, the operator allows that component all egress; ingress stays denied except to
    the webhook and metrics ports. At most 50 entries. Default: none."""

    annotations: Annotated[
        dict[str, AnnotationValue] | None,
        Field(min_length=0, max_length=20),
        Schema(map_type="granular", rules=rules.ANNOTATION_KEYS),
    ] = None
    """annotations to apply to every object the operator creates for the operand and to
    every pod template: at most 20, not in the reserved domains kubernetes.io, k8s.io,
    openshift.io (and their subdomains) nor under the operator's own prefixes
    (cert-manager.io/, external-secrets.io/, external-secrets-operator.io/). An annotation
    removed from this map is removed from the objects. Default: none."""

    component_configs: Annotated[
        list[ComponentConfig] | None,
        Field(min_length=0, max_length=4),
        Schema(list_type="map", list_map_keys=("componentName",)),
    ] = None
    """componentConfigs are per-component settings (replicas, scheduling, resources,
    environment, controller tuning), one entry per componentName; each wins over appConfig
    and globalConfig for its component. Default: none."""


class ExternalSecretsConfigSpec(ApiModel):
    """ExternalSecretsConfigSpec is for configuring the external-secrets operand behavior."""

    app_config: ApplicationConfig | None = None
    """appConfig is for specifying the configurations for the external-secrets operand.
    Default: none (every setting takes the ExternalSecretsManager's value, else its
    default)."""

    controller_config: ControllerConfig | None = None
    """controllerConfig is for specifying the configurations for the controller to use while
    installing the `external-secrets` operand. Default: none (namespace
    external-secrets)."""

    management_state: Literal["Managed", "Unmanaged", "Removed"] | None = None
    """managementState says whether the operator manages the operand, as OpenShift operators
    do. `Managed` (the default, also when the field is absent): it installs, repairs and
    reconfigures it. `Unmanaged`: it
    writes nothing to the operand (to pause it, for example while debugging by hand); drift is
    reported in the Ready condition, not repaired. `Removed`: it removes the operand as
    `python -m manager uninstall --operand --yes` does, except the operand Namespace, and
    reports in the Ready condition when nothing is left. Back to `Managed`, it installs or
    repairs again. Default: Managed."""


class MetaCondition(ApiModel):
    """Condition contains details for one aspect of the current state of this API Resource
    (the standard metav1.Condition)."""

    type: Annotated[str, Field(max_length=316, pattern=rules.CONDITION_TYPE_PATTERN)]
    """type of condition in CamelCase or in foo.example.com/CamelCase."""

    status: ConditionStatus
    """status of the condition, one of True, False, Unknown."""

    observed_generation: Annotated[int | None, Field(ge=0), Schema(fmt="int64")] = None
    """observedGeneration represents the .metadata.generation that the condition was set based
    upon."""

    last_transition_time: Annotated[str, Schema(fmt="date-time")]
    """lastTransitionTime is the last time the condition transitioned from one status to
    another."""

    reason: Annotated[
        str, Field(min_length=1, max_length=1024, pattern=rules.CONDITION_REASON_PATTERN)
    ]
    """reason contains a programmatic identifier indicating the reason for the condition's last
    transition, in CamelCase."""

    message: Annotated[str, Field(max_length=32768)]
    """message is a human readable message indicating details about the transition. This may be
    an empty string."""


# Bounds of the status's longer texts: status stays small whatever the cluster reports.
FAILURE_MESSAGE_MAX = 4096
AWAITED_MAX_ITEMS = 16
AWAITED_OBJECT_MAX = 512
AWAITED_MESSAGE_MAX = 1024


class Failure(ApiModel):
    """Failure is what made the last pass fail: the object, the request and the API server's
    answer when a request failed, and a command that shows more."""

    object: str | None = None
    """object is the first object at fault, as "Kind namespace/name" (for example
    "Deployment external-secrets/external-secrets" or "Issuer external-secrets/ca")."""

    request: str | None = None
    """request is the API request that failed, as "METHOD path"."""

    response: str | None = None
    """response is the API server's answer to that request: status code, reason and
    message."""

    inspect: str | None = None
    """inspect is a command that shows more about the failure, such as
    `kubectl describe deployment -n external-secrets external-secrets` or `kubectl explain`
    of the field at fault."""

    message: Annotated[str | None, Field(max_length=FAILURE_MESSAGE_MAX)] = None
    """message is the whole account of the failure and its fix; the conditions carry a
    summary of at most 160 characters."""


class Awaited(ApiModel):
    """Awaited is one object the operator waits for before the operand is Ready."""

    object: Annotated[str, Field(max_length=AWAITED_OBJECT_MAX)]
    """object is the awaited object, as "Kind namespace/name" (for example "Deployment
    external-secrets/external-secrets")."""

    message: Annotated[str, Field(max_length=AWAITED_MESSAGE_MAX)]
    """message says what is missing, with the cause the object or its pods report (for
    example "0 of 1 replicas available; pod ...: container ... waiting:
    ImagePullBackOff")."""


RELATED_OBJECTS_MAX_ITEMS = 64


class RelatedObject(ApiModel):
    """RelatedObject names one object of the installation by its API group, resource,
    namespace and name: the shape of status.relatedObjects that `oc adm inspect` follows."""

    group: str
    """group is the object's API group ("" for the core group)."""

    resource: str
    """resource is the object's resource, in the plural (for example "deployments")."""

    namespace: str | None = None
    """namespace is the object's namespace; absent for a cluster-scoped object."""

    name: str
    """name is the object's name."""


class TLSProfileStatus(ApiModel):
    """TLSProfileStatus is the cluster's TLS security profile as the operator applies it."""

    type: str | None = None
    """type is the profile: Old, Intermediate, Modern or Custom (on OpenShift, the
    tlsSecurityProfile of apiservers.config.openshift.io/cluster; Intermediate when it sets
    none and on clusters without that API)."""

    min_tls_version: Annotated[str | None, Field(alias="minTLSVersion")] = None
    """minTLSVersion is the profile's minimum TLS version (VersionTLS10 to VersionTLS13). The
    operand webhook accepts no older version, and only the profile's ciphers that it can use
    (docs/operations.md, "TLS security profile")."""


class ExternalSecretsConfigStatus(ApiModel):
    """ExternalSecretsConfigStatus is the most recently observed status of the
    ExternalSecretsConfig."""

    conditions: Annotated[
        list[MetaCondition] | None, Schema(list_type="map", list_map_keys=("type",))
    ] = None
    """conditions holds information of the current state of deployment: Ready (the operand
    runs and serves), Degraded (the administrator must fix something; the message says what
    and how) and Progressing (work is under way or retried); and Upgradeable, whether the
    next operator release may be installed (False says what holds it back and what to do)."""

    external_secrets_image: str | None = None
    """externalSecretsImage is the name of the image and the tag used for deploying
    external-secrets."""

    bitwarden_sdk_server_image: Annotated[
        str | None, Field(alias="bitwardenSDKServerImage")
    ] = None
    """BitwardenSDKServerImage is the name of the image and the tag used for deploying
    bitwarden-sdk-server."""

    external_secrets_version: str | None = None
    """externalSecretsVersion is the version of external-secrets in effect (set together
    with externalSecretsImage, once a pass has applied every object)."""

    bitwarden_sdk_server_version: Annotated[
        str | None, Field(alias="bitwardenSDKServerVersion")
    ] = None
    """bitwardenSDKServerVersion is the version of bitwarden-sdk-server in effect, while the
    bitwarden provider is enabled."""

    operand_namespace: str | None = None
    """operandNamespace is the namespace the operator installs the operand into
    (spec.controllerConfig.namespace, default external-secrets)."""

    failure: Failure | None = None
    """failure describes what made the last pass fail; absent once a pass succeeds."""

    awaited: Annotated[
        list[Awaited] | None, Field(max_length=AWAITED_MAX_ITEMS), Schema(list_type="atomic")
    ] = None
    """awaited lists the objects the operator waits for while the ExternalSecretsConfig is
    Progressing (at most 16; the Ready condition says how many there are in all). Absent
    once it is Ready."""

    tls_profile: TLSProfileStatus | None = None
    """tlsProfile is the cluster's TLS security profile that the operand's TLS servers
    follow, once a pass has applied every object."""

    ignored_settings: Annotated[list[str] | None, Schema(list_type="atomic")] = None
    """ignoredSettings lists the settings of the spec that have no effect, each as its field
    path, "not rendered:" or "no effect:", and the reason and fix (a podDisruptionBudget of a
    component that runs one replica; componentConfigs or networkPolicies of a component that
    does not run). They do not make the ExternalSecretsConfig non-Ready;
    the operator also logs a warning when the list changes. Absent when every setting is in
    effect."""

    related_objects: Annotated[
        list[RelatedObject] | None, Field(max_length=RELATED_OBJECTS_MAX_ITEMS),
        Schema(list_type="atomic")
    ] = None
    """relatedObjects lists the objects of the installation, which `oc adm inspect
    externalsecretsconfigs.operator.openshift.io/cluster` collects with it: the operand
    namespace, its Deployments and webhook configurations, the operand CRDs, the
    ExternalSecretsManager and, when known, the operator's namespace and its OLM
    OperatorCondition. Sorted; set once the spec resolves."""

    unsupported_overrides: Annotated[list[str] | None, Schema(list_type="atomic")] = None
    """unsupportedOverrides lists the componentConfigs[].overrideArgs in effect, each as its
    field path and the flag: an installation that runs with them is not supported, and the
    operator reports Upgradeable False to OLM until they are removed. Absent when none is
    set."""


class ExternalSecretsConfig(ApiModel):
    """ExternalSecretsConfig describes configuration and information about the managed
    external-secrets deployment. The name must be `cluster` as ExternalSecretsConfig is a
    singleton, allowing only one instance per cluster.

    When an ExternalSecretsConfig is created, a new deployment is created which manages the
    external-secrets and keeps it in the desired state."""

    __cel_rules__ = rules.EXTERNAL_SECRETS_CONFIG

    api_version: str | None = None
    """APIVersion defines the versioned schema of this representation of an object."""

    kind: str | None = None
    """Kind is a string value representing the REST resource this object represents."""

    metadata: dict[str, Any] | None = None
    """metadata is the standard object's metadata."""

    spec: ExternalSecretsConfigSpec | None = None
    """spec is the specification of the desired behavior of the ExternalSecretsConfig."""

    status: ExternalSecretsConfigStatus | None = None
    """status is the most recently observed status of the ExternalSecretsConfig."""


# --- ExternalSecretsManager -------------------------------------------------------------------


class GlobalConfig(CommonConfigs):
    """GlobalConfig is for configuring the external-secrets-operator behavior."""

    labels: Annotated[
        dict[str, LabelValue] | None,
        Field(min_length=0, max_length=20),
        Schema(map_type="granular", rules=rules.USER_LABEL_KEYS),
    ] = None
    """labels to apply to all resources created by the operator: at most 20, valid label keys
    and values, not the operator's own keys; the ExternalSecretsConfig's controllerConfig.labels
    win for the same key. Default: none."""


class Feature(ApiModel):
    """Feature is for enabling the optional features."""

    name: str
    """name of the optional feature. This version of the operator has two: OperandMonitoring
    (ServiceMonitors and a PrometheusRule for the operand, when the cluster serves
    monitoring.coreos.com/v1) and UnsafeAllowGenericTargets (the controller's
    --unsafe-allow-generic-targets and the right to write ConfigMaps: ExternalSecrets may then
    target ConfigMaps and custom resources, which is slower and puts values where Secrets'
    protections do not reach: custom resources are not encrypted at rest, the view role reads
    ConfigMaps; the status entry external-secrets-manager says so while it is on).
    Any other name is reported as UnknownFeature in that entry and has no effect. Required,
    no default."""

    enabled: BoolString
    """enabled indicates whether the feature is active: "true" or "false". Required, no
    default."""


class ExternalSecretsManagerSpec(ApiModel):
    """ExternalSecretsManagerSpec is the specification of the desired behavior of the
    ExternalSecretsManager."""

    global_config: GlobalConfig | None = None
    """globalConfig is for configuring the behavior of deployments that are managed
    by external secrets-operator: defaults for every operand setting that the
    ExternalSecretsConfig's appConfig does not set itself. Default: none."""

    features: Annotated[
        list[Feature] | None, Schema(list_type="map", list_map_keys=("name",))
    ] = None
    """features is for enabling the optional operator features, one entry per name. Default:
    none."""


class Condition(ApiModel):
    """Condition is one observed condition of an operator controller."""

    type: str
    """type of the condition"""

    status: str
    """status of the condition"""

    message: str
    """message provides details about the state."""

    reason: str | None = None
    """reason is a CamelCase word for the condition's last transition, as in the
    ExternalSecretsConfig's conditions."""

    last_transition_time: Annotated[str | None, Schema(fmt="date-time")] = None
    """lastTransitionTime is the last time the condition's status changed."""


class ControllerStatus(ApiModel):
    """ControllerStatus holds the observed conditions of the controllers part of the operator."""

    name: str
    """name of the controller for which the observed condition is recorded."""

    conditions: Annotated[
        list[Condition] | None, Schema(list_type="map", list_map_keys=("type",))
    ] = None
    """conditions holds information of the current state of the external-secrets-operator
    controllers."""

    observed_generation: Annotated[int | None, Field(ge=0), Schema(fmt="int64")] = None
    """observedGeneration represents the .metadata.generation on the observed resource."""


class ExternalSecretsManagerStatus(ApiModel):
    """ExternalSecretsManagerStatus is the most recently observed status of the
    ExternalSecretsManager."""

    controller_statuses: Annotated[
        list[ControllerStatus] | None, Schema(list_type="map", list_map_keys=("name",))
    ] = None
    """controllerStatuses holds the observed conditions of the controllers part of the
    operator."""

    last_transition_time: Annotated[str | None, Schema(fmt="date-time")] = None
    """lastTransitionTime is the last time the condition transitioned from one status to
    another."""

    controllers_ready: str | None = None
    """controllersReady says how many of the operator's controllers are Ready, as
    "ready/total" (for example "3/3")."""


class ExternalSecretsManager(ApiModel):
    """ExternalSecretsManager describes configuration and information about the deployments
    managed by the external-secrets-operator. The name must be `cluster` as this is a singleton
    object allowing only one instance of ExternalSecretsManager per cluster.

    It is mainly for configuring the global options and enabling optional features, which
    serves as a common/centralized config for managing multiple controllers of the operator.
    The object is automatically created during the operator installation."""

    __cel_rules__ = rules.EXTERNAL_SECRETS_MANAGER

    api_version: str | None = None
    """APIVersion defines the versioned schema of this representation of an object."""

    kind: str | None = None
    """Kind is a string value representing the REST resource this object represents."""

    metadata: dict[str, Any] | None = None
    """metadata is the standard object's metadata."""

    spec: ExternalSecretsManagerSpec | None = None
    """spec is the specification of the desired behavior"""

    status: ExternalSecretsManagerStatus | None = None
    """status is the most recently observed status of controllers used by
    External Secrets Operator."""
