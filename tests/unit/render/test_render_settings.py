"""Every setting lands where docs/configuration.md says, and components switch as a whole."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api.models import ExternalSecretsConfigSpec
from manager.api.rules import OPERATOR_NETWORK_POLICIES
from manager.config import (
    IN_CLUSTER_NO_PROXY,
    BitwardenSettings,
    CertManagerSettings,
    EffectiveConfig,
    Images,
    OperatorEnvironment,
    ProxySettings,
    TrustedCA,
    Versions,
    effective_config,
    merged_no_proxy,
    with_api_server_addresses,
)
from manager.render import APPLY_ORDER, DesiredState, render_operand
from manager.render.context import (
    LOADED_CONTENT_ANNOTATION,
    OPERAND_LOG_LEVELS,
    RESTRICTED_CONTAINER_SECURITY_CONTEXT,
    template_context,
)
from manager.render.serialize import TemplateError
from manager.render.templates import (
    component_templates,
    environment,
    render_template,
    template_kinds,
    warm_up,
)

CERT_MANAGER = CertManagerSettings(enabled=True, issuer_name="ca", issuer_kind="ClusterIssuer")
BITWARDEN_IMAGES = Images(bitwarden_sdk_server="example.com/bitwarden:1")

CERT_CONTROLLER_OBJECTS = {
    ("Deployment", "external-secrets-cert-controller"),
    ("ServiceAccount", "external-secrets-cert-controller"),
    ("ClusterRole", "external-secrets-cert-controller"),
    ("ClusterRoleBinding", "external-secrets-cert-controller"),
    ("Service", "external-secrets-cert-controller-metrics"),
    ("Secret", "external-secrets-webhook"),
    ("NetworkPolicy", "allow-api-server-egress-for-cert-controller"),
}
BITWARDEN_OBJECTS = {
    ("Deployment", "bitwarden-sdk-server"),
    ("ServiceAccount", "bitwarden-sdk-server"),
    ("Service", "bitwarden-sdk-server"),
    ("NetworkPolicy", "allow-api-server-egress-for-bitwarden-server"),
    ("NetworkPolicy", "allow-main-controller-egress-to-bitwarden-server"),
}


def render(**fields: Any) -> DesiredState:
    return render_operand(EffectiveConfig(**fields))


def names(state: DesiredState) -> set[tuple[str, str]]:
    return {(obj["kind"], obj["metadata"]["name"]) for obj in state.objects()}


def find(state: DesiredState, kind: str, name: str) -> dict[str, Any]:
    matches = [obj for obj in state.objects()
               if obj["kind"] == kind and obj["metadata"]["name"] == name]
    assert len(matches) == 1, f"{kind}/{name}: {len(matches)} objects"
    return matches[0]


def deployments(state: DesiredState) -> list[dict[str, Any]]:
    return [obj for obj in state.objects() if obj["kind"] == "Deployment"]


def containers(state: DesiredState) -> list[dict[str, Any]]:
    return [container for deployment in deployments(state)
            for key in ("containers", "initContainers")
            for container in deployment["spec"]["template"]["spec"].get(key, [])]


def args(state: DesiredState, deployment: str) -> list[str]:
    spec = find(state, "Deployment", deployment)["spec"]["template"]["spec"]
    result: list[str] = spec["containers"][0]["args"]
    return result


# --- the default installation ---------------------------------------------------------------


def test_the_default_installation_has_the_documented_objects_in_apply_order() -> None:
    state = render()
    assert list(state.components) == ["namespace", "controller", "controller-cluster-rbac",
                                      "webhook", "cert-controller", "network-policy",
                                      "provider-egress"]
    assert names(state) == {
        ("Namespace", "external-secrets"),
        ("ServiceAccount", "external-secrets"), ("ServiceAccount", "external-secrets-webhook"),
        ("ClusterRole", "external-secrets-controller"), ("ClusterRole", "external-secrets-view"),
        ("ClusterRole", "external-secrets-edit"),
        ("ClusterRole", "external-secrets-servicebindings"),
        ("ClusterRoleBinding", "external-secrets-controller"),
        ("Role", "external-secrets-leaderelection"),
        ("RoleBinding", "external-secrets-leaderelection"),
        ("Service", "external-secrets-metrics"), ("Service", "external-secrets-webhook"),
        ("Deployment", "external-secrets"), ("Deployment", "external-secrets-webhook"),
        ("NetworkPolicy", "allow-api-server-egress-for-main-controller"),
        ("NetworkPolicy", "allow-api-server-egress-for-webhook"),
        ("NetworkPolicy", "deny-all-traffic"), ("NetworkPolicy", "allow-to-dns"),
        ("NetworkPolicy", "allow-provider-egress-for-main-controller"),
        ("ValidatingWebhookConfiguration", "externalsecret-validate"),
        ("ValidatingWebhookConfiguration", "secretstore-validate"),
    } | CERT_CONTROLLER_OBJECTS
    ranks = [APPLY_ORDER.index(obj["kind"]) for obj in state.objects()]
    assert ranks == sorted(ranks)


def test_kinds_lists_every_kind_a_template_can_produce_even_when_not_rendered() -> None:
    kinds = render().kinds()
    assert ("cert-manager.io/v1", "Certificate") in kinds
    assert ("v1", "ConfigMap") in kinds
    assert set(kinds) == template_kinds()
    assert [kind for _, kind in kinds] == [kind for kind in APPLY_ORDER
                                           if kind in {k for _, k in kinds}]


def test_warming_up_compiles_every_template_of_every_component() -> None:
    """What the runtime does after its first pass, so that the install's pass does not."""
    names = warm_up()
    components = {name.split("/")[0] for name in names}
    assert {"controller", "webhook", "cert-controller", "bitwarden"} <= components
    assert set(names) == {name for c in components for name in component_templates(c)}
    compiled = {name for _, name in environment().cache}
    assert set(names) <= compiled


def test_the_standard_labels_name_the_component_and_its_version() -> None:
    state = render(bitwarden=BitwardenSettings(enabled=True, tls_secret_name="bw"),
                   images=BITWARDEN_IMAGES, versions=Versions(external_secrets="v9",
                                                              bitwarden_sdk_server="v8"))
    webhook = find(state, "Deployment", "external-secrets-webhook")
    expected = {
        "app": "external-secrets",
        "app.kubernetes.io/name": "external-secrets-webhook",
        "app.kubernetes.io/instance": "external-secrets",
        "app.kubernetes.io/version": "v9",
        "app.kubernetes.io/managed-by": "external-secrets-operator",
        "app.kubernetes.io/part-of": "external-secrets-operator",
    }
    assert webhook["metadata"]["labels"] == expected
    assert webhook["spec"]["template"]["metadata"]["labels"] == expected
    bitwarden = find(state, "Deployment", "bitwarden-sdk-server")
    assert bitwarden["metadata"]["labels"]["app.kubernetes.io/version"] == "v8"
    assert bitwarden["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] == \
        "bitwarden-sdk-server"


def test_user_labels_land_under_the_standard_ones_on_objects_and_pods() -> None:
    state = render(labels={"team": "a", "app.kubernetes.io/name": "user-tries"})
    for obj in state.objects():
        assert obj["metadata"]["labels"]["team"] == "a"
        assert obj["metadata"]["labels"]["app.kubernetes.io/name"] != "user-tries"
    for deployment in deployments(state):
        assert deployment["spec"]["template"]["metadata"]["labels"]["team"] == "a"
        assert "team" not in deployment["spec"]["selector"]["matchLabels"]


# --- log level, operating namespace, webhook --------------------------------------------------


@pytest.mark.parametrize("level", [1, 2, 3, 4, 5])
def test_log_level_reaches_every_operand_container(level: int) -> None:
    state = render(log_level=level)
    for deployment in ("external-secrets", "external-secrets-webhook",
                       "external-secrets-cert-controller"):
        assert f"--loglevel={OPERAND_LOG_LEVELS[level]}" in args(state, deployment)


def test_the_log_level_mapping_is_monotonic_more_is_more_verbose() -> None:
    verbosity = ["error", "warn", "info", "debug"]
    ranks = [verbosity.index(OPERAND_LOG_LEVELS[level]) for level in range(1, 6)]
    assert ranks == sorted(ranks)
    assert OPERAND_LOG_LEVELS[5] == "debug"


def test_the_default_log_level_gives_the_operands_informational_logs() -> None:
    """Kubernetes logging guidelines: V(1) is a reasonable default that shows normal
    informational messages; the operand's `info` does, `warn` and `error` hide them."""
    assert OPERAND_LOG_LEVELS[1] == "info"
    assert "--loglevel=info" in args(render(), "external-secrets")
    assert OPERAND_LOG_LEVELS[4] == "debug"  # the guidelines' debug level


def test_operating_namespace_narrows_the_controller_and_disables_cluster_reconcilers() -> None:
    narrowed = args(render(operating_namespace="team-a"), "external-secrets")
    assert "--namespace=team-a" in narrowed
    assert "--enable-cluster-store-reconciler=false" in narrowed
    assert "--enable-cluster-external-secret-reconciler=false" in narrowed
    assert "--enable-cluster-push-secret-reconciler=false" in narrowed
    everywhere = args(render(), "external-secrets")
    assert not [arg for arg in everywhere if arg.startswith("--namespace")]
    assert "--enable-cluster-store-reconciler=true" in everywhere
    assert "--enable-cluster-external-secret-reconciler=true" in everywhere


def test_operating_namespace_moves_the_controllers_rights_into_a_role_there() -> None:
    state = render(namespace="eso", operating_namespace="team-a")
    kinds = {(obj["kind"], obj["metadata"]["name"]): obj for obj in state.objects()}
    assert ("ClusterRole", "external-secrets-controller") not in kinds
    assert ("ClusterRoleBinding", "external-secrets-controller") not in kinds
    role = kinds[("Role", "external-secrets-controller")]
    binding = kinds[("RoleBinding", "external-secrets-controller")]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "team-a"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "external-secrets",
                                    "namespace": "eso"}]
    granted = {(resource, verb) for rule in role["rules"] for resource in rule["resources"]
               for verb in rule["verbs"]}
    assert {("secrets", "get"), ("secrets", "create"), ("externalsecrets", "watch"),
            ("secretstores/status", "update"), ("generatorstates", "create")} <= granted
    # Nothing cluster-scoped: those would be granted cluster-wide by no Role anyway, and the
    # controller runs their reconcilers no more.
    assert not {resource for resource, _ in granted
                if resource.startswith(("cluster", "namespaces"))}
    # Cluster-wide, the controller keeps its leader election only (in its own namespace).
    bound = [obj for obj in state.objects() if obj["kind"] == "ClusterRoleBinding"]
    assert all(s["name"] != "external-secrets" for b in bound for s in b["subjects"])


def test_the_check_interval_and_namespace_reach_the_webhook_and_cert_controller() -> None:
    state = render(namespace="eso", webhook_check_interval="10m0s")
    webhook = args(state, "external-secrets-webhook")
    assert "--check-interval=10m0s" in webhook
    assert "--dns-name=external-secrets-webhook.eso.svc" in webhook
    cert_controller = args(state, "external-secrets-cert-controller")
    assert "--service-namespace=eso" in cert_controller
    assert "--secret-namespace=eso" in cert_controller
    for name in ("externalsecret-validate", "secretstore-validate"):
        for hook in find(state, "ValidatingWebhookConfiguration", name)["webhooks"]:
            assert hook["clientConfig"]["service"] == {
                "name": "external-secrets-webhook", "namespace": "eso",
                "path": hook["clientConfig"]["service"]["path"]}
    subjects = find(state, "ClusterRoleBinding", "external-secrets-controller")["subjects"]
    assert subjects == [{"kind": "ServiceAccount", "name": "external-secrets",
                         "namespace": "eso"}]


# --- cert-manager ---------------------------------------------------------------------------


def test_cert_manager_replaces_the_cert_controller_with_a_certificate() -> None:
    state = render(namespace="eso", cert_manager=CERT_MANAGER)
    assert not names(state) & CERT_CONTROLLER_OBJECTS
    assert "cert-controller" not in state.components
    certificate = find(state, "Certificate", "external-secrets-webhook")
    assert certificate["spec"] == {
        "commonName": "external-secrets-webhook",
        "dnsNames": ["external-secrets-webhook", "external-secrets-webhook.eso",
                     "external-secrets-webhook.eso.svc"],
        "issuerRef": {"name": "ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
        "duration": "8760h0m0s",
        "renewBefore": "30m0s",
        "secretName": "external-secrets-webhook-cm",
        # cert-manager labels the Secret it issues as the operator's (it goes with this).
        "secretTemplate": {"labels": certificate["metadata"]["labels"]},
    }
    volumes = find(state, "Deployment", "external-secrets-webhook")["spec"]["template"][
        "spec"]["volumes"]
    assert volumes == [{"name": "certs", "secret": {"secretName": "external-secrets-webhook-cm"}}]


def test_injector_annotations_go_on_both_webhook_configurations_only_when_asked() -> None:
    injected = render(namespace="eso", cert_manager=CERT_MANAGER.model_copy(
        update={"add_injector_annotations": True}))
    plain = render(cert_manager=CERT_MANAGER)
    for name in ("externalsecret-validate", "secretstore-validate"):
        assert find(injected, "ValidatingWebhookConfiguration", name)["metadata"][
            "annotations"] == {"cert-manager.io/inject-ca-from": "eso/external-secrets-webhook"}
        assert "annotations" not in find(plain, "ValidatingWebhookConfiguration",
                                         name)["metadata"]


def test_without_the_injector_the_operator_sets_the_issued_ca_on_every_webhook() -> None:
    # With the injector too: the CA it writes, so that the operator can bridge a CA change
    # (steps/ca_overlap.py). The cluster facts decide; the renderer sets what they give.
    ca = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0t"
    filled = render(cert_manager=CERT_MANAGER.model_copy(update={"ca_bundle": ca}))
    injected = render(cert_manager=CERT_MANAGER.model_copy(
        update={"ca_bundle": ca, "add_injector_annotations": True}))
    not_yet = render(cert_manager=CERT_MANAGER)
    built_in = render(cert_manager=CertManagerSettings())
    for name in ("externalsecret-validate", "secretstore-validate"):
        for set_by_us in (filled, injected):
            webhooks = find(set_by_us, "ValidatingWebhookConfiguration", name)["webhooks"]
            assert {w["clientConfig"].get("caBundle") for w in webhooks} == {ca}
        for other in (not_yet, built_in):  # someone else fills it: not ours to set
            webhooks = find(other, "ValidatingWebhookConfiguration", name)["webhooks"]
            assert all("caBundle" not in w["clientConfig"] for w in webhooks)


def test_the_built_in_cert_controller_serves_the_webhook_from_its_secret() -> None:
    state = render()
    volumes = find(state, "Deployment", "external-secrets-webhook")["spec"]["template"][
        "spec"]["volumes"]
    assert volumes == [{"name": "certs", "secret": {"secretName": "external-secrets-webhook"}}]
    secret = find(state, "Secret", "external-secrets-webhook")
    assert "data" not in secret
    assert secret["metadata"]["labels"]["external-secrets.io/component"] == "webhook"
    assert "Certificate" not in {kind for kind, _ in names(state)}


# --- bitwarden ------------------------------------------------------------------------------


def test_bitwarden_brings_its_objects_and_mounts_the_secret_ref() -> None:
    state = render(bitwarden=BitwardenSettings(enabled=True, tls_secret_name="bw-tls"),
                   images=BITWARDEN_IMAGES)
    assert names(state) >= BITWARDEN_OBJECTS
    assert ("Certificate", "bitwarden-tls-certs") not in names(state)
    pod = find(state, "Deployment", "bitwarden-sdk-server")["spec"]["template"]["spec"]
    assert pod["containers"][0]["image"] == "example.com/bitwarden:1"
    assert pod["volumes"][0]["secret"]["secretName"] == "bw-tls"
    assert not BITWARDEN_OBJECTS & names(render())


def test_bitwarden_without_secret_ref_gets_its_certificate_from_cert_manager() -> None:
    state = render(namespace="eso", cert_manager=CERT_MANAGER, images=BITWARDEN_IMAGES,
                   bitwarden=BitwardenSettings(enabled=True, tls_secret_name="bitwarden-tls-certs",
                                               issue_certificate=True))
    certificate = find(state, "Certificate", "bitwarden-tls-certs")
    assert certificate["spec"]["secretName"] == "bitwarden-tls-certs"
    assert certificate["spec"]["secretTemplate"] == {"labels": certificate["metadata"]["labels"]}
    assert certificate["spec"]["issuerRef"]["kind"] == "ClusterIssuer"
    # Both names a client may call the Service by (its template's comment names the short one).
    service = find(state, "Service", "bitwarden-sdk-server")["metadata"]["name"]
    assert {f"{service}.eso.svc", f"{service}.eso.svc.cluster.local"} <= set(
        certificate["spec"]["dnsNames"])
    pod = find(state, "Deployment", "bitwarden-sdk-server")["spec"]["template"]["spec"]
    assert pod["volumes"][0]["secret"]["secretName"] == "bitwarden-tls-certs"


# --- proxy ----------------------------------------------------------------------------------


IN_CLUSTER = "kubernetes.default.svc,.svc,.cluster.local,localhost,127.0.0.1"


def test_a_proxy_reaches_the_components_that_call_out_with_the_trusted_ca_bundle() -> None:
    state = render(bitwarden=BitwardenSettings(enabled=True, tls_secret_name="bw"),
                   images=BITWARDEN_IMAGES,
                   proxy=ProxySettings(http_proxy="http://p:1", no_proxy="vault.corp",
                                       api_server_addresses=("172.30.0.1",)))
    no_proxy = f"vault.corp,172.30.0.1,{IN_CLUSTER}"
    expected_env = [{"name": "HTTP_PROXY", "value": "http://p:1"},
                    {"name": "NO_PROXY", "value": no_proxy},
                    {"name": "http_proxy", "value": "http://p:1"},
                    {"name": "no_proxy", "value": no_proxy}]
    for name in ("external-secrets", "bitwarden-sdk-server"):
        pod = find(state, "Deployment", name)["spec"]["template"]["spec"]
        (container,) = pod["containers"]
        assert container["env"] == expected_env
        assert {"name": "trusted-ca-bundle", "mountPath": "/etc/pki/tls/certs",
                "readOnly": True} in container["volumeMounts"]
        assert {"name": "trusted-ca-bundle",
                "configMap": {"name": "external-secrets-trusted-ca-bundle"}} in pod["volumes"]
    configmap = find(state, "ConfigMap", "external-secrets-trusted-ca-bundle")
    assert configmap["metadata"]["labels"]["config.openshift.io/inject-trusted-cabundle"] == \
        "true"
    assert "data" not in configmap


@pytest.mark.parametrize("cert_manager", [CertManagerSettings(), CERT_MANAGER])
def test_the_webhook_and_the_cert_controller_never_get_the_proxy(
        cert_manager: CertManagerSettings) -> None:
    """They only ever call the API server: no proxy variables, no proxy CA bundle."""
    state = render(cert_manager=cert_manager, proxy=ProxySettings(
        http_proxy="h", https_proxy="s", no_proxy="n", api_server_addresses=("10.96.0.1",)))
    without = {"external-secrets-webhook"} | (set() if cert_manager.enabled
                                              else {"external-secrets-cert-controller"})
    for deployment in deployments(state):
        if deployment["metadata"]["name"] not in without:
            continue
        without.remove(deployment["metadata"]["name"])
        pod = deployment["spec"]["template"]["spec"]
        for container in pod["containers"]:
            assert "env" not in container
            assert all(m["name"] != "trusted-ca-bundle"
                       for m in container.get("volumeMounts", []))
        assert all(volume["name"] != "trusted-ca-bundle" for volume in pod.get("volumes", []))
    assert not without


def test_all_six_proxy_variables_are_set_when_all_values_are() -> None:
    state = render(proxy=ProxySettings(http_proxy="h", https_proxy="s", no_proxy="n"))
    (container,) = find(state, "Deployment", "external-secrets")["spec"]["template"]["spec"][
        "containers"]
    assert [variable["name"] for variable in container["env"]] == [
        "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"]


@pytest.mark.parametrize(("admin", "addresses", "expected"), [
    # Nothing from the administrator: the API server's address, then the in-cluster names.
    (None, ("172.30.0.1",), f"172.30.0.1,{IN_CLUSTER}"),
    ("", (), IN_CLUSTER),
    # The administrator's entries first, in their order, as written; what they already
    # list (in any case, with blanks around) is not repeated.
    (".cluster.local,.svc,10.0.0.0/16,127.0.0.1,localhost", ("172.30.0.1",),
     ".cluster.local,.svc,10.0.0.0/16,127.0.0.1,localhost,172.30.0.1,kubernetes.default.svc"),
    (" vault.corp , ,Kubernetes.Default.SVC,vault.corp,172.30.0.1", ("172.30.0.1",),
     "vault.corp,Kubernetes.Default.SVC,172.30.0.1,.svc,.cluster.local,localhost,127.0.0.1"),
    # Dual-stack: both ClusterIPs of the kubernetes Service.
    ("*.corp", ("10.96.0.1", "fd00:10:96::1"),
     f"*.corp,10.96.0.1,fd00:10:96::1,{IN_CLUSTER}"),
])
def test_no_proxy_merges_the_administrators_entries_with_what_stays_in_the_cluster(
        admin: str | None, addresses: tuple[str, ...], expected: str) -> None:
    proxy = ProxySettings(http_proxy="http://p:1", no_proxy=admin,
                          api_server_addresses=addresses)
    assert proxy.effective_no_proxy == expected
    assert merged_no_proxy(admin, (*addresses, *IN_CLUSTER_NO_PROXY)) == expected


def test_the_api_server_address_is_a_fact_added_only_with_a_proxy() -> None:
    plain = EffectiveConfig()
    assert with_api_server_addresses(plain, ("10.96.0.1",)) is plain
    proxied = with_api_server_addresses(EffectiveConfig(proxy=ProxySettings(https_proxy="s")),
                                        ("10.96.0.1",))
    assert proxied.proxy is not None
    assert proxied.proxy.api_server_addresses == ("10.96.0.1",)
    assert proxied.proxy.no_proxy is None  # the administrator's value stays as given


def test_the_environments_proxy_gets_the_same_no_proxy() -> None:
    """OLM's copy of the cluster-wide proxy (lowest precedence) is merged the same way."""
    config = effective_config(None, None, OperatorEnvironment.from_environ(
        {"HTTPS_PROXY": "http://cluster-proxy:3128", "NO_PROXY": ".svc,172.30.0.0/16"}))
    config = with_api_server_addresses(config, ("172.30.0.1",))
    (container,) = find(render_operand(config), "Deployment", "external-secrets")[
        "spec"]["template"]["spec"]["containers"]
    env = {variable["name"]: variable["value"] for variable in container["env"]}
    assert env["NO_PROXY"] == (".svc,172.30.0.0/16,172.30.0.1,kubernetes.default.svc,"
                               ".cluster.local,localhost,127.0.0.1")


def test_without_a_proxy_nothing_of_it_is_rendered() -> None:
    state = render()
    assert "proxy-ca" not in state.components
    for container in containers(state):
        assert "env" not in container
        assert all(mount["name"] != "trusted-ca-bundle"
                   for mount in container.get("volumeMounts", []))
    for deployment in deployments(state):
        assert all(volume["name"] != "trusted-ca-bundle"
                   for volume in deployment["spec"]["template"]["spec"].get("volumes", []))


# --- scheduling, resources, security, images -------------------------------------------------


def test_resources_and_scheduling_reach_every_deployment() -> None:
    resources = {"requests": {"cpu": "10m"}, "limits": {"memory": "1Gi"}}
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 1, "preference": {"matchExpressions": [
            {"key": "zone", "operator": "In", "values": ["a"]}]}}]}}
    tolerations = [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}]
    state = render(resources=resources, affinity=affinity, tolerations=tolerations,
                   node_selector={"disk": "ssd"}, cert_manager=CERT_MANAGER,
                   bitwarden=BitwardenSettings(enabled=True, tls_secret_name="bw"),
                   images=BITWARDEN_IMAGES)
    assert len(deployments(state)) == 3
    for deployment in deployments(state):
        pod = deployment["spec"]["template"]["spec"]
        assert (pod["affinity"], pod["tolerations"], pod["nodeSelector"]) == (
            affinity, tolerations, {"disk": "ssd"})
    for container in containers(state):
        assert container["resources"] == resources


def test_every_container_runs_restricted_and_without_a_fixed_user() -> None:
    for container in containers(render(proxy=ProxySettings(http_proxy="h"))):
        assert container["securityContext"] == RESTRICTED_CONTAINER_SECURITY_CONTEXT
        assert "runAsUser" not in container["securityContext"]


def test_images_come_from_the_config() -> None:
    state = render(images=Images(external_secrets="mirror/eso@sha256:abc"))
    assert {container["image"] for container in containers(state)} == {"mirror/eso@sha256:abc"}


def test_a_spec_renders_through_effective_config() -> None:
    spec = ExternalSecretsConfigSpec.model_validate(
        {"appConfig": {"logLevel": 4, "operatingNamespace": "apps"}})
    state = render_operand(effective_config(spec, None, OperatorEnvironment()))
    assert "--loglevel=debug" in args(state, "external-secrets")
    assert "--namespace=apps" in args(state, "external-secrets")


# --- template rules -------------------------------------------------------------------------


def test_a_template_cannot_print_a_value_without_tojson() -> None:
    with pytest.raises(TemplateError, match="tojson"):
        environment().from_string("name: {{ name }}").render(name="x")
    with pytest.raises(TemplateError, match="tojson"):
        environment().from_string("name: {{ 'x' }}").render()
    assert environment().from_string("name: {{ name | tojson }}").render(name="x") == \
        'name: "x"'


def test_undefined_template_values_are_errors() -> None:
    with pytest.raises(Exception, match="undefined"):
        environment().from_string("name: {{ missing | tojson }}").render()


@pytest.mark.parametrize("component", ["namespace", "controller", "webhook", "cert-controller",
                                       "webhook-certificate", "bitwarden",
                                       "bitwarden-certificate", "network-policy", "proxy-ca"])
def test_every_template_renders_one_object_of_its_declared_kind(component: str) -> None:
    config = EffectiveConfig(cert_manager=CERT_MANAGER, images=BITWARDEN_IMAGES,
                             bitwarden=BitwardenSettings(enabled=True, tls_secret_name="bw",
                                                         issue_certificate=True),
                             proxy=ProxySettings(http_proxy="h"))
    for name in component_templates(component):
        obj = render_template(name, template_context(config, component))
        assert (obj["apiVersion"], obj["kind"]) in template_kinds()
        assert obj["metadata"]["labels"]["app.kubernetes.io/managed-by"] == \
            "external-secrets-operator"


# --- provider egress --------------------------------------------------------------------------

VAULT = {"to": [{"ipBlock": {"cidr": "10.0.5.17/32"}}], "ports": [{"protocol": "TCP",
                                                                   "port": 8200}]}


def egress_policies(spec: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """NetworkPolicies with an Egress-only type (the provider egress ones), by name."""
    state = render_operand(effective_config(ExternalSecretsConfigSpec.model_validate(spec), None,
                                            OperatorEnvironment()))
    return {obj["metadata"]["name"]: obj for obj in state.objects()
            if obj["kind"] == "NetworkPolicy" and obj["spec"]["policyTypes"] == ["Egress"]
            and obj["metadata"]["name"] not in ("allow-to-dns",
                                                "allow-main-controller-egress-to-bitwarden-server")}


BITWARDEN_ON = {"bitwardenSecretManagerProvider": {"enabled": "true", "secretRef": {"name": "t"}}}


def test_by_default_the_controller_and_bitwarden_may_open_any_egress_connection() -> None:
    policies = egress_policies({"appConfig": BITWARDEN_ON})
    assert set(policies) == {"allow-provider-egress-for-main-controller",
                             "allow-provider-egress-for-bitwarden-server"}
    for name, app in (("allow-provider-egress-for-main-controller", "external-secrets"),
                      ("allow-provider-egress-for-bitwarden-server", "bitwarden-sdk-server")):
        policy = policies[name]
        assert policy["spec"]["egress"] == [{}]  # one rule matching every destination
        assert policy["spec"]["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == app
        assert policy["metadata"]["labels"]["app.kubernetes.io/name"] == app
    assert set(egress_policies({})) == {"allow-provider-egress-for-main-controller"}


def test_ingress_stays_denied_except_webhook_metrics_and_bitwarden_from_the_controller() -> None:
    state = render_operand(effective_config(
        ExternalSecretsConfigSpec.model_validate({"appConfig": BITWARDEN_ON}), None,
        OperatorEnvironment()))
    ingress = {obj["metadata"]["name"]: obj["spec"].get("ingress")
               for obj in state.objects() if obj["kind"] == "NetworkPolicy"
               and "Ingress" in obj["spec"]["policyTypes"]}
    ports = {name: sorted(port["port"] for rule in rules or [] for port in rule["ports"])
             for name, rules in ingress.items()}
    assert ports == {"deny-all-traffic": [],
                     "allow-api-server-egress-for-main-controller": [8080],
                     "allow-api-server-egress-for-webhook": [8080, 10250],
                     "allow-api-server-egress-for-cert-controller": [8080],
                     "allow-api-server-egress-for-bitwarden-server": [9998]}
    bitwarden = ingress["allow-api-server-egress-for-bitwarden-server"]
    assert bitwarden is not None
    assert bitwarden[0]["from"][0]["podSelector"]["matchLabels"][
        "app.kubernetes.io/name"] == "external-secrets"


def test_declared_policies_replace_the_default_of_their_component_only() -> None:
    spec = {"appConfig": BITWARDEN_ON, "controllerConfig": {"networkPolicies": [
        {"name": "allow-vault", "componentName": "ExternalSecretsCoreController",
         "egress": [VAULT]},
        {"name": "allow-vault-dr", "componentName": "ExternalSecretsCoreController",
         "egress": []}]}}
    policies = egress_policies(spec)
    assert set(policies) == {"allow-vault", "allow-vault-dr",
                             "allow-provider-egress-for-bitwarden-server"}
    assert policies["allow-vault"]["spec"]["egress"] == [VAULT]
    assert policies["allow-vault-dr"]["spec"]["egress"] == []
    assert policies["allow-vault"]["spec"]["podSelector"]["matchLabels"][
        "app.kubernetes.io/name"] == "external-secrets"


def test_bitwarden_policies_wait_until_bitwarden_is_enabled() -> None:
    declared = {"controllerConfig": {"networkPolicies": [
        {"name": "allow-bitwarden-cloud", "componentName": "BitwardenSDKServer",
         "egress": [{"ports": [{"port": 443}]}]}]}}
    assert set(egress_policies(declared)) == {"allow-provider-egress-for-main-controller"}
    enabled = egress_policies({**declared, "appConfig": BITWARDEN_ON})
    assert set(enabled) == {"allow-provider-egress-for-main-controller", "allow-bitwarden-cloud"}
    assert enabled["allow-bitwarden-cloud"]["spec"]["podSelector"]["matchLabels"][
        "app.kubernetes.io/name"] == "bitwarden-sdk-server"


def test_the_operators_own_policy_names_are_the_reserved_ones() -> None:
    state = render_operand(effective_config(ExternalSecretsConfigSpec.model_validate(
        {"appConfig": BITWARDEN_ON}), None, OperatorEnvironment()))
    with_cert_manager = render_operand(EffectiveConfig(
        cert_manager=CertManagerSettings(enabled=True, issuer_name="ca")))
    rendered = {obj["metadata"]["name"] for s in (state, with_cert_manager)
                for obj in s.objects() if obj["kind"] == "NetworkPolicy"}
    assert rendered == set(OPERATOR_NETWORK_POLICIES)


# --- content loaded once: a rotation rolls exactly the pods that read it --------------------


def _pod_annotations(config: EffectiveConfig) -> dict[str, dict[str, str]]:
    """Each Deployment's pod annotations but the SCC pin, which every pod carries."""
    found = {obj["metadata"]["name"]: dict(obj["spec"]["template"]["metadata"]["annotations"])
             for obj in render_operand(config).objects() if obj["kind"] == "Deployment"}
    for pod_annotations in found.values():
        assert pod_annotations.pop("openshift.io/required-scc") == "restricted-v2"
    return found


def test_a_rotated_source_rolls_only_the_pods_that_load_it_once() -> None:
    base = EffectiveConfig(
        bitwarden=BitwardenSettings(enabled=True, tls_secret_name="bw"), images=BITWARDEN_IMAGES,
        trusted_ca=TrustedCA(config_map_name="ca"),
        loaded_once={"trusted-ca": "a", "bitwarden-tls": "b"})
    before = _pod_annotations(base)
    assert set(before["external-secrets"]) == {LOADED_CONTENT_ANNOTATION}
    assert set(before["bitwarden-sdk-server"]) == {LOADED_CONTENT_ANNOTATION}
    # The webhook reloads its certificate itself; the cert-controller loads nothing once.
    assert before["external-secrets-webhook"] == {}
    assert before["external-secrets-cert-controller"] == {}

    rotated_ca = _pod_annotations(base.model_copy(update={
        "loaded_once": {"trusted-ca": "a2", "bitwarden-tls": "b"}}))
    assert rotated_ca["external-secrets"] != before["external-secrets"]
    assert rotated_ca["bitwarden-sdk-server"] != before["bitwarden-sdk-server"]
    assert rotated_ca["external-secrets-webhook"] == {}

    renewed = _pod_annotations(base.model_copy(update={
        "loaded_once": {"trusted-ca": "a", "bitwarden-tls": "b2"}}))
    assert renewed["external-secrets"] == before["external-secrets"]
    assert renewed["bitwarden-sdk-server"] != before["bitwarden-sdk-server"]


def test_without_loaded_content_no_annotation_appears() -> None:
    assert all(not annotations for annotations in _pod_annotations(EffectiveConfig()).values())
