"""The one merge of ExternalSecretsConfig, ExternalSecretsManager and the operator's
environment into an EffectiveConfig (the precedence: manager/config/__init__.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError
from pydantic.alias_generators import to_camel

from manager import kube_values
from manager.api import defaults
from manager.api.models import (
    ApplicationConfig,
    CertManagerConfig,
    CommonConfigs,
    ComponentConfig,
    ControllerConfig,
    ExternalSecretsConfigSpec,
    ExternalSecretsManagerSpec,
    GlobalConfig,
    ProxyConfig,
)
from manager.api.rules import (
    OPERATOR_NETWORK_POLICIES,
)
from manager.config.checks import (
    _POD_SETTING_CHECKS,
    _annotations,
    _check_budget,
    _check_budget_fields,
    _check_certificate_lifetime,
    _check_issuer_ref,
    _check_lookahead,
    _checked_proxy,
    _checked_user_labels,
    _duration,
    _namespace,
    _operating_namespace,
    _override_args,
    _override_env,
    _webhook_check_interval,
    ignored_budgets,
    ignored_components,
    unsupported_overrides,
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
    KNOWN_FEATURES,
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
    MonitoringSettings,
    OperatorEnvironment,
    ProxySettings,
    ProxySource,
    TrustedCA,
    Versions,
    WebhookSettings,
    Workload,
    WorkloadSettings,
)

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
        generic_targets=feature_enabled(esm, UNSAFE_ALLOW_GENERIC_TARGETS),
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


def _user_labels(esc: ExternalSecretsConfigSpec, glob: GlobalConfig | None) -> dict[str, str]:
    from_esm = _checked_user_labels(glob.labels if glob else None, f"{ESM_GLOBAL}.labels")
    controller = esc.controller_config
    from_esc = _checked_user_labels(controller.labels if controller else None,
                                    f"{ESC_CONTROLLER}.labels")
    return {**from_esm, **from_esc}


def _log_level(app: ApplicationConfig | None, glob: GlobalConfig | None) -> int:
    level, _ = _pick("log_level", app, glob)
    return int(level) if level is not None else 1


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


def _component_config(controller: ControllerConfig | None,
                      workload: Workload) -> tuple[ComponentConfig, str] | None:
    """The componentConfigs entry of `workload`, and its path."""
    entries = (controller.component_configs if controller else None) or []
    for index, entry in enumerate(entries):
        if COMPONENT_NAME_WORKLOADS[entry.component_name] == workload:
            return entry, f"{ESC_CONTROLLER}.componentConfigs[{index}]"
    return None


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
