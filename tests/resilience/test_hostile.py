"""Hostile input: specs that are wrong, extreme or malicious.

Each ends in an admission rejection (the API server's message is asserted) or in a Degraded
condition whose message names the field. Throughout, one operator process (its own
ServiceAccount) runs; at the end it is still the same process, a later good spec becomes
Ready, and every managed object has the uid it had before the first hostile spec.

The tests of this module run in order over one ExternalSecretsConfig (a singleton): the
module fixture installs a good spec first; each Degraded case is followed by the good spec
again (Ready), so every Degraded condition belongs to exactly one case.
"""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from manager.client.kube import ApiError, Kube
from tests.integration.conftest import ESC_API, ESM_PATH, eventually, managed_objects
from tests.integration.test_controller_rbac import OPERATOR_NAMESPACE
from tests.resilience.conftest import (
    AuditLog,
    OperatorProcess,
    assert_no_crash,
    delete_esc,
    replace_spec,
    resource_of,
    set_cert_manager,
    uids,
    wait_condition,
    wait_quiet,
    writes,
)

NAMESPACE = "eso-rs-hostile"
GOOD = {"controllerConfig": {"namespace": NAMESPACE, "labels": {"resilience": "hostile"}}}
TLS_WITHOUT_CA = "tls-without-ca"  # a kubernetes.io/tls Secret: no ca.crt
TEAM = "eso-rs-hostile-team"  # holds a Role named like the controller's, created by someone else


def esc_spec(labels: dict[str, str] | None = None, **app_config: Any) -> dict[str, Any]:
    """The good spec with other labels and/or appConfig fields (namespace kept: immutable)."""
    spec = copy.deepcopy(GOOD)
    if labels is not None:
        spec["controllerConfig"]["labels"] = labels
    if app_config:
        spec["appConfig"] = app_config
    return spec


def esc_spec_with_policies(policies: list[dict[str, Any]]) -> dict[str, Any]:
    spec = copy.deepcopy(GOOD)
    spec["controllerConfig"]["networkPolicies"] = policies
    return spec


@dataclass(frozen=True)
class Case:
    """One hostile spec and how it must end."""

    id: str
    esc: dict[str, Any] | None = None  # the whole ESC spec
    esm: dict[str, Any] | None = None  # the whole ESM spec
    rejected: str = ""  # a fragment of the API server's message
    degraded: str = ""  # a fragment of the Degraded message: the field
    reason: str | None = None  # the Degraded condition's reason
    query: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] | None = None  # a metadata merge patch instead of a spec
    name: str = "cluster"  # another name: a create, not an update


LABEL_VALUE = "label values must be empty or consist of alphanumeric characters"
TOO_MANY = "must have at most"

REJECTED = [
    Case("too-many-labels", esc_spec({f"k{i}": "v" for i in range(21)}),
         rejected=f"{TOO_MANY} 20 items"),
    Case("reserved-label-app", esc_spec({"app": "not-yours"}),
         rejected="are reserved for the operator"),
    Case("reserved-label-managed-by",
         esc_spec({"app.kubernetes.io/managed-by": "someone-else"}),
         rejected="are reserved for the operator"),
    Case("yaml-breaking-label-value", esc_spec({"k": "a: b\n- c: &x *x"}),
         rejected=LABEL_VALUE),
    Case("template-label-value", esc_spec({"k": "{{ .Values.secret }}"}), rejected=LABEL_VALUE),
    Case("unicode-label-value", esc_spec({"k": "p\u00e4ss\u202ewd\u200b"}), rejected=LABEL_VALUE),
    Case("nul-label-value", esc_spec({"k": "a\u0000b"}), rejected=LABEL_VALUE),
    Case("oversized-label-value", esc_spec({"k": "v" * 64}),
         rejected="may not be more than 63"),
    Case("oversized-label-key", esc_spec({"k" * 300: "v"}),
         rejected="label keys must be an optional DNS subdomain prefix"),
    Case("oversized-http-proxy", esc_spec(proxy={"httpProxy": "http://" + "a" * 2048}),
         rejected="may not be more than 2048"),
    Case("oversized-no-proxy", esc_spec(proxy={"noProxy": "a," * 2049}),
         rejected="may not be more than 4096"),
    Case("proxy-without-scheme", esc_spec(proxy={"httpProxy": "proxy.example.com:3128"}),
         rejected="must be a URL with a scheme (http, https or socks5) and a host"),
    Case("proxy-without-host", esc_spec(proxy={"httpsProxy": "https://"}),
         rejected="must be a URL with a scheme (http, https or socks5) and a host"),
    Case("esm-proxy-not-a-url", esm={"globalConfig": {"proxy": {"httpProxy": "{{ proxy }}"}}},
         rejected="must be a URL with a scheme (http, https or socks5) and a host"),
    Case("unknown-field", esc_spec(hostile={"enabled": True}),
         query={"fieldValidation": "Strict"}, rejected='unknown field "spec.appConfig.hostile"'),
    Case("log-level-out-of-range", esc_spec(logLevel=99),
         rejected="should be less than or equal to 5"),
    Case("log-level-shell-string", esc_spec(logLevel="5; rm -rf /"),
         rejected="must be of type integer"),
    Case("bitwarden-enabled-not-a-boolean",
         esc_spec(bitwardenSecretManagerProvider={"enabled": "yes",
                                                  "secretRef": {"name": "tls"}}),
         rejected='Unsupported value: "yes"'),
    Case("conflicting-injector-without-cert-manager",
         esc_spec(certManagerConfig={"enabled": "false", "addInjectorAnnotations": "true"}),
         rejected="addInjectorAnnotations can only be set when enabled is set to 'true'"),
    Case("conflicting-bitwarden-without-tls-source",
         esc_spec(bitwardenSecretManagerProvider={"enabled": "true"}),
         rejected="secretRef or certManagerConfig must be configured"),
    Case("issuer-of-another-kind",
         esc_spec(certManagerConfig={"enabled": "true",
                                     "issuerRef": {"name": "x", "kind": "Secret"}}),
         rejected="kind must be either 'Issuer' or 'ClusterIssuer'"),
    Case("issuer-of-another-group",
         esc_spec(certManagerConfig={"enabled": "true",
                                     "issuerRef": {"name": "x", "kind": "Issuer",
                                                   "group": "evil.example.com"}}),
         rejected="group must be 'cert-manager.io'"),
    Case("secret-ref-path-traversal",
         esc_spec(bitwardenSecretManagerProvider={"enabled": "true",
                                                  "secretRef": {"name": "../../etc/passwd"}}),
         rejected="must be a valid object name"),
    Case("too-many-tolerations",
         esc_spec(tolerations=[{"key": f"k{i}", "operator": "Exists"} for i in range(11)]),
         rejected=f"{TOO_MANY} 10 items"),
    Case("too-many-node-selector-entries",
         esc_spec(nodeSelector={f"k{i}": "v" for i in range(11)}),
         rejected=f"{TOO_MANY} 10 items"),
    Case("quantity-not-a-number", esc_spec(resources={"limits": {"cpu": "lots"}}),
         rejected="spec.appConfig.resources.limits.cpu in body should match"),
    Case("network-policy-of-the-operator",
         esc_spec_with_policies([{"name": "deny-all-traffic",
                                  "componentName": "ExternalSecretsCoreController",
                                  "egress": [{}]}]),
         rejected="name must not be the name of a NetworkPolicy the operator renders itself"),
    Case("network-policy-name-twice",
         esc_spec_with_policies([{"name": "p", "componentName": component, "egress": []}
                                 for component in ("ExternalSecretsCoreController",
                                                   "BitwardenSDKServer")]),
         rejected="names in networkPolicies must be unique"),
    Case("namespace-moved", {"controllerConfig": {"namespace": "kube-system"}},
         rejected="namespace is immutable once set"),
    Case("adopt-not-a-boolean", {"controllerConfig": {"namespace": NAMESPACE,
                                                      "adoptExistingObjects": "yes"}},
         rejected='Unsupported value: "yes"'),
    Case("namespace-system", {"controllerConfig": {"namespace": "openshift-config"}},
         rejected="spec.controllerConfig.namespace must not be a shared or system namespace"),
    Case("operating-namespace-path", esc_spec(operatingNamespace="../kube-system"),
         rejected="must be a valid namespace name"),
    Case("check-interval-shell", esc_spec(webhookConfig={"certificateCheckInterval": "$(reboot)"}),
         rejected="must be a duration"),
    Case("webhook-lifetimes-contradict",
         esc_spec(webhookConfig={"certificateCheckInterval": "1h"},
                  certManagerConfig={"enabled": "true", "issuerRef": {"name": "ca"}}),
         rejected="certManagerConfig.certificateRenewBefore must be at least twice "
                  "webhookConfig.certificateCheckInterval"),
    Case("budget-blocks-every-drain",
         {"controllerConfig": {**GOOD["controllerConfig"], "componentConfigs": [
             {"componentName": "Webhook", "deploymentConfigs": {
                 "manageReplicas": "false", "podDisruptionBudget": {"minAvailable": 1}}}]}},
         rejected="podDisruptionBudget.minAvailable cannot be above 0 when manageReplicas is "
                  "'false'"),
    Case("oversized-annotations", metadata={"annotations": {"hostile": "x" * 300_000}},
         rejected="metadata.annotations: Too long: may not be more than 262144 bytes"),
    Case("second-singleton", GOOD, name="evil",
         rejected="ExternalSecretsConfig is a singleton"),
    Case("esm-too-many-labels", esm={"globalConfig": {"labels": {f"k{i}": "v"
                                                                 for i in range(21)}}},
         rejected=f"{TOO_MANY} 20 items"),
    Case("esm-feature-not-a-boolean", esm={"features": [{"name": "x", "enabled": "maybe"}]},
         rejected='Unsupported value: "maybe"'),
]

DEGRADED = [
    Case("requests-above-limits",
         esc_spec(resources={"limits": {"cpu": "1"}, "requests": {"cpu": "2"}}),
         degraded="spec.appConfig.resources.requests.cpu", reason="InvalidConfiguration"),
    Case("negative-quantity", esc_spec(resources={"limits": {"memory": "-1Gi"}}),
         degraded="spec.appConfig.resources.limits.memory", reason="InvalidConfiguration"),
    Case("unknown-resource", esc_spec(resources={"limits": {"gpus": "1"}}),
         degraded="spec.appConfig.resources.limits.gpus", reason="InvalidConfiguration"),
    Case("toleration-exists-with-value",
         esc_spec(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
         degraded="spec.appConfig.tolerations[0].value", reason="InvalidConfiguration"),
    Case("toleration-seconds-without-no-execute",
         esc_spec(tolerations=[{"key": "k", "operator": "Exists", "effect": "NoSchedule",
                                "tolerationSeconds": 10}]),
         degraded="spec.appConfig.tolerations[0].tolerationSeconds",
         reason="InvalidConfiguration"),
    Case("affinity-without-terms",
         esc_spec(affinity={"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
             "nodeSelectorTerms": []}}}),
         degraded="spec.appConfig.affinity.nodeAffinity", reason="InvalidConfiguration"),
    Case("affinity-topology-key-injection",
         esc_spec(affinity={"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [
             {"topologyKey": "zone\nevil: true", "labelSelector": {}}]}}),
         degraded="topologyKey", reason="InvalidConfiguration"),
    Case("check-interval-zero", esc_spec(webhookConfig={"certificateCheckInterval": "0s"}),
         degraded="spec.appConfig.webhookConfig.certificateCheckInterval",
         reason="InvalidConfiguration"),
    Case("missing-bitwarden-secret",
         esc_spec(bitwardenSecretManagerProvider={"enabled": "true",
                                                  "secretRef": {"name": "no-such-secret"}}),
         degraded="spec.appConfig.bitwardenSecretManagerProvider.secretRef.name",
         reason="BitwardenSecretNotFound"),
    Case("bitwarden-secret-without-ca",
         esc_spec(bitwardenSecretManagerProvider={"enabled": "true",
                                                  "secretRef": {"name": TLS_WITHOUT_CA}}),
         degraded=f'Secret "{TLS_WITHOUT_CA}" in namespace "{NAMESPACE}" has no ca.crt',
         reason="BitwardenSecretInvalid"),
    Case("operating-namespace-missing", esc_spec(operatingNamespace="no-such-namespace"),
         degraded='spec.appConfig.operatingNamespace: namespace "no-such-namespace" does not '
                  "exist", reason="OperatingNamespaceNotFound"),
    Case("object-of-someone-else", esc_spec(operatingNamespace=TEAM),
         degraded=f"Role {TEAM}/external-secrets-controller exists and is managed by field "
                  "managers team-admin", reason="ObjectNotOwned"),
    Case("network-policy-invalid-cidr",
         esc_spec_with_policies([{"name": "allow-vault",
                                  "componentName": "ExternalSecretsCoreController",
                                  "egress": [{"to": [{"ipBlock": {"cidr": "10.0.0.0/33"}}]}]}]),
         degraded=f"apply NetworkPolicy {NAMESPACE}/allow-vault", reason="ApplyRejected"),
    Case("esm-requests-above-limits",
         esm={"globalConfig": {"resources": {"limits": {"memory": "1Gi"},
                                             "requests": {"memory": "2Gi"}}}},
         degraded="ExternalSecretsManager cluster spec.globalConfig.resources.requests.memory",
         reason="InvalidGlobalConfig"),
    Case("esm-toleration-exists-with-value",
         esm={"globalConfig": {"tolerations": [{"key": "k", "operator": "Exists",
                                                "value": "{{ .Values }}"}]}},
         degraded="spec.globalConfig.tolerations[0].value", reason="InvalidGlobalConfig"),
]


@dataclass
class Hostile:
    kube: Kube
    operator: OperatorProcess
    uids: dict[Any, str]
    audit: AuditLog

    async def submit(self, case: Case) -> None:
        if case.name != "cluster":
            await self.kube.request(
                "POST", ESC_API, query=case.query,
                body={"apiVersion": "operator.openshift.io/v1alpha1",
                      "kind": "ExternalSecretsConfig", "metadata": {"name": case.name},
                      "spec": case.esc})
        elif case.metadata is not None:
            await self.kube.merge_patch(f"{ESC_API}/cluster", {"metadata": case.metadata},
                                        field_manager="hostile")
        elif case.esm is not None:
            await self.kube.request(
                "PATCH", ESM_PATH, query=case.query,
                body=[{"op": "add", "path": "/spec", "value": case.esm}],
                content_type="application/json-patch+json")
        else:
            await self.kube.request(
                "PATCH", f"{ESC_API}/cluster", query=case.query,
                body=[{"op": "add", "path": "/spec", "value": case.esc}],
                content_type="application/json-patch+json")

    async def restore(self) -> None:
        await replace_spec(self.kube, ESM_PATH, {})
        await replace_spec(self.kube, f"{ESC_API}/cluster", GOOD)
        await wait_condition(self.kube, "Ready", "True")


async def reset_esm(kube: Kube) -> None:
    if await kube.get(ESM_PATH) is not None:
        await replace_spec(kube, ESM_PATH, {})


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def hostile(kube: Kube, operator_kubeconfig: Path, audit: AuditLog,
                  tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Hostile]:
    """One operator and a Ready installation of the good spec, for the whole module."""
    await delete_esc(kube)
    await reset_esm(kube)
    log = tmp_path_factory.mktemp("hostile") / "operator.log"
    operator = OperatorProcess(operator_kubeconfig, log).start()
    try:
        await operator.wait_started()
        await kube.create(ESC_API, {"apiVersion": "operator.openshift.io/v1alpha1",
                                    "kind": "ExternalSecretsConfig",
                                    "metadata": {"name": "cluster"}, "spec": GOOD},
                          field_manager="hostile")
        await wait_condition(kube, "Ready", "True")
        await kube.apply(f"/api/v1/namespaces/{TEAM}", {
            "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": TEAM}},
            field_manager="hostile")
        await kube.apply(
            f"/apis/rbac.authorization.k8s.io/v1/namespaces/{TEAM}/roles/"
            "external-secrets-controller",
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
             "metadata": {"name": "external-secrets-controller", "namespace": TEAM},
             "rules": []}, field_manager="team-admin")
        # Empty values may stay: preflight refuses the Secret for its missing ca.crt, so
        # bitwarden-sdk-server's Deployment is held back and nothing ever serves them.
        await kube.apply(f"/api/v1/namespaces/{NAMESPACE}/secrets/{TLS_WITHOUT_CA}",
                         {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                          "metadata": {"name": TLS_WITHOUT_CA, "namespace": NAMESPACE},
                          "data": {"tls.crt": "", "tls.key": ""}}, field_manager="hostile")
        await wait_quiet(audit)
        yield Hostile(kube, operator, await uids(kube, NAMESPACE), audit)
    finally:
        operator.stop()
        await delete_esc(kube)
        await reset_esm(kube)
    assert_no_crash(operator)


@pytest.mark.parametrize("case", REJECTED, ids=[case.id for case in REJECTED])
async def test_rejected_at_admission(hostile: Hostile, case: Case) -> None:
    before = await hostile.kube.request("GET", f"{ESC_API}/cluster")
    with pytest.raises(ApiError) as caught:
        await hostile.submit(case)
    assert caught.value.status in (400, 413, 422), caught.value
    assert case.rejected in caught.value.message, caught.value.message
    after = await hostile.kube.request("GET", f"{ESC_API}/cluster")
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert hostile.operator.alive


@pytest.mark.parametrize("case", DEGRADED, ids=[case.id for case in DEGRADED])
async def test_degraded_with_the_field_named(hostile: Hostile, case: Case) -> None:
    await hostile.submit(case)
    degraded = await wait_condition(hostile.kube, "Degraded", "True", contains=case.degraded,
                                    reason=case.reason)
    ready = await wait_condition(hostile.kube, "Ready", "False")
    assert ready["message"] == degraded["message"]
    assert hostile.operator.alive
    await hostile.restore()


async def test_values_are_data_not_markup(hostile: Hostile) -> None:
    """Strings the spec may carry verbatim (proxy settings) reach the Deployment as exactly
    those strings (noProxy: its entries, then the operator's): template and YAML syntax in
    them neither breaks nor injects anything."""
    proxy = {"httpProxy": "http://user:p%40ss@proxy.invalid:3128/{{ .Values }}",
             "httpsProxy": "http://proxy.invalid:3128/#: &anchor *alias !!python/object",
             "noProxy": "{% raw %}'\",|>-[]{}"}
    await replace_spec(hostile.kube, f"{ESC_API}/cluster", esc_spec(proxy=proxy))
    await wait_condition(hostile.kube, "Ready", "True")

    async def verbatim() -> None:
        found = await managed_objects(hostile.kube, NAMESPACE)
        deployment = found[("Deployment", NAMESPACE, "external-secrets")]
        container = deployment["spec"]["template"]["spec"]["containers"][0]
        env = {e["name"]: e.get("value") for e in container.get("env") or []}
        assert env["HTTP_PROXY"] == proxy["httpProxy"], env
        assert env["HTTPS_PROXY"] == proxy["httpsProxy"], env
        # The administrator's entries first, as written, then what stays in the cluster.
        assert env["NO_PROXY"].startswith(proxy["noProxy"] + ","), env
        assert {".svc", "kubernetes.default.svc"} <= set(env["NO_PROXY"].split(",")), env
        assert set(container) <= {"name", "image", "imagePullPolicy", "args", "env", "ports",
                                  "resources", "securityContext", "volumeMounts",
                                  "livenessProbe", "readinessProbe", "startupProbe",
                                  "terminationMessagePath", "terminationMessagePolicy"}

    await eventually(verbatim)
    await hostile.restore()


async def test_the_operators_own_namespace_is_refused_before_any_write(hostile: Hostile) -> None:
    """CEL cannot know where the operator runs (here: POD_NAMESPACE); a pass that resolves to
    that namespace writes nothing but status. The ESC is created again (namespace is
    immutable), then the good spec comes back."""
    await delete_esc(hostile.kube)
    start = hostile.audit.mark()
    await hostile.kube.create(ESC_API, {
        "apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
        "metadata": {"name": "cluster"},
        "spec": {"controllerConfig": {"namespace": OPERATOR_NAMESPACE}}},
        field_manager="hostile")
    degraded = await wait_condition(hostile.kube, "Degraded", "True",
                                    contains="spec.controllerConfig.namespace",
                                    reason="InvalidConfiguration")
    assert "the namespace the operator itself runs in" in degraded["whole"]
    await wait_quiet(hostile.audit)
    operand_writes = [(e["verb"], resource_of(e)) for e in writes(hostile.audit.entries(start))
                      if resource_of(e)[0] != "operator.openshift.io"
                      and resource_of(e)[1] != "events"]
    assert operand_writes == []
    ours = set(await managed_objects(hostile.kube, OPERATOR_NAMESPACE))
    assert {key for key in ours if OPERATOR_NAMESPACE in key} == set()
    await delete_esc(hostile.kube)
    await hostile.kube.create(ESC_API, {"apiVersion": "operator.openshift.io/v1alpha1",
                                        "kind": "ExternalSecretsConfig",
                                        "metadata": {"name": "cluster"}, "spec": GOOD},
                              field_manager="hostile")
    await wait_condition(hostile.kube, "Ready", "True")
    assert hostile.operator.alive


# --- references to what does not exist (cert-manager, its Issuer) ---------------------------

ISSUER = {"enabled": "true", "issuerRef": {"name": "no-such-issuer", "kind": "ClusterIssuer"}}


async def test_cert_manager_requested_but_not_installed(hostile: Hostile, crd_dir: Path) -> None:
    await set_cert_manager(hostile.kube, crd_dir, installed=False)
    await replace_spec(hostile.kube, f"{ESC_API}/cluster", esc_spec(certManagerConfig=ISSUER))
    condition = await wait_condition(hostile.kube, "Degraded", "True",
                                     contains="spec.appConfig.certManagerConfig.enabled",
                                     reason="CertManagerNotInstalled")
    assert "cert-manager is not installed" in condition["whole"]
    assert hostile.operator.alive


async def test_certificate_lifetime_below_cert_managers_minimum(hostile: Hostile) -> None:
    await replace_spec(hostile.kube, f"{ESC_API}/cluster", esc_spec(certManagerConfig={
        # renewBefore 20m: the least the webhook's lookahead rule admits (2 x 5m + 10m).
        **ISSUER, "certificateDuration": "45m", "certificateRenewBefore": "20m"}))
    await wait_condition(hostile.kube, "Degraded", "True",
                         contains="spec.appConfig.certManagerConfig.certificateDuration",
                         reason="InvalidConfiguration")
    assert hostile.operator.alive


async def test_missing_issuer_once_cert_manager_arrives(hostile: Hostile, crd_dir: Path) -> None:
    await replace_spec(hostile.kube, f"{ESC_API}/cluster", esc_spec(certManagerConfig=ISSUER))
    await wait_condition(hostile.kube, "Degraded", "True", reason="CertManagerNotInstalled")
    await set_cert_manager(hostile.kube, crd_dir, installed=True)
    condition = await wait_condition(hostile.kube, "Degraded", "True",
                                     contains="spec.appConfig.certManagerConfig.issuerRef",
                                     reason="IssuerNotFound", timeout=45)
    assert 'ClusterIssuer "no-such-issuer" not found' in condition["whole"]
    # cert-manager stays on (it cannot be switched off): the cert-controller was kept.
    found = await managed_objects(hostile.kube, NAMESPACE)
    assert ("Deployment", NAMESPACE, "external-secrets-cert-controller") in found
    assert hostile.operator.alive


# --- afterwards ---------------------------------------------------------------------------------


async def test_operator_survived_and_deleted_nothing(hostile: Hostile) -> None:
    """certManagerConfig cannot be removed once enabled, so the ESC is deleted (the operand
    stays) and created again with a good spec, with one more label: Ready, and every object
    is the one from before the first hostile spec."""
    await delete_esc(hostile.kube)
    spec = esc_spec({"resilience": "hostile", "after": "hostile"})
    await hostile.kube.create(ESC_API, {"apiVersion": "operator.openshift.io/v1alpha1",
                                        "kind": "ExternalSecretsConfig",
                                        "metadata": {"name": "cluster"}, "spec": spec},
                              field_manager="hostile")
    await wait_condition(hostile.kube, "Ready", "True")

    async def relabelled() -> None:
        found = await managed_objects(hostile.kube, NAMESPACE)
        assert all(obj["metadata"]["labels"].get("after") == "hostile"
                   for obj in found.values())

    await eventually(relabelled)
    assert await uids(hostile.kube, NAMESPACE) == hostile.uids
    assert hostile.operator.alive
