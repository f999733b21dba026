"""Administrator knobs (issue 15): the precedence of per-component settings, and what each
knob renders."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import ConfigError, EffectiveConfig, OperatorEnvironment, effective_config
from manager.render import render_operand

ENV = OperatorEnvironment.from_environ({})


def config(esc: dict[str, Any], esm: dict[str, Any] | None = None) -> EffectiveConfig:
    return effective_config(ExternalSecretsConfigSpec.model_validate(esc),
                            ExternalSecretsManagerSpec.model_validate(esm or {}), ENV)


def objects(esc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(render_operand(config(esc)).objects())


def deployment(esc: dict[str, Any], name: str) -> dict[str, Any]:
    return next(o for o in objects(esc) if o["kind"] == "Deployment"
                and o["metadata"]["name"] == name)


@pytest.mark.parametrize(("component", "app", "glob", "expected"), [
    ({"c": "component"}, {"c": "app"}, {"c": "esm"}, {"c": "component"}),
    (None, {"c": "app"}, {"c": "esm"}, {"c": "app"}),
    (None, None, {"c": "esm"}, {"c": "esm"}),
    (None, None, None, None),
])
def test_node_selector_precedence_component_app_esm_default(
        component: dict[str, str] | None, app: dict[str, str] | None,
        glob: dict[str, str] | None, expected: dict[str, str] | None) -> None:
    esc: dict[str, Any] = {"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", **({"nodeSelector": component} if component else {})}]}}
    if app:
        esc["appConfig"] = {"nodeSelector": app}
    result = config(esc, {"globalConfig": {"nodeSelector": glob}} if glob else None)
    assert result.workloads["webhook"].node_selector == expected
    # the other components never see the webhook's own setting
    assert result.workloads["controller"].node_selector == (app or glob)


def test_a_component_setting_stays_in_its_component() -> None:
    esc = {"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", "resources": {"limits": {"memory": "1Gi"}},
         "priorityClassName": "high"}]}}
    webhook = deployment(esc, "external-secrets-webhook")["spec"]["template"]["spec"]
    controller = deployment(esc, "external-secrets")["spec"]["template"]["spec"]
    assert webhook["containers"][0]["resources"] == {"limits": {"memory": "1Gi"}}
    assert webhook["priorityClassName"] == "high"
    assert "resources" not in controller["containers"][0]
    assert "priorityClassName" not in controller


def test_override_env_replaces_by_name_else_appends() -> None:
    esc = {"appConfig": {"proxy": {"httpProxy": "http://p:3128"}},
           "controllerConfig": {"componentConfigs": [
               {"componentName": "ExternalSecretsCoreController",
                "overrideEnv": [{"name": "GODEBUG", "value": "x"}]}]}}
    env = deployment(esc, "external-secrets")["spec"]["template"]["spec"]["containers"][0]["env"]
    assert [e["name"] for e in env] == ["HTTP_PROXY", "NO_PROXY", "http_proxy", "no_proxy",
                                        "GODEBUG"]


def test_reserved_env_and_annotations_are_config_errors_for_render() -> None:
    with pytest.raises(ConfigError, match="overrideEnv"):
        config({"controllerConfig": {"componentConfigs": [
            {"componentName": "Webhook", "overrideEnv": [{"name": "HTTPS_PROXY", "value": "x"}]}]}})
    with pytest.raises(ConfigError, match="annotations"):
        config({"controllerConfig": {"annotations": {"apps.openshift.io/x": "y"}}})


def test_annotations_land_on_every_object_and_pod_template() -> None:
    rendered = objects({"controllerConfig": {"annotations": {"example.com/a": "b"}}})
    assert all(o["metadata"]["annotations"]["example.com/a"] == "b" for o in rendered)
    for obj in rendered:
        if obj["kind"] == "Deployment":
            assert obj["spec"]["template"]["metadata"]["annotations"] == {
                "example.com/a": "b", "openshift.io/required-scc": "restricted-v2"}


def test_every_operand_pod_pins_restricted_v2_unless_the_administrator_pins_another() -> None:
    """OpenShift picks the highest-priority SCC a pod matches; a product that installs a
    broader one would otherwise change what the operand's pods run as."""
    for given, expected in (({}, "restricted-v2"),
                            ({"openshift.io/required-scc": "nonroot-v2"}, "nonroot-v2")):
        rendered = objects({"controllerConfig": {"annotations": given}})
        deployments = [o for o in rendered if o["kind"] == "Deployment"]
        assert len(deployments) == 3
        for obj in deployments:
            assert obj["spec"]["template"]["metadata"]["annotations"][
                "openshift.io/required-scc"] == expected, obj["metadata"]["name"]


@pytest.mark.parametrize("key", ["openshift.io/required-scc",
                                 "target.workload.openshift.io/management",
                                 "cluster-autoscaler.kubernetes.io/safe-to-evict"])
def test_the_platform_annotations_administrators_need_are_allowed(key: str) -> None:
    rendered = objects({"controllerConfig": {"annotations": {key: "x"}}})
    assert all(o["metadata"]["annotations"][key] == "x" for o in rendered)


def test_without_new_fields_nothing_gains_annotations_pdbs_or_spread() -> None:
    rendered = objects({})
    assert not any("annotations" in o["metadata"] for o in rendered
                   if o["kind"] != "ValidatingWebhookConfiguration")
    assert not any(o["kind"] == "PodDisruptionBudget" for o in rendered)
    for obj in rendered:
        if obj["kind"] == "Deployment":
            assert obj["spec"]["replicas"] == 1
            assert "topologySpreadConstraints" not in obj["spec"]["template"]["spec"]


def test_replicas_back_to_one_renders_no_budget_and_no_spread() -> None:
    esc = {"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", "deploymentConfigs": {
            "replicas": 1, "podDisruptionBudget": {"maxUnavailable": 1}}}]}}
    assert not any(o["kind"] == "PodDisruptionBudget" for o in objects(esc))


def test_manage_replicas_false_leaves_replicas_out() -> None:
    esc = {"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", "deploymentConfigs": {"manageReplicas": "false"}}]}}
    assert "replicas" not in deployment(esc, "external-secrets-webhook")["spec"]


def test_budget_of_a_disabled_component_is_not_rendered() -> None:
    esc = {"controllerConfig": {"componentConfigs": [
        {"componentName": "BitwardenSDKServer", "deploymentConfigs": {"replicas": 3}}]}}
    assert not any(o["kind"] == "PodDisruptionBudget" for o in objects(esc))


def test_webhook_failure_policy_and_timeout_on_every_webhook() -> None:
    esc = {"appConfig": {"webhookConfig": {"failurePolicy": "Ignore", "timeoutSeconds": 12}}}
    hooks = [hook for o in objects(esc) if o["kind"] == "ValidatingWebhookConfiguration"
             for hook in o["webhooks"]]
    assert len(hooks) == 3
    assert {(h["failurePolicy"], h["timeoutSeconds"]) for h in hooks} == {("Ignore", 12)}


def test_trusted_ca_reaches_controller_and_bitwarden_only() -> None:
    esc = {"appConfig": {"trustedCABundle": {"configMapName": "ca"},
                         "bitwardenSecretManagerProvider": {"enabled": "true",
                                                            "secretRef": {"name": "bw"}}}}
    for name, expected in (("external-secrets", True), ("bitwarden-sdk-server", True),
                           ("external-secrets-webhook", False),
                           ("external-secrets-cert-controller", False)):
        pod = deployment(esc, name)["spec"]["template"]["spec"]
        env = {e["name"]: e.get("value") for e in pod["containers"][0].get("env", [])}
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        assert ("SSL_CERT_DIR" in env) is expected, name
        assert ("trusted-ca-user" in volumes) is expected, name
        if expected:
            assert env["SSL_CERT_DIR"].split(":")[-1] == "/etc/external-secrets/trusted-ca"
            assert volumes["trusted-ca-user"]["configMap"] == {
                "name": "ca", "items": [{"key": "ca-bundle.crt", "path": "ca-bundle.crt"}]}
