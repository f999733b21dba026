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

from manager.config.checks import (
    ignored_budgets,
    ignored_components,
    unsupported_overrides,
)
from manager.config.merge import (
    config_of_objects,
    effective_config,
    feature_enabled,
    hidden_global_settings,
    unknown_features,
    with_api_server_addresses,
)
from manager.config.types import (
    ALLOW_ALL_EGRESS,
    BITWARDEN_CERTIFICATE_SECRET,
    CERT_MANAGER_GROUP,
    COMPONENT_NAME_WORKLOADS,
    DEFAULT_EGRESS_POLICIES,
    EGRESS_WORKLOADS,
    ESC_APP,
    ESC_CONTROLLER,
    ESM_GLOBAL,
    IN_CLUSTER_NO_PROXY,
    ISSUER_KINDS,
    KNOWN_FEATURES,
    MINIMUM_CERTIFICATE_DURATION,
    MINIMUM_RENEW_BEFORE,
    OPERAND_MONITORING,
    UNSAFE_ALLOW_GENERIC_TARGETS,
    WORKLOADS,
    BitwardenSettings,
    CertManagerSettings,
    ConfigError,
    ControllerFlags,
    DisruptionBudget,
    EffectiveConfig,
    EgressPolicy,
    EgressWorkload,
    Images,
    IssuerKind,
    LoadedSource,
    MonitoringSettings,
    OperatorEnvironment,
    ProxySettings,
    ProxySource,
    TrustedCA,
    Versions,
    WebhookSettings,
    Workload,
    WorkloadSettings,
    merged_no_proxy,
    webhook_lookahead,
)

__all__ = [
    "ALLOW_ALL_EGRESS",
    "BITWARDEN_CERTIFICATE_SECRET",
    "CERT_MANAGER_GROUP",
    "COMPONENT_NAME_WORKLOADS",
    "DEFAULT_EGRESS_POLICIES",
    "EGRESS_WORKLOADS",
    "ESC_APP",
    "ESC_CONTROLLER",
    "ESM_GLOBAL",
    "IN_CLUSTER_NO_PROXY",
    "ISSUER_KINDS",
    "KNOWN_FEATURES",
    "MINIMUM_CERTIFICATE_DURATION",
    "MINIMUM_RENEW_BEFORE",
    "OPERAND_MONITORING",
    "UNSAFE_ALLOW_GENERIC_TARGETS",
    "WORKLOADS",
    "BitwardenSettings",
    "CertManagerSettings",
    "ConfigError",
    "ControllerFlags",
    "DisruptionBudget",
    "EffectiveConfig",
    "EgressPolicy",
    "EgressWorkload",
    "Images",
    "IssuerKind",
    "LoadedSource",
    "MonitoringSettings",
    "OperatorEnvironment",
    "ProxySettings",
    "ProxySource",
    "TrustedCA",
    "Versions",
    "WebhookSettings",
    "Workload",
    "WorkloadSettings",
    "config_of_objects",
    "effective_config",
    "feature_enabled",
    "hidden_global_settings",
    "ignored_budgets",
    "ignored_components",
    "merged_no_proxy",
    "unknown_features",
    "unsupported_overrides",
    "webhook_lookahead",
    "with_api_server_addresses",
]
