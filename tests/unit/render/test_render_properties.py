"""Properties of every rendered set, over generated specs, and hostile strings.

The generated specs go through `effective_config`, so the properties hold for what users can
write. The hostile-string tests build EffectiveConfig directly: validation would refuse such
label values, and the renderer must be safe without relying on it.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.api.patterns import is_reserved_label_key, is_shared_namespace
from manager.commands.render import dump_objects
from manager.config import (
    IN_CLUSTER_NO_PROXY,
    BitwardenSettings,
    CertManagerSettings,
    EffectiveConfig,
    Images,
    OperatorEnvironment,
    ProxySettings,
    effective_config,
    merged_no_proxy,
)
from manager.kube_values import has_control_character
from manager.render import CLUSTER_SCOPED_KINDS, DesiredState, render_operand
from manager.render.context import RESTRICTED_CONTAINER_SECURITY_CONTEXT
from manager.render.serialize import tojson

STANDARD_KEYS = ("app", "app.kubernetes.io/name", "app.kubernetes.io/instance",
                 "app.kubernetes.io/version", "app.kubernetes.io/managed-by",
                 "app.kubernetes.io/part-of")
FIXED = {"app": "external-secrets", "app.kubernetes.io/instance": "external-secrets",
         "app.kubernetes.io/managed-by": "external-secrets-operator",
         "app.kubernetes.io/part-of": "external-secrets-operator"}
APP_NAMES = {"external-secrets", "external-secrets-webhook", "external-secrets-cert-controller",
             "bitwarden-sdk-server"}
PROPERTY_SETTINGS = settings(max_examples=60, deadline=None,
                             suppress_health_check=[HealthCheck.too_slow])

# --- generated specs ------------------------------------------------------------------------

dns_labels = st.from_regex(r"[a-z]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True)
operand_namespaces = dns_labels.filter(lambda name: not is_shared_namespace(name))
label_keys = st.builds(lambda prefix, name: f"{prefix}/{name}" if prefix else name,
                       st.sampled_from(["", "example.com", "team.example.org"]),
                       st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?",
                                     fullmatch=True)).filter(lambda k: not is_reserved_label_key(k))
label_values = st.from_regex(r"([A-Za-z0-9]([-A-Za-z0-9_.]{0,10}[A-Za-z0-9])?)?", fullmatch=True)
label_maps = st.dictionaries(label_keys, label_values, max_size=5)
urls = st.sampled_from(["", "http://proxy:3128", "https://user@proxy.example.com:8443"])
proxies = st.builds(lambda http, https, no: {"httpProxy": http, "httpsProxy": https,
                                             "noProxy": no},
                    urls, urls, st.sampled_from(["", ".svc,.cluster.local", "10.0.0.0/8"]))
resources = st.sampled_from([
    {"requests": {"cpu": "10m", "memory": "64Mi"}},
    {"requests": {"cpu": "100m"}, "limits": {"cpu": "1", "memory": "1Gi"}},
])
tolerations = st.sampled_from([[{"key": "infra", "operator": "Exists"}],
                               [{"key": "a", "value": "b", "effect": "NoExecute",
                                 "tolerationSeconds": 30}]])
node_selectors = st.dictionaries(label_keys, label_values, min_size=1, max_size=3)


def optional(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.none() | strategy


@st.composite
def common_configs(draw: st.DrawFn) -> dict[str, Any]:
    fields = {"logLevel": draw(optional(st.integers(1, 5))), "proxy": draw(optional(proxies)),
              "resources": draw(optional(resources)), "tolerations": draw(optional(tolerations)),
              "nodeSelector": draw(optional(node_selectors))}
    return {key: value for key, value in fields.items() if value is not None}


@st.composite
def esc_specs(draw: st.DrawFn) -> ExternalSecretsConfigSpec:
    app = draw(common_configs())
    cert_manager = draw(st.booleans())
    if cert_manager:
        app["certManagerConfig"] = {
            "enabled": "true",
            "addInjectorAnnotations": draw(st.sampled_from(["true", "false"])),
            "issuerRef": {"name": draw(dns_labels),
                          "kind": draw(st.sampled_from(["Issuer", "ClusterIssuer", "issuer"]))},
        }
    if draw(st.booleans()):
        provider: dict[str, Any] = {"enabled": "true"}
        if not cert_manager or draw(st.booleans()):
            provider["secretRef"] = {"name": draw(dns_labels)}
        app["bitwardenSecretManagerProvider"] = provider
    if draw(st.booleans()):
        app["operatingNamespace"] = draw(dns_labels)
    spec: dict[str, Any] = {"controllerConfig": {"namespace": draw(operand_namespaces),
                                                 "labels": draw(label_maps)}}
    if draw(st.booleans()):
        spec["controllerConfig"]["networkPolicies"] = [
            {"name": f"egress-{index}", "componentName": component,
             "egress": [{"ports": [{"protocol": "TCP", "port": 443}]}]}
            for index, component in enumerate(draw(st.lists(st.sampled_from(
                ["ExternalSecretsCoreController", "BitwardenSDKServer"]), max_size=3)))]
    if app or draw(st.booleans()):
        spec["appConfig"] = app
    return ExternalSecretsConfigSpec.model_validate(spec)


@st.composite
def esm_specs(draw: st.DrawFn) -> ExternalSecretsManagerSpec | None:
    if draw(st.booleans()):
        return None
    return ExternalSecretsManagerSpec.model_validate(
        {"globalConfig": {**draw(common_configs()), "labels": draw(label_maps)}})


environments = st.builds(
    lambda http: OperatorEnvironment.from_environ({"HTTP_PROXY": http} if http else {}),
    st.sampled_from(["", "http://cluster-proxy:3128"]))


def reloaded(objects: tuple[dict[str, Any], ...]) -> list[Any]:
    """What `render` prints for `objects`, read back."""
    return list(yaml.load_all(dump_objects(objects), Loader=yaml.CSafeLoader))


def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector (matchLabels, and In expressions) matching `labels`."""
    if any(labels.get(key) != value for key, value in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        assert expression["operator"] == "In", expression
        if labels.get(expression["key"]) not in expression["values"]:
            return False
    return True


def pod_specs(state: DesiredState) -> list[dict[str, Any]]:
    return [obj["spec"]["template"] for obj in state.objects() if obj["kind"] == "Deployment"]


def all_containers(state: DesiredState) -> list[dict[str, Any]]:
    return [container for template in pod_specs(state)
            for key in ("containers", "initContainers")
            for container in template["spec"].get(key, [])]


# The Deployments whose containers call out of the cluster, and so get the proxy.
CALLING_OUT = ("external-secrets", "bitwarden-sdk-server")


def containers_by_deployment(state: DesiredState) -> list[tuple[str, dict[str, Any]]]:
    return [(obj["metadata"]["name"], container) for obj in state.objects()
            if obj["kind"] == "Deployment"
            for key in ("containers", "initContainers")
            for container in obj["spec"]["template"]["spec"].get(key, [])]


def outbound_containers(state: DesiredState) -> list[dict[str, Any]]:
    return [container for name, container in containers_by_deployment(state)
            if name in CALLING_OUT]


# --- properties of every rendered set -------------------------------------------------------


def check_labels(labels: dict[str, str], config: EffectiveConfig) -> None:
    assert set(STANDARD_KEYS) <= set(labels)
    assert {key: labels[key] for key in FIXED} == FIXED
    assert labels["app.kubernetes.io/name"] in APP_NAMES
    assert labels["app.kubernetes.io/version"] in (config.versions.external_secrets,
                                                   config.versions.bitwarden_sdk_server)
    for key, value in config.labels.items():
        assert labels[key] == value


def check_network_policies(state: DesiredState) -> None:
    """No NetworkPolicy selects a pod the operator did not render: each selects operand pods
    by the operator's own labels, and never a pod without them."""
    operand_pods = [t["metadata"]["labels"] for t in pod_specs(state)]
    foreign = {key: value for key, value in operand_pods[0].items()
               if key != "app.kubernetes.io/managed-by"}
    for obj in state.objects():
        if obj["kind"] != "NetworkPolicy":
            continue
        selector = obj["spec"]["podSelector"]
        name = obj["metadata"]["name"]
        assert selector["matchLabels"]["app.kubernetes.io/managed-by"] == \
            "external-secrets-operator", name
        assert any(selects(selector, labels) for labels in operand_pods), name
        assert not selects(selector, foreign), name


@PROPERTY_SETTINGS
@given(esc_specs(), esm_specs(), environments)
def test_every_rendered_set_keeps_the_invariants(esc: ExternalSecretsConfigSpec,
                                                 esm: ExternalSecretsManagerSpec | None,
                                                 env: OperatorEnvironment) -> None:
    config = effective_config(esc, esm, env)
    state = render_operand(config)
    objects = state.objects()

    # Standard (and user) labels on every object and every pod template.
    for obj in objects:
        check_labels(obj["metadata"]["labels"], config)
    for template in pod_specs(state):
        check_labels(template["metadata"]["labels"], config)

    # Every namespaced object in the operand namespace (but the controller's Role and
    # RoleBinding in the operating namespace); cluster-scoped ones in none.
    for obj in objects:
        if obj["kind"] in CLUSTER_SCOPED_KINDS:
            assert "namespace" not in obj["metadata"]
        elif obj["metadata"]["name"] == "external-secrets-controller":
            assert obj["metadata"]["namespace"] == config.operating_namespace
        else:
            assert obj["metadata"]["namespace"] == config.namespace
    assert ("Namespace", config.namespace) in {(o["kind"], o["metadata"]["name"])
                                               for o in objects}

    # Every container restricted, no fixed user anywhere.
    for container in all_containers(state):
        assert container["securityContext"] == RESTRICTED_CONTAINER_SECURITY_CONTEXT
    for template in pod_specs(state):
        assert "runAsUser" not in template["spec"].get("securityContext", {})

    # Names unique per kind and namespace.
    keys = [(o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) for o in objects]
    assert len(keys) == len(set(keys))

    # Every kind is one pruning knows about; selectors select their own pods.
    assert {(o["apiVersion"], o["kind"]) for o in objects} <= set(state.kinds())
    for obj in objects:
        if obj["kind"] == "Deployment":
            selector = obj["spec"]["selector"]["matchLabels"]
            pod_labels = obj["spec"]["template"]["metadata"]["labels"]
            assert selector.items() <= pod_labels.items()

    # The proxy lands on every container that calls out or nowhere, never on the webhook or
    # the cert-controller; NO_PROXY always keeps in-cluster traffic away from it.
    proxied = config.proxy is not None
    assert ("proxy-ca" in state.components) is proxied
    for deployment, container in containers_by_deployment(state):
        gets_proxy = proxied and deployment in CALLING_OUT
        env = {variable["name"]: variable["value"] for variable in container.get("env", [])}
        assert bool(env) is gets_proxy
        assert set(env) <= {"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
                            "http_proxy", "https_proxy", "no_proxy"}
        if gets_proxy:
            assert set(IN_CLUSTER_NO_PROXY) <= set(env["NO_PROXY"].split(","))
            assert env["no_proxy"] == env["NO_PROXY"]
        mounts = [m for m in container.get("volumeMounts", [])
                  if m["mountPath"] == "/etc/pki/tls/certs"]
        assert mounts == ([{"name": "trusted-ca-bundle", "mountPath": "/etc/pki/tls/certs",
                            "readOnly": True}] if gets_proxy else [])

    check_network_policies(state)

    # Components switch as a whole.
    assert ("cert-controller" in state.components) is not config.cert_manager.enabled
    assert ("webhook-certificate" in state.components) is config.cert_manager.enabled
    assert ("bitwarden" in state.components) is config.bitwarden.enabled

    # What is printed reads back as the same objects.
    assert reloaded(objects) == list(objects)


# --- hostile strings ------------------------------------------------------------------------

FRAGMENTS = ['"', "'", "\\", "\n", "\r\n", "\t", "{{ x }}", "{%", "{#", "}}", ": ", "- ",
             "---", "...", "#", "&anchor", "*alias", "!!python/object", "%YAML", "@", "`", "|",
             ">", "[", "]", "{", "}", ",", "?", "\x00", "\x7f", "\x85", "\u2028", "\ufeff",
             "é", "ß", "中文", "😀", "\U0010fffd", "null", "true", "~", "0x1F", "1e3", " "]
hostile = st.lists(st.sampled_from(FRAGMENTS) | st.text(min_size=1, max_size=4),
                   min_size=1, max_size=8).map("".join)
BITWARDEN_AND_CERT_MANAGER = {
    "cert_manager": CertManagerSettings(enabled=True, issuer_name="ca"),
    "bitwarden": BitwardenSettings(enabled=True, tls_secret_name="bitwarden-tls-certs",
                                   issue_certificate=True),
    "images": Images(bitwarden_sdk_server="example.com/bitwarden:1"),
    "proxy": ProxySettings(http_proxy="http://p:1"),
}


def relabelled(objects: tuple[dict[str, Any], ...], key: str, value: str,
               new_key: str, new_value: str) -> list[dict[str, Any]]:
    """`objects` with every label `key: value` replaced by `new_key: new_value`."""
    result = copy.deepcopy(list(objects))
    holders = [obj["metadata"] for obj in result] + [
        obj["spec"]["template"]["metadata"] for obj in result if obj["kind"] == "Deployment"] + [
        obj["spec"]["secretTemplate"] for obj in result if obj["kind"] == "Certificate"]
    for holder in holders:
        assert holder["labels"].get(key) == value, (holder, key)
        del holder["labels"][key]
        holder["labels"][new_key] = new_value
    return result


@PROPERTY_SETTINGS
@given(hostile, hostile.filter(lambda key: not is_reserved_label_key(key)))
def test_hostile_label_values_and_keys_land_verbatim_and_change_nothing_else(
        value: str, key: str) -> None:
    state = render_operand(EffectiveConfig(labels={key: value}, **BITWARDEN_AND_CERT_MANAGER))
    baseline = render_operand(EffectiveConfig(labels={"placeholder": "v"},
                                              **BITWARDEN_AND_CERT_MANAGER))
    assert len(state.objects()) == len(baseline.objects())
    assert relabelled(state.objects(), key, value, "placeholder", "v") == \
        list(baseline.objects())
    assert reloaded(state.objects()) == list(state.objects())


def with_proxy_values(objects: tuple[dict[str, Any], ...],
                      values: dict[str, str]) -> list[dict[str, Any]]:
    """`objects` with each proxy variable's value replaced by `values[name]`."""
    result = copy.deepcopy(list(objects))
    for obj in result:
        if obj["kind"] != "Deployment":
            continue
        for container in obj["spec"]["template"]["spec"]["containers"]:
            for variable in container.get("env", []):
                variable["value"] = values[variable["name"].upper()]
    return result


@PROPERTY_SETTINGS
@given(hostile, hostile, hostile)
def test_hostile_proxy_values_land_verbatim_and_change_nothing_else(http: str, https: str,
                                                                    no_proxy: str) -> None:
    def render_with(h: str, s: str, n: str) -> DesiredState:
        fields = {**BITWARDEN_AND_CERT_MANAGER,
                  "proxy": ProxySettings(http_proxy=h, https_proxy=s, no_proxy=n)}
        return render_operand(EffectiveConfig(**fields))

    state = render_with(http, https, no_proxy)
    merged = merged_no_proxy(no_proxy, IN_CLUSTER_NO_PROXY)
    for container in outbound_containers(state):
        assert {v["name"]: v["value"] for v in container["env"]} == {
            "HTTP_PROXY": http, "HTTPS_PROXY": https, "NO_PROXY": merged,
            "http_proxy": http, "https_proxy": https, "no_proxy": merged}
    placeholders = {"HTTP_PROXY": "h", "HTTPS_PROXY": "s",
                    "NO_PROXY": merged_no_proxy("n", IN_CLUSTER_NO_PROXY)}
    assert with_proxy_values(state.objects(), placeholders) == \
        list(render_with("h", "s", "n").objects())
    assert reloaded(state.objects()) == list(state.objects())


@PROPERTY_SETTINGS
@given(hostile, st.lists(st.sampled_from(["10.0.0.1", "fd00::1", *IN_CLUSTER_NO_PROXY]),
                         max_size=3).map(tuple))
def test_no_proxy_keeps_the_administrators_entries_first_and_adds_each_required_once(
        admin: str, addresses: tuple[str, ...]) -> None:
    merged = merged_no_proxy(admin, (*addresses, *IN_CLUSTER_NO_PROXY)).split(",")
    given_entries = [entry.strip() for entry in admin.split(",") if entry.strip()]
    first_of_each = [entry for index, entry in enumerate(given_entries)
                     if entry.lower() not in {e.lower() for e in given_entries[:index]}]
    assert merged[:len(first_of_each)] == first_of_each
    assert len({entry.lower() for entry in merged}) == len(merged)
    assert {entry.lower() for entry in (*addresses, *IN_CLUSTER_NO_PROXY)} <= \
        {entry.lower() for entry in merged}


@PROPERTY_SETTINGS
@given(hostile.filter(lambda value: not has_control_character(value)))
def test_hostile_proxy_values_from_a_spec_reach_the_containers(value: str) -> None:
    """Control characters are refused (the CRD's rule, and manager/config/checks.py for render)."""
    url = f"http://proxy.invalid:3128/{value}"  # a proxy must be a URL; its path is data
    spec = ExternalSecretsConfigSpec.model_validate(
        {"appConfig": {"proxy": {"httpProxy": url, "noProxy": value}}})
    state = render_operand(effective_config(spec, None, OperatorEnvironment()))
    for container in outbound_containers(state):
        assert container["env"][:2] == [
            {"name": "HTTP_PROXY", "value": url},
            {"name": "NO_PROXY", "value": merged_no_proxy(value, IN_CLUSTER_NO_PROXY)}]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children,
                                                                      max_size=4),
    max_leaves=20)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_tojson_output_is_one_yaml_value_equal_to_its_input(value: Any) -> None:
    text = tojson(value)
    assert "\n" not in text
    document = f"key: {text}\nother: 1\n"
    assert yaml.safe_load(document) == {"key": value, "other": 1}
    assert yaml.load(document, Loader=yaml.CSafeLoader) == {"key": value, "other": 1}
