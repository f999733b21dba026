"""EffectiveConfig: precedence (ESC > ESM > environment > defaults) and validation."""

from __future__ import annotations

from typing import Any

import pytest

from manager import versions
from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import (
    ConfigError,
    EffectiveConfig,
    OperatorEnvironment,
    ProxySettings,
    effective_config,
)
from manager.kube_values import parse_go_duration

NO_ENV = OperatorEnvironment.from_environ({})
PROXY_ENV = OperatorEnvironment.from_environ({
    "HTTP_PROXY": "http://env:3128", "HTTPS_PROXY": "http://env:3129", "NO_PROXY": ".env",
})


def esc(spec: dict[str, Any] | None = None) -> ExternalSecretsConfigSpec:
    return ExternalSecretsConfigSpec.model_validate(spec or {})


def esm(spec: dict[str, Any] | None = None) -> ExternalSecretsManagerSpec:
    return ExternalSecretsManagerSpec.model_validate(spec or {})


def app(**fields: Any) -> ExternalSecretsConfigSpec:
    return esc({"appConfig": fields})


def glob(**fields: Any) -> ExternalSecretsManagerSpec:
    return esm({"globalConfig": fields})


def config(esc_spec: ExternalSecretsConfigSpec | None = None,
           esm_spec: ExternalSecretsManagerSpec | None = None,
           env: OperatorEnvironment = NO_ENV) -> EffectiveConfig:
    return effective_config(esc_spec, esm_spec, env)


def config_error(esc_spec: ExternalSecretsConfigSpec | None = None,
                 esm_spec: ExternalSecretsManagerSpec | None = None,
                 env: OperatorEnvironment = NO_ENV) -> ConfigError:
    with pytest.raises(ConfigError) as raised:
        effective_config(esc_spec, esm_spec, env)
    return raised.value


# --- defaults -------------------------------------------------------------------------------


def test_an_empty_spec_gives_the_documented_defaults() -> None:
    result = config(esc(), None)
    assert result.namespace == "external-secrets"
    assert result.labels == {}
    assert result.log_level == 1
    assert result.operating_namespace is None
    assert not result.cert_manager.enabled
    assert not result.bitwarden.enabled
    assert result.webhook_check_interval == "5m0s"
    assert (result.resources, result.affinity, result.tolerations, result.node_selector) == (
        None, None, None, None)
    assert result.proxy is None
    assert result.images.external_secrets == versions.EXTERNAL_SECRETS_IMAGE
    assert result.versions.external_secrets == versions.EXTERNAL_SECRETS_VERSION
    assert result.versions.bitwarden_sdk_server == versions.BITWARDEN_SDK_SERVER_VERSION


def test_a_missing_esc_spec_is_the_empty_spec() -> None:
    assert config(None, None) == config(esc(), esm())


# --- log level ------------------------------------------------------------------------------


def test_log_level_of_the_esc_wins_over_the_esm() -> None:
    assert config(app(logLevel=5), glob(logLevel=2)).log_level == 5


def test_log_level_of_the_esm_applies_when_the_esc_has_no_app_config() -> None:
    assert config(esc({"controllerConfig": {"labels": {"a": "b"}}}),
                  glob(logLevel=4)).log_level == 4


def test_any_app_config_brings_the_crd_default_log_level_which_hides_the_esm() -> None:
    # The API server defaults appConfig.logLevel to 1 whenever appConfig exists (so do the
    # models): an ESC that only sets operatingNamespace still has log level 1.
    assert config(app(operatingNamespace="team-a"), glob(logLevel=4)).log_level == 1


# --- scheduling and resources: whole values, ESC over ESM ------------------------------------


RESOURCES_ESC = {"limits": {"cpu": "1"}}
RESOURCES_ESM = {"requests": {"memory": "64Mi"}}


@pytest.mark.parametrize(("field", "attribute", "esc_value", "esm_value"), [
    ("resources", "resources", RESOURCES_ESC, RESOURCES_ESM),
    ("affinity", "affinity",
     {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
         {"topologyKey": "kubernetes.io/hostname"}]}},
     {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
         "nodeSelectorTerms": [{"matchExpressions": [
             {"key": "zone", "operator": "In", "values": ["a"]}]}]}}}),
    ("tolerations", "tolerations", [{"key": "a", "operator": "Exists"}],
     [{"key": "b", "operator": "Equal", "value": "c", "effect": "NoSchedule"}]),
    ("nodeSelector", "node_selector", {"disk": "ssd"}, {"zone": "a"}),
])
def test_scheduling_and_resources_come_whole_from_the_first_source(
        field: str, attribute: str, esc_value: Any, esm_value: Any) -> None:
    assert getattr(config(app(**{field: esc_value}), glob(**{field: esm_value})),
                   attribute) == esc_value
    assert getattr(config(esc(), glob(**{field: esm_value})), attribute) == esm_value
    assert getattr(config(app(**{field: esc_value}), None), attribute) == esc_value
    assert getattr(config(esc(), None), attribute) is None


@pytest.mark.parametrize(("field", "attribute", "empty", "esm_value"), [
    ("tolerations", "tolerations", [], [{"key": "b", "operator": "Exists"}]),
    ("nodeSelector", "node_selector", {}, {"zone": "a"}),
    ("resources", "resources", {}, RESOURCES_ESM),
])
def test_an_empty_value_in_the_esc_means_none_and_hides_the_esm(
        field: str, attribute: str, empty: Any, esm_value: Any) -> None:
    assert getattr(config(app(**{field: empty}), glob(**{field: esm_value})), attribute) is None


# --- proxy ----------------------------------------------------------------------------------


def test_proxy_of_the_esc_wins_over_the_esm_and_the_environment() -> None:
    result = config(app(proxy={"httpsProxy": "http://esc:1"}),
                    glob(proxy={"httpProxy": "http://esm:1"}), PROXY_ENV)
    assert result.proxy == ProxySettings(https_proxy="http://esc:1",
                                         source="ExternalSecretsConfig")


def test_proxy_of_the_esm_wins_over_the_environment() -> None:
    result = config(esc(), glob(proxy={"httpProxy": "http://esm:1", "noProxy": ".svc"}),
                    PROXY_ENV)
    assert result.proxy == ProxySettings(http_proxy="http://esm:1", no_proxy=".svc",
                                         source="ExternalSecretsManager")


def test_proxy_of_the_environment_applies_when_no_spec_sets_one() -> None:
    result = config(esc(), esm(), PROXY_ENV)
    assert result.proxy == ProxySettings(http_proxy="http://env:3128",
                                         https_proxy="http://env:3129", no_proxy=".env",
                                         source="environment")


def test_an_empty_proxy_object_means_no_proxy_and_hides_lower_sources() -> None:
    assert config(app(proxy={}), glob(proxy={"httpProxy": "http://esm:1"}), PROXY_ENV).proxy \
        is None
    assert config(esc(), glob(proxy={"httpProxy": "", "noProxy": ""}), PROXY_ENV).proxy is None


def test_no_proxy_anywhere_means_none() -> None:
    assert config(esc(), esm(), OperatorEnvironment.from_environ({"HTTP_PROXY": ""})).proxy \
        is None


# --- labels ---------------------------------------------------------------------------------


def test_labels_merge_esm_under_esc() -> None:
    result = config(esc({"controllerConfig": {"labels": {"team": "esc", "tier": "1"}}}),
                    glob(labels={"team": "esm", "region": "eu"}))
    assert result.labels == {"team": "esc", "tier": "1", "region": "eu"}


@pytest.mark.parametrize("key", ["app", "app.kubernetes.io/name", "external-secrets.io/x",
                                 "rbac.authorization.k8s.io/aggregate-to-view",
                                 "servicebinding.io/controller"])
def test_reserved_label_keys_are_refused_with_the_field(key: str) -> None:
    error = config_error(esc({"controllerConfig": {"labels": {key: "x"}}}))
    assert error.field == f"spec.controllerConfig.labels[{key!r}]"
    assert "reserved" in error.message
    assert config_error(esc(), glob(labels={key: "x"})).field.startswith("spec.globalConfig.labels")


@pytest.mark.parametrize(("labels", "field"), [
    ({"team": "has space"}, "spec.controllerConfig.labels.team"),
    ({"team": "ends-with-dash-"}, "spec.controllerConfig.labels.team"),
    ({"-bad": "x"}, "spec.controllerConfig.labels['-bad']"),
    ({"Bad.Prefix/key": "x"}, "spec.controllerConfig.labels['Bad.Prefix/key']"),
])
def test_invalid_labels_are_refused_with_the_field(labels: dict[str, str], field: str) -> None:
    assert config_error(esc({"controllerConfig": {"labels": labels}})).field == field


# --- namespaces -----------------------------------------------------------------------------


def test_the_operand_namespace_comes_from_controller_config() -> None:
    assert config(esc({"controllerConfig": {"namespace": "eso"}})).namespace == "eso"


@pytest.mark.parametrize(("spec", "field"), [
    ({"controllerConfig": {"namespace": "Not_Valid"}}, "spec.controllerConfig.namespace"),
    ({"appConfig": {"operatingNamespace": "team.a"}}, "spec.appConfig.operatingNamespace"),
])
def test_invalid_namespaces_are_refused(spec: dict[str, Any], field: str) -> None:
    assert config_error(esc(spec)).field == field


@pytest.mark.parametrize("namespace", [
    "default", "kube-system", "kube-public", "kube-node-lease", "kube-anything", "openshift",
    "openshift-config", "openshift-operators"])
def test_shared_and_system_namespaces_are_refused_for_the_operand(namespace: str) -> None:
    error = config_error(esc({"controllerConfig": {"namespace": namespace}}))
    assert error.field == "spec.controllerConfig.namespace"
    assert "shared or system namespace" in error.message
    assert "create it again" in error.message  # the fix


@pytest.mark.parametrize("namespace", ["external-secrets", "kubernetes-secrets", "my-openshift",
                                       "kube", "openshifted"])
def test_namespaces_that_only_resemble_system_ones_are_accepted(namespace: str) -> None:
    assert config(esc({"controllerConfig": {"namespace": namespace}})).namespace == namespace


def test_the_operators_own_namespace_is_refused_for_the_operand() -> None:
    own = OperatorEnvironment.from_environ({}, own_namespace="eso-operator")
    error = config_error(esc({"controllerConfig": {"namespace": "eso-operator"}}), env=own)
    assert error.field == "spec.controllerConfig.namespace"
    assert "the namespace the operator itself runs in" in error.message
    assert config(esc({"controllerConfig": {"namespace": "eso"}}), env=own).namespace == "eso"


# --- webhook and cert-manager ---------------------------------------------------------------


@pytest.mark.parametrize(("interval", "expected"), [
    ("5m", "5m0s"), ("10m", "10m0s"), ("90s", "1m30s"), ("1h", "1h0m0s"), ("1.5h", "1h30m0s"),
])
def test_the_certificate_check_interval_is_written_as_go_prints_it(interval: str,
                                                                  expected: str) -> None:
    result = config(app(webhookConfig={"certificateCheckInterval": interval}))
    assert result.webhook_check_interval == expected


@pytest.mark.parametrize("interval", ["0s", "5 minutes", "-1m", "10d"])
def test_an_unusable_check_interval_is_refused(interval: str) -> None:
    error = config_error(app(webhookConfig={"certificateCheckInterval": interval}))
    assert error.field == "spec.appConfig.webhookConfig.certificateCheckInterval"


def cert_manager(**fields: Any) -> ExternalSecretsConfigSpec:
    return app(certManagerConfig={"enabled": "true", "issuerRef": {"name": "ca"}, **fields})


def test_cert_manager_defaults_the_issuer_kind_group_and_lifetimes() -> None:
    settings = config(cert_manager()).cert_manager
    assert settings.enabled
    assert (settings.issuer_name, settings.issuer_kind, settings.issuer_group) == (
        "ca", "Issuer", "cert-manager.io")
    assert (settings.duration, settings.renew_before) == ("8760h0m0s", "30m0s")
    assert not settings.add_injector_annotations


@pytest.mark.parametrize(("kind", "expected"), [
    ("ClusterIssuer", "ClusterIssuer"), ("clusterissuer", "ClusterIssuer"),
    ("issuer", "Issuer"), ("ISSUER", "Issuer"),
])
def test_issuer_kinds_are_spelt_as_cert_manager_expects(kind: str, expected: str) -> None:
    spec = app(certManagerConfig={"enabled": "true",
                                  "issuerRef": {"name": "ca", "kind": kind,
                                                "group": "Cert-Manager.io"}})
    settings = config(spec).cert_manager
    assert (settings.issuer_kind, settings.issuer_group) == (expected, "cert-manager.io")


def test_cert_manager_lifetimes_and_injection_are_taken_from_the_spec() -> None:
    settings = config(cert_manager(certificateDuration="2160h", certificateRenewBefore="360h",
                                   addInjectorAnnotations="true")).cert_manager
    assert (settings.duration, settings.renew_before) == ("2160h0m0s", "360h0m0s")
    assert settings.add_injector_annotations


@pytest.mark.parametrize(("fields", "field"), [
    ({"certificateDuration": "30m"}, "certificateDuration"),
    ({"certificateRenewBefore": "1m"}, "certificateRenewBefore"),
    ({"certificateDuration": "2h", "certificateRenewBefore": "2h"}, "certificateRenewBefore"),
    ({"certificateDuration": "a year"}, "certificateDuration"),
])
def test_certificate_lifetimes_cert_manager_would_refuse_are_refused(fields: dict[str, str],
                                                                    field: str) -> None:
    error = config_error(cert_manager(**fields))
    assert error.field == f"spec.appConfig.certManagerConfig.{field}"


@pytest.mark.parametrize(("cert_manager_config", "field"), [
    ({"enabled": "true"}, "spec.appConfig.certManagerConfig.issuerRef"),
    ({"enabled": "false", "addInjectorAnnotations": "true"},
     "spec.appConfig.certManagerConfig.addInjectorAnnotations"),
    ({"enabled": "true", "issuerRef": {"name": "ca", "kind": "Vault"}},
     "spec.appConfig.certManagerConfig.issuerRef.kind"),
    ({"enabled": "true", "issuerRef": {"name": "ca", "group": "example.com"}},
     "spec.appConfig.certManagerConfig.issuerRef.group"),
])
def test_cert_manager_rules_of_the_crd_also_hold_offline(cert_manager_config: dict[str, Any],
                                                         field: str) -> None:
    assert config_error(app(certManagerConfig=cert_manager_config)).field == field


def test_a_disabled_cert_manager_config_changes_nothing() -> None:
    result = config(app(certManagerConfig={"enabled": "false",
                                           "issuerRef": {"name": "ca"}}))
    assert not result.cert_manager.enabled


# --- the webhook's lookahead: renew-ahead - checkInterval - 10m, at least checkInterval ------


@pytest.mark.parametrize(("spec", "lookahead"), [
    ({}, "2159h40m0s"),                                     # 2160h - 5m - 5m - 10m
    ({"webhookConfig": {"certificateCheckInterval": "1h"}}, "2158h45m0s"),
    ({"certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"}}}, "15m0s"),
    ({"certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"},
                            "certificateDuration": "2160h", "certificateRenewBefore": "360h"}},
     "359h45m0s"),
    ({"webhookConfig": {"certificateCheckInterval": "10m"},
      "certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"}}}, "10m0s"),
    # cert-manager configured but disabled: the cert-controller's refresh counts.
    ({"certManagerConfig": {"certificateRenewBefore": "5m"}}, "2159h40m0s"),
])
def test_the_webhook_lookahead_ends_before_the_issuer_renews(spec: dict[str, Any],
                                                             lookahead: str) -> None:
    assert config(app(**spec)).webhook_lookahead_interval == lookahead


@pytest.mark.parametrize(("renew_before", "interval"), [
    ("15m", "5m"), ("29m59s", "10m"), ("30m", "1h"), ("5m", "5m")])
def test_cert_manager_lifetimes_that_would_stop_the_webhook_are_refused(
        renew_before: str, interval: str) -> None:
    error = config_error(app(
        webhookConfig={"certificateCheckInterval": interval},
        certManagerConfig={"enabled": "true", "issuerRef": {"name": "ca"},
                           "certificateRenewBefore": renew_before}))
    assert error.field == "spec.appConfig.certManagerConfig.certificateRenewBefore"
    assert "spec.appConfig.webhookConfig.certificateCheckInterval" in error.message


def test_a_check_interval_beyond_the_cert_controllers_refresh_is_refused() -> None:
    assert config(app(webhookConfig={"certificateCheckInterval": "1079h52m30s"}))
    error = config_error(app(webhookConfig={"certificateCheckInterval": "1079h52m31s"}))
    assert error.field == "spec.appConfig.webhookConfig.certificateCheckInterval"
    assert "cert-controller" in error.message


def test_the_lookahead_is_never_shorter_than_the_check_interval() -> None:
    for renew_before in ("20m", "30m", "1h", "360h"):
        result = config(cert_manager(certificateRenewBefore=renew_before))
        lookahead = parse_go_duration(result.webhook_lookahead_interval)
        interval = parse_go_duration(result.webhook_check_interval)
        assert interval <= lookahead
        assert lookahead + interval + parse_go_duration("10m") == parse_go_duration(
            renew_before)


# --- disruption budgets ----------------------------------------------------------------------


def components(*entries: dict[str, Any]) -> ExternalSecretsConfigSpec:
    return esc({"controllerConfig": {"componentConfigs": list(entries)}})


def test_a_budget_asked_for_one_replica_is_not_rendered_and_is_named() -> None:
    result = config(components(
        {"componentName": "Webhook",
         "deploymentConfigs": {"podDisruptionBudget": {"maxUnavailable": 1}}},
        {"componentName": "CertController",
         "deploymentConfigs": {"replicas": 1, "podDisruptionBudget": {"minAvailable": 0}}},
        {"componentName": "ExternalSecretsCoreController",
         "deploymentConfigs": {"replicas": 3, "podDisruptionBudget": {"minAvailable": 2}}}))
    assert result.workloads["webhook"].disruption_budget is None
    assert result.workloads["cert-controller"].disruption_budget is None
    assert result.workloads["controller"].disruption_budget is not None
    assert [entry.split(":")[0] for entry in result.ignored_settings] == [
        "spec.controllerConfig.componentConfigs[0].deploymentConfigs.podDisruptionBudget",
        "spec.controllerConfig.componentConfigs[1].deploymentConfigs.podDisruptionBudget"]
    assert "Webhook runs 1 replica" in result.ignored_settings[0]
    assert config().ignored_settings == ()


def test_settings_of_a_component_that_does_not_run_are_named_as_ignored() -> None:
    """componentConfigs of the cert-controller once cert-manager issues the certificate, and
    componentConfigs and networkPolicies of bitwarden-sdk-server while it is off."""
    spec = {"controllerConfig": {
        "componentConfigs": [{"componentName": "CertController",
                              "deploymentConfigs": {"replicas": 2}},
                             {"componentName": "BitwardenSDKServer",
                              "overrideEnv": [{"name": "LOG", "value": "x"}]},
                             {"componentName": "Webhook", "deploymentConfigs": {"replicas": 2}}],
        "networkPolicies": [{"name": "bw-out", "componentName": "BitwardenSDKServer",
                             "egress": [{}]}]}}
    plain = config(esc(spec))
    assert [entry.split(" (")[0] for entry in plain.ignored_settings] == [
        "spec.controllerConfig.componentConfigs[1]", "spec.controllerConfig.networkPolicies[0]"]
    assert "bitwarden-sdk-server does not run" in plain.ignored_settings[0]
    with_cert_manager = config(esc({**spec, "appConfig": {"certManagerConfig": {
        "enabled": "true", "issuerRef": {"name": "ca"}}}}))
    assert with_cert_manager.ignored_settings[0].startswith(
        "spec.controllerConfig.componentConfigs[0] (CertController): no effect: the "
        "cert-controller does not run while cert-manager issues the webhook certificate")
    enabled = config(esc({**spec, "appConfig": {"certManagerConfig": {
        "enabled": "true", "issuerRef": {"name": "ca"}}, "bitwardenSecretManagerProvider": {
            "enabled": "true"}}}))
    assert [entry.split(" (")[0] for entry in enabled.ignored_settings] == [
        "spec.controllerConfig.componentConfigs[0]"]


def test_an_unmanaged_replica_count_keeps_a_budget_that_allows_evictions() -> None:
    result = config(components({"componentName": "Webhook", "deploymentConfigs": {
        "manageReplicas": "false", "podDisruptionBudget": {"maxUnavailable": 1}}}))
    assert result.workloads["webhook"].disruption_budget is not None
    assert result.ignored_settings == ()


@pytest.mark.parametrize("deployment", [
    {"manageReplicas": "false", "podDisruptionBudget": {"minAvailable": 1}},
    {"replicas": 2, "podDisruptionBudget": {"minAvailable": 2}},
])
def test_a_budget_that_allows_no_eviction_is_refused(deployment: dict[str, Any]) -> None:
    """Stored before the CRD rules existed (the models do not run CEL): Degraded, naming
    the field."""
    spec = components({"componentName": "Webhook", "deploymentConfigs": deployment})
    error = config_error(spec)
    assert error.field == ("spec.controllerConfig.componentConfigs[0].deploymentConfigs."
                           "podDisruptionBudget.minAvailable")


@pytest.mark.parametrize("budget", [{"maxUnavailable": 1, "minAvailable": 1}, {}])
def test_a_budget_with_both_fields_or_neither_is_refused(budget: dict[str, Any]) -> None:
    """The CRD refuses it; `render` (offline) and an object stored before the rule must
    not produce a PodDisruptionBudget the API server refuses."""
    spec = components({"componentName": "Webhook", "deploymentConfigs": {
        "replicas": 2, "podDisruptionBudget": budget}})
    error = config_error(spec)
    assert error.field == ("spec.controllerConfig.componentConfigs[0].deploymentConfigs."
                           "podDisruptionBudget")
    assert "exactly one of maxUnavailable and minAvailable" in error.message


# --- bitwarden ------------------------------------------------------------------------------


def test_bitwarden_with_a_secret_ref_mounts_that_secret() -> None:
    settings = config(app(bitwardenSecretManagerProvider={
        "enabled": "true", "secretRef": {"name": "bw-tls"}})).bitwarden
    assert (settings.enabled, settings.tls_secret_name, settings.issue_certificate) == (
        True, "bw-tls", False)


def test_bitwarden_without_a_secret_ref_gets_a_cert_manager_certificate() -> None:
    spec = app(bitwardenSecretManagerProvider={"enabled": "true"},
               certManagerConfig={"enabled": "true", "issuerRef": {"name": "ca"}})
    settings = config(spec).bitwarden
    assert (settings.enabled, settings.tls_secret_name, settings.issue_certificate) == (
        True, "bitwarden-tls-certs", True)


def test_bitwarden_without_a_key_pair_source_is_refused() -> None:
    error = config_error(app(bitwardenSecretManagerProvider={"enabled": "true"}))
    assert error.field == "spec.appConfig.bitwardenSecretManagerProvider.secretRef"
    assert "certManagerConfig" in error.message


def test_the_bitwarden_image_is_required_only_when_bitwarden_is_on() -> None:
    no_image = OperatorEnvironment.from_environ({"RELATED_IMAGE_BITWARDEN_SDK_SERVER": ""})
    assert config(esc(), None, no_image).images.bitwarden_sdk_server is None
    error = config_error(app(bitwardenSecretManagerProvider={
        "enabled": "true", "secretRef": {"name": "bw"}}), None, no_image)
    assert error.field == "spec.appConfig.bitwardenSecretManagerProvider.enabled"
    assert "RELATED_IMAGE_BITWARDEN_SDK_SERVER" in error.message


# --- the operator environment ---------------------------------------------------------------


def test_images_and_versions_come_from_the_environment() -> None:
    env = OperatorEnvironment.from_environ({
        "RELATED_IMAGE_EXTERNAL_SECRETS": "mirror/eso:1",
        "RELATED_IMAGE_BITWARDEN_SDK_SERVER": "mirror/bw:2",
        "OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION": "1.0.0",
        "BITWARDEN_SDK_SERVER_IMAGE_VERSION": "2.0.0",
    })
    result = config(esc(), None, env)
    assert (result.images.external_secrets, result.images.bitwarden_sdk_server) == (
        "mirror/eso:1", "mirror/bw:2")
    assert (result.versions.external_secrets, result.versions.bitwarden_sdk_server) == (
        "1.0.0", "2.0.0")


def test_absent_variables_fall_back_to_the_pinned_versions() -> None:
    assert OperatorEnvironment() == NO_ENV
    assert NO_ENV.external_secrets_image == versions.EXTERNAL_SECRETS_IMAGE
    assert NO_ENV.bitwarden_image == versions.BITWARDEN_SDK_SERVER_IMAGE
    assert (NO_ENV.http_proxy, NO_ENV.https_proxy, NO_ENV.no_proxy) == (None, None, None)


def test_an_empty_external_secrets_image_is_refused() -> None:
    error = config_error(esc(), None,
                         OperatorEnvironment.from_environ({"RELATED_IMAGE_EXTERNAL_SECRETS": ""}))
    assert error.field == "env.RELATED_IMAGE_EXTERNAL_SECRETS"


def test_a_version_that_is_no_label_value_is_refused() -> None:
    env = OperatorEnvironment.from_environ({"OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION": "1.0+a"})
    assert config_error(esc(), None, env).field == "env.OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION"


# --- validation the CRD schema cannot do ----------------------------------------------------


@pytest.mark.parametrize(("resources", "field"), [
    ({"requests": {"cpu": "2"}, "limits": {"cpu": "1"}}, ".requests.cpu"),
    ({"requests": {"memory": "1Gi"}, "limits": {"memory": "1000Mi"}}, ".requests.memory"),
    ({"limits": {"cpu": "lots"}}, ".limits.cpu"),
    ({"limits": {"cpu": "-1"}}, ".limits.cpu"),
    ({"limits": {"gpu": "1"}}, ".limits.gpu"),
    ({"requests": {"example.com/dongle": "1"}}, ".requests['example.com/dongle']"),
    ({"claims": [{"name": "gpu"}]}, ".claims"),
])
def test_unusable_resources_are_refused_with_the_field(resources: dict[str, Any],
                                                       field: str) -> None:
    assert config_error(app(resources=resources)).field == f"spec.appConfig.resources{field}"
    assert config_error(esc(), glob(resources=resources)).field == \
        f"spec.globalConfig.resources{field}"


def test_equal_requests_and_limits_in_different_units_are_accepted() -> None:
    resources = {"requests": {"cpu": "0.5", "memory": "1Gi"},
                 "limits": {"cpu": "500m", "memory": "1073741824"}}
    assert config(app(resources=resources)).resources == resources


@pytest.mark.parametrize(("toleration", "field"), [
    ({"operator": "Equal", "value": "x"}, "[0].operator"),
    ({"key": "a", "operator": "Exists", "value": "x"}, "[0].value"),
    ({"key": "a", "operator": "Sometimes"}, "[0].operator"),
    ({"key": "a", "effect": "NoWay"}, "[0].effect"),
    ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}, "[0].tolerationSeconds"),
    ({"key": "bad key"}, "[0].key"),
])
def test_unusable_tolerations_are_refused_with_the_field(toleration: dict[str, Any],
                                                         field: str) -> None:
    assert config_error(app(tolerations=[toleration])).field == \
        f"spec.appConfig.tolerations{field}"


@pytest.mark.parametrize(("affinity", "field"), [
    ({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": []}}},
     ".nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"),
    ({"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 0, "preference": {}}]}},
     ".nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].weight"),
    ({"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]}},
     ".podAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].topologyKey"),
    ({"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
        {"topologyKey": "zone", "labelSelector": {"matchExpressions": [
            {"key": "app", "operator": "In"}]}}]}},
     ".podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution[0].labelSelector"
     ".matchExpressions[0].values"),
])
def test_unusable_affinity_is_refused_with_the_field(affinity: dict[str, Any],
                                                     field: str) -> None:
    assert config_error(app(affinity=affinity)).field == f"spec.appConfig.affinity{field}"


def test_invalid_node_selector_values_are_refused() -> None:
    error = config_error(app(nodeSelector={"disk": "fast ssd"}))
    assert error.field == "spec.appConfig.nodeSelector.disk"


def test_config_error_reads_field_then_message() -> None:
    error = ConfigError("spec.appConfig.logLevel", "must be 1 to 5")
    assert str(error) == "spec.appConfig.logLevel: must be 1 to 5"
    assert isinstance(error, ValueError)


def test_the_effective_config_rejects_combinations_the_renderer_cannot_use() -> None:
    with pytest.raises(ValueError, match="issuer_name"):
        EffectiveConfig.model_validate({"cert_manager": {"enabled": True}})
    with pytest.raises(ValueError, match="bitwarden_sdk_server"):
        EffectiveConfig.model_validate({"bitwarden": {"enabled": True,
                                                      "tls_secret_name": "x"}})


# --- proxy URLs -----------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["proxy.example.com:3128", "http://", "proxy", "ftp://p:21",
                                   "//proxy:3128", "http://[::1"])
def test_a_proxy_that_is_not_a_url_is_refused(value: str) -> None:
    error = config_error(app(proxy={"httpsProxy": value}))
    assert error.field == "spec.appConfig.proxy.httpsProxy"
    assert "a scheme" in error.message or "not a URL" in error.message
    esm_error = config_error(None, glob(proxy={"httpProxy": value}))
    assert esm_error.field == "spec.globalConfig.proxy.httpProxy"


@pytest.mark.parametrize("value", ["http://proxy:3128", "https://user:p%40ss@proxy.example.com",
                                   "socks5://10.0.0.1:1080", "HTTP://PROXY:3128", ""])
def test_proxy_urls_with_a_scheme_and_a_host_are_accepted(value: str) -> None:
    # Taken as given, and in place of the environment's; "" is an explicit "no proxy".
    accepted = config(app(proxy={"httpProxy": value}), env=PROXY_ENV).proxy
    assert accepted == (ProxySettings(http_proxy=value) if value else None)


# --- network policies -------------------------------------------------------------------------


def policy(name: str, component: str = "ExternalSecretsCoreController") -> dict[str, Any]:
    return {"name": name, "componentName": component, "egress": [{}]}


@pytest.mark.parametrize(("policies", "message"), [
    ([policy("deny-all-traffic")], "none of the operator's own NetworkPolicies has"),
    ([policy("Not_A_Name")], "none of the operator's own NetworkPolicies has"),
    ([policy("p"), policy("p", "BitwardenSDKServer")], "is used twice"),
])
def test_network_policy_names_the_crd_refuses_are_refused_for_render(
        policies: list[dict[str, Any]], message: str) -> None:
    error = config_error(esc({"controllerConfig": {"networkPolicies": policies}}))
    assert error.field.startswith("spec.controllerConfig.networkPolicies[")
    assert message in error.message


def test_declared_policies_replace_the_default_egress_of_their_component() -> None:
    declared = config(esc({"controllerConfig": {"networkPolicies": [policy("allow-vault")]}}))
    assert [(p.name, p.workload) for p in declared.egress_policies] == [
        ("allow-vault", "controller")]
    default = config()
    assert [(p.name, p.workload, p.egress) for p in default.egress_policies] == [
        ("allow-provider-egress-for-main-controller", "controller", ({},))]


# --- rules the CRD checks, checked again for render and objects stored before them ---------


@pytest.mark.parametrize("proxy", [{"httpProxy": "http://proxy:3128\n"},
                                   {"noProxy": "a.example\tb.example"}])
def test_a_proxy_with_a_control_character_is_refused(proxy: dict[str, str]) -> None:
    error = config_error(app(proxy=proxy))
    assert error.field == f"spec.appConfig.proxy.{next(iter(proxy))}"
    assert "control characters" in error.message


def test_a_client_burst_below_the_qps_is_refused() -> None:
    error = config_error(components({"componentName": "ExternalSecretsCoreController",
                                     "tuning": {"clientQPS": 50, "clientBurst": 10}}))
    assert error.field == "spec.controllerConfig.componentConfigs[0].tuning.clientBurst"
