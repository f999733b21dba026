"""The run-time checks of the effective config: what the CRDs cannot refuse (or what an older
stored object may still hold), each raising ConfigError with the field and the fix; and the
settings that have no effect (reported, never silently ignored)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from manager import kube_values
from manager.api import defaults, operand_flags
from manager.api.models import (
    ApplicationConfig,
    ComponentConfig,
    ControllerConfig,
    ExternalSecretsConfigSpec,
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
)
from manager.config.types import (
    CERT_MANAGER_GROUP,
    ESC_APP,
    ESC_CONTROLLER,
    ISSUER_KINDS,
    MINIMUM_CERTIFICATE_DURATION,
    MINIMUM_RENEW_BEFORE,
    BitwardenSettings,
    CertManagerSettings,
    ConfigError,
    OperatorEnvironment,
    webhook_lookahead,
)
from manager.names import DEFAULT_OPERAND_NAMESPACE

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


# The pod settings `_pick` takes whole, each with the check the API server would make of it
# (a CRD cannot: their schemas are Kubernetes' own, kept open in ours).
_POD_SETTING_CHECKS: dict[str, Callable[[Any], None]] = {
    "resources": kube_values.check_resource_requirements,
    "affinity": kube_values.check_affinity,
    "tolerations": kube_values.check_tolerations,
    "node_selector": kube_values.check_label_map,
}


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
