"""Least privilege and secrecy.

The fault and hostile suites already run the operator as its own ServiceAccount bound only
to manifests/operator/rbac.yaml. Here:

- no rule of the shipped RBAC uses a wildcard;
- every permission of the operator's own ClusterRole and Role is used: a scenario that walks
  every code path (install with cert-manager and both Issuer kinds, bitwarden, proxy,
  CRD annotation, pruning of every kind, the ExternalSecretsManager created at start-up, the
  TLS security profile of OpenShift's config API) runs,
  and the API server's audit log lists the (verb, group, resource) of each request the
  operator made; a permission missing from that list fails the test unless it is in
  ALLOWED_UNUSED with its reason;
- the operand-grants ClusterRole holds exactly what the operand's own (Cluster)Roles grant
  (RBAC escalation prevention requires it to hold those, and nothing justifies more);
- across the session no request of the operator was forbidden;
- a secret value (the bitwarden TLS Secret's real key pair, and a sentinel in proxy
  credentials) never appears in the operator's log, in Events, or in the ESC/ESM status.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.client.kube import Kube, install_crds
from manager.config import OperatorEnvironment, effective_config
from manager.names import FIELD_MANAGER, LEASE_NAME, MANAGED_BY_LABEL
from manager.render import render_operand
from manager.render.state import renderable_kinds
from manager.runtime.operator import load_crds
from tests.conftest import CertManager
from tests.integration.conftest import (
    ESC_API,
    ESM_PATH,
    MANAGED,
    EscHandle,
    eventually,
    install_openshift_config,
    managed_objects,
    rbac_documents,
    remove_openshift_config,
)
from tests.integration.test_controller_rbac import OPERATOR_NAMESPACE, VARIANTS, permissions
from tests.integration.test_monitoring import remove_monitoring_crds, set_feature
from tests.metrics_scrape import get_metrics, service_account_token
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret
from tests.resilience.conftest import (
    OPERATOR_USER,
    AuditLog,
    StartOperator,
    just_after_a_restart,
    object_path,
    replace_spec,
    set_cert_manager,
    wait_condition,
    wait_installed,
    wait_quiet,
    wipe_operand,
)

Triple = tuple[str, str, str]  # (verb, API group, resource[/subresource])

OPERATOR_ROLES = ("external-secrets-operator-manager", "external-secrets-operator-leader-election")
# Leader election with short timings: the Lease is created, read and renewed in the scenario.
LEADER_ELECTION = ("--leader-elect", "--leader-elect-lease-duration=4",
                   "--leader-elect-renew-deadline=3", "--leader-elect-retry-period=1")
LEASE_PATH = (f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases/"
              f"{LEASE_NAME}")
GRANTS_ROLE = "external-secrets-operator-operand-grants"

# Permissions of the operator's own roles that no request of the scenario uses, and why they
# are kept anyway. Keep this short; every entry is a permission an attacker holding the
# operator's token would get. The scenario reaches every other permission (the `get` of each
# kind the operator renders included: see drop_out_of_the_watch).
_GATE_WATCH = ("the upgrade gate's watch of its OperatorCondition runs only under OLM "
               "(OPERATOR_CONDITION_NAME); this session has no OLM, tests/olm/"
               "test_upgrade_gate.py runs it")
_LEASE_OWNER = ("no request deletes the Lease: OpenShift's OwnerReferencesPermissionEnforcement "
                "admission asks for delete on it when an update sets its owner (the operator's "
                "Deployment, on a Lease a release without it wrote); the simulated API server "
                "does not run that plugin")
_QUICKSTART = ("the ConsoleQuickStart is applied only where OpenShift's console serves its kind; "
               "this scenario has no console CRDs, tests/integration/test_console_quickstart.py "
               "applies it with the operator's RBAC (its `as_operator` client)")
ALLOWED_UNUSED: dict[Triple, str] = {
    ("list", "operators.coreos.com", "operatorconditions"): _GATE_WATCH,
    ("watch", "operators.coreos.com", "operatorconditions"): _GATE_WATCH,
    ("delete", "coordination.k8s.io", "leases"): _LEASE_OWNER,
    **{(verb, "console.openshift.io", "consolequickstarts"): _QUICKSTART
       for verb in ("get", "create", "patch")},
}


# --- the rules ------------------------------------------------------------------------------


def roles() -> dict[str, dict[str, Any]]:
    return {doc["metadata"]["name"]: doc for doc in rbac_documents()
            if doc["kind"] in ("ClusterRole", "Role")}


def triples(rules: list[dict[str, Any]]) -> Iterator[Triple]:
    for rule in rules:
        for group in rule.get("apiGroups", []):
            for resource in rule.get("resources", []):
                for verb in rule.get("verbs", []):
                    yield verb, group, resource


def test_no_rule_uses_a_wildcard() -> None:
    found = roles()
    assert set(OPERATOR_ROLES) | {GRANTS_ROLE} <= set(found), sorted(found)
    for name, role in found.items():
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames", "nonResourceURLs"):
                wild = [value for value in rule.get(key, []) if "*" in value]
                assert not wild, f"{role['kind']} {name} has {key} {wild}: {rule}"


def test_operand_grants_hold_only_what_the_operand_roles_grant() -> None:
    """Escalation prevention: to create or bind a (Cluster)Role the operator must hold its
    permissions. That is the only reason for this role, so each of its permissions must be
    granted by a (Cluster)Role the renderer produces for some configuration."""
    rendered: set[tuple[str, str, str, str | None]] = set()
    environment = OperatorEnvironment.from_environ({})
    for esc_spec, esm_spec in VARIANTS:
        config = effective_config(ExternalSecretsConfigSpec.model_validate(esc_spec),
                                  ExternalSecretsManagerSpec.model_validate(esm_spec),
                                  environment)
        for obj in render_operand(config).objects():
            if obj["kind"] in ("ClusterRole", "Role"):
                rendered.update(permissions(obj["rules"]))
    held = set(permissions(roles()[GRANTS_ROLE]["rules"]))
    assert held - rendered == set(), sorted(held - rendered)


# --- the scenario: every code path once ------------------------------------------------------

NAMESPACE = "eso-rs-privilege"
SECRECY_NAMESPACE = "eso-rs-secrecy"
ISSUERS = "/apis/cert-manager.io/v1"


def stale_objects(namespace: str) -> list[dict[str, Any]]:
    """One object of every kind the operator prunes, as an earlier operator version might have
    left it: our label, applied by our field manager, no longer desired."""
    meta = {"name": "resilience-stale", "labels": {MANAGED.split("=")[0]: MANAGED.split("=")[1]}}
    namespaced = {**meta, "namespace": namespace}
    pod = {"metadata": {"labels": {"stale": "yes"}},
           "spec": {"containers": [{"name": "c", "image": "example.invalid/stale:1"}]}}
    role_ref = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                "name": "resilience-stale"}
    bodies: dict[str, dict[str, Any]] = {
        "ServiceAccount": {}, "Secret": {}, "ConfigMap": {},
        "Service": {"spec": {"ports": [{"port": 80}]}},
        "Deployment": {"spec": {"selector": {"matchLabels": {"stale": "yes"}}, "template": pod}},
        "NetworkPolicy": {"spec": {"podSelector": {}}},
        "PodDisruptionBudget": {"spec": {"maxUnavailable": 1,
                                         "selector": {"matchLabels": {"stale": "yes"}}}},
        "Role": {"rules": []}, "ClusterRole": {"rules": []},
        "RoleBinding": {"roleRef": role_ref, "subjects": []},
        "ClusterRoleBinding": {"roleRef": role_ref, "subjects": []},
        "ValidatingWebhookConfiguration": {"webhooks": []},
        "Certificate": {"spec": {"secretName": "resilience-stale",
                                 "issuerRef": {"name": "resilience-issuer"}}},
        "ServiceMonitor": {"spec": {"selector": {}, "endpoints": [{"port": "metrics"}]}},
        "PrometheusRule": {"spec": {"groups": []}},
    }
    objects = []
    for api_version, kind in renderable_kinds():
        if kind in ("Namespace", "CustomResourceDefinition"):
            continue  # never pruned
        assert kind in bodies, f"no stale {kind} to plant: add one"
        cluster_scoped = kind.startswith("Cluster") or kind == "ValidatingWebhookConfiguration"
        objects.append({"apiVersion": api_version, "kind": kind,
                        "metadata": meta if cluster_scoped else namespaced, **bodies[kind]})
    return objects


async def drop_out_of_the_watch(kube: Kube, namespace: str, done: set[str]) -> None:
    """One managed object of each kind not in `done` loses the managed-by label (as
    `kubectl label ... app.kubernetes.io/managed-by-` does); the operator must put it back.

    This is how every `get` of a kind the operator renders is used, whatever the timing: the
    label-selected watch sees the object leave (so the cache no longer holds it), and a pass
    that misses exactly one name of a kind the cache vouches for reads that name with a GET
    (two or more: one LIST), finds it still the operator's (its field manager applied it)
    and re-applies the label. A deletion would do the same, but a Namespace never finishes
    deleting here."""
    picked: dict[str, tuple[dict[str, Any], str]] = {}
    for (kind, _, name), obj in sorted((await managed_objects(kube, namespace)).items()):
        if kind in done or kind in picked or name.startswith("external-secrets-operator-"):
            continue
        path = await object_path(kube, obj)
        await kube.merge_patch(path, {"metadata": {"labels": {MANAGED_BY_LABEL: None}}},
                               field_manager="resilience")
        picked[kind] = (obj, path)

    async def relabelled() -> None:
        for kind, (obj, path) in picked.items():
            live = await kube.request("GET", path)
            assert live["metadata"]["uid"] == obj["metadata"]["uid"], f"{kind} re-created"
            assert MANAGED_BY_LABEL in (live["metadata"].get("labels") or {}), path

    await eventually(relabelled, timeout=30)
    done.update(picked)


async def run_every_code_path(kube: Kube, esc: EscHandle, start_operator: StartOperator, *,
                              crd_dir: Path, audit: AuditLog, cert_manager: CertManager) -> None:
    """Each step is there for the permissions it needs (named in the comments)."""
    await set_cert_manager(kube, crd_dir, installed=False)
    await wipe_operand(kube, NAMESPACE)  # earlier suites' cluster-scoped objects, so they
    await kube.delete(ESM_PATH)          # are created again (create clusterroles, ...)
    await kube.delete(LEASE_PATH)  # create, then get and update of leases
    # OpenShift's config API: the TLS profile is read at start-up (get apiservers) and
    # watched (list, watch); removed at the end, as later suites expect plain Kubernetes.
    await install_openshift_config(kube, crd_dir)
    # create externalsecretsmanagers
    operator = await start_operator(arguments=LEADER_ELECTION)
    await eventually(lambda: _present(kube, ESM_PATH))
    # Operand monitoring, its CRDs installed while the operator runs (create, patch, get,
    # list, watch and, with the leftovers below, delete of servicemonitors and
    # prometheusrules); switched off again at the end.
    await install_crds(kube, load_crds(crd_dir / "prometheus-operator"),
                       field_manager="prometheus-operator")
    await set_feature(kube, True)

    # A dependency missing, then arriving (get secrets; create namespaces; create, patch,
    # get, list, watch of every default kind).
    tls_secret = f"/api/v1/namespaces/{NAMESPACE}/secrets/resilience-bitwarden-tls"
    proxy = {"httpProxy": "http://proxy.invalid:3128"}
    # Two webhook replicas: a PodDisruptionBudget (create, patch, get poddisruptionbudgets).
    webhook_pair = [{"componentName": "Webhook", "deploymentConfigs": {"replicas": 2}}]
    spec: dict[str, Any] = {"controllerConfig": {"namespace": NAMESPACE,
                                                 "componentConfigs": webhook_pair},
                            "appConfig": {
        "proxy": proxy, "bitwardenSecretManagerProvider": {
            "enabled": "true", "secretRef": {"name": "resilience-bitwarden-tls"}}}}
    await esc.create(spec)
    await wait_condition(kube, "Degraded", "True", reason="BitwardenSecretNotFound")
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "resilience-bitwarden-tls", "namespace": NAMESPACE}}
    await kube.apply(tls_secret, secret, field_manager="resilience")
    await wait_condition(kube, "Degraded", "True", reason="BitwardenSecretInvalid")
    # A real key pair: bitwarden-sdk-server serves it, and the ESC is Ready.
    await kube.apply(tls_secret, bitwarden_tls_secret(NAMESPACE, "resilience-bitwarden-tls"),
                     field_manager="resilience")
    await wait_installed(kube, NAMESPACE, timeout=90)
    # Prometheus scrapes /metrics with its token (create tokenreviews, subjectaccessreviews).
    token = await service_account_token(kube, NAMESPACE, "metrics-scraper", reader=True)
    assert (await get_metrics(operator.metrics_port, token))[0] == 200
    # One object of each kind drops out of the watch, is read and relabelled (get, patch of
    # every kind installed so far; the Certificates come below).
    relabelled: set[str] = set()
    await drop_out_of_the_watch(kube, NAMESPACE, relabelled)

    # cert-manager requested before it is installed (get customresourcedefinitions), then
    # installed without the Issuer (get issuers), then the Issuer: Certificates are applied,
    # the cert-controller pruned, the operand CRDs annotated (patch customresourcedefinitions).
    cert_manager_spec = {"enabled": "true", "addInjectorAnnotations": "true",
                    "issuerRef": {"name": "resilience-issuer", "kind": "Issuer"}}
    spec = {**spec, "appConfig": {"proxy": proxy, "certManagerConfig": cert_manager_spec,
                                  "bitwardenSecretManagerProvider": {"enabled": "true"}}}
    await replace_spec(kube, f"{ESC_API}/cluster", spec)
    await wait_condition(kube, "Degraded", "True", reason="CertManagerNotInstalled")
    await set_cert_manager(kube, crd_dir, installed=True)
    await wait_condition(kube, "Degraded", "True", reason="IssuerNotFound", timeout=45)
    cert_manager.start()  # it issues the Certificates, so the cert-controller can go
    for path, kind in ((f"{ISSUERS}/namespaces/{NAMESPACE}/issuers", "Issuer"),
                       (f"{ISSUERS}/clusterissuers", "ClusterIssuer")):
        await kube.apply(f"{path}/resilience-issuer", {
            "apiVersion": "cert-manager.io/v1", "kind": kind,
            "metadata": {"name": "resilience-issuer"}, "spec": {"selfSigned": {}}},
            field_manager="resilience")
    await wait_installed(kube, NAMESPACE, timeout=90)
    found = await managed_objects(kube, NAMESPACE)
    assert ("Certificate", NAMESPACE, "bitwarden-tls-certs") in found
    assert ("Deployment", NAMESPACE, "external-secrets-cert-controller") not in found
    await drop_out_of_the_watch(kube, NAMESPACE, relabelled)  # get certificates
    assert relabelled == {kind for _, kind in renderable_kinds()}, relabelled

    # Leftovers of every kind are pruned (delete of every kind).
    stale = stale_objects(NAMESPACE)
    for obj in stale:
        await kube.apply(await object_path(kube, obj), obj, field_manager=FIELD_MANAGER)

    async def pruned() -> None:
        left = [obj["kind"] for obj in stale
                if await kube.get(await object_path(kube, obj)) is not None]
        assert not left, left

    await eventually(pruned, timeout=30)

    # Components switched off are pruned too; the injector annotation is released.
    await replace_spec(kube, f"{ESC_API}/cluster", {**spec, "appConfig": {
        "certManagerConfig": {**cert_manager_spec, "addInjectorAnnotations": "false"}}})
    await wait_installed(kube, NAMESPACE, timeout=90)

    async def switched_off() -> None:
        names = {key[2] for key in await managed_objects(kube, NAMESPACE)}
        assert not {"bitwarden-tls-certs", "bitwarden-sdk-server",
                    "external-secrets-trusted-ca-bundle"} & names, names

    await eventually(switched_off)

    # The other Issuer kind (issuerRef is immutable: a new ESC) (get, list, watch of it).
    await kube.delete(f"{ESC_API}/cluster")
    await eventually(lambda: _absent(kube, f"{ESC_API}/cluster"))
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}, "appConfig": {
        "certManagerConfig": {"enabled": "true", "issuerRef": {"name": "resilience-issuer",
                                                               "kind": "ClusterIssuer"}}}})
    await wait_installed(kube, NAMESPACE, timeout=90)
    await set_feature(kube, False)
    await remove_monitoring_crds(kube)  # later suites expect a cluster without them
    await wait_quiet(audit)
    operator.stop()  # its watches end, so the audit log records them
    await remove_openshift_config(kube, crd_dir)


async def _present(kube: Kube, path: str) -> None:
    assert await kube.get(path) is not None, path


async def _absent(kube: Kube, path: str) -> None:
    assert await kube.get(path) is None, path


def used_triples(entries: list[dict[str, Any]]) -> set[Triple]:
    """What the requests used; an apply that created its object (201) also used `create`."""
    used = set()
    for entry in entries:
        ref = entry.get("objectRef")
        if ref is None:  # discovery (/api, /apis/...): every authenticated user may read it
            continue
        resource = ref.get("resource", "")
        if ref.get("subresource"):
            resource = f"{resource}/{ref['subresource']}"
        used.add((entry["verb"], ref.get("apiGroup", ""), resource))
        if entry["verb"] == "patch" and (entry.get("responseStatus") or {}).get("code") == 201:
            used.add(("create", ref.get("apiGroup", ""), resource))
    return used


async def test_every_permission_is_used(kube: Kube, esc: EscHandle,
                                        start_operator: StartOperator, crd_dir: Path, *,
                                        audit: AuditLog, cert_manager: CertManager) -> None:
    start = audit.mark()
    await run_every_code_path(kube, esc, start_operator, crd_dir=crd_dir, audit=audit,
                              cert_manager=cert_manager)
    entries = audit.entries(start)
    used = used_triples(entries)
    held = {triple for name in OPERATOR_ROLES for triple in triples(roles()[name]["rules"])}
    unused = sorted(held - used - set(ALLOWED_UNUSED))
    assert not unused, f"held but never used: {unused}"
    stale_allowances = sorted(set(ALLOWED_UNUSED) & used)
    assert not stale_allowances, f"allowed as unused but used: {stale_allowances}"
    discovery = {e["requestURI"].split("?")[0] for e in entries if "objectRef" not in e}
    assert all(uri == "/api" or uri.startswith(("/api/v1", "/apis")) for uri in discovery), \
        discovery
    outside = sorted(used - held - set(triples(roles()[GRANTS_ROLE]["rules"])))
    assert not outside, f"used without a rule (forbidden?): {outside}"


def test_the_operator_ran_as_its_service_account_and_was_never_forbidden(
        audit: AuditLog) -> None:
    """Over these suites (fault, hostile, privilege, as far as they ran)."""
    entries = audit.entries()
    assert entries, "the operator made no request as its ServiceAccount"
    # kopf names itself in the User-Agent: no operator of these suites used another identity.
    kopf_users = {e["user"]["username"] for e in audit.entries(everyone=True)
                  if e.get("userAgent", "").startswith("kopf/")}
    assert kopf_users == {OPERATOR_USER}
    denied = [e for e in entries if (e.get("responseStatus") or {}).get("code") in (401, 403)]
    # Excused: the seconds after a kube-apiserver restart, while its RBAC caches fill.
    forbidden = [(e["verb"], e.get("requestURI")) for e in denied if not just_after_a_restart(e)]
    assert forbidden == []


# --- secrecy ----------------------------------------------------------------------------------

SENTINEL = "s3ntinel-b1t-0f-s3cret-9f2c"
SECRET_FORMS = (SENTINEL, base64.b64encode(SENTINEL.encode()).decode())


def tls_forms(secret: dict[str, Any]) -> tuple[str, ...]:
    """A TLS Secret's values as they could leak: base64 as the API carries them, the PEM
    text, and each line of its base64 body (JSON escapes the PEM's line breaks)."""
    forms: list[str] = []
    for encoded in secret["data"].values():
        pem = base64.b64decode(encoded).decode()
        forms += [encoded, pem, *(line for line in pem.splitlines()
                                  if not line.startswith("-----") and len(line) >= 40)]
    return tuple(forms)


def leaks(text: str, forms: tuple[str, ...] = SECRET_FORMS) -> list[str]:
    return [form for form in forms if form in text]


async def test_secret_values_stay_out_of_logs_events_and_status(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, audit: AuditLog) -> None:
    namespace = SECRECY_NAMESPACE
    proxy = f"http://user:{SENTINEL}@proxy.invalid:3128"
    await kube.apply(f"/api/v1/namespaces/{namespace}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        field_manager="resilience")
    # A real key pair (bitwarden-sdk-server serves it: the ESC becomes Ready); its values
    # are secrets as much as the proxy's password.
    tls = bitwarden_tls_secret(namespace)
    forms = (*SECRET_FORMS, *tls_forms(tls))
    await kube.apply(f"/api/v1/namespaces/{namespace}/secrets/{BITWARDEN_TLS_SECRET}", tls,
                     field_manager="resilience")
    await replace_spec(kube, ESM_PATH, {"globalConfig": {"proxy": {"httpsProxy": proxy}}})
    operator = await start_operator(verbose=True)  # kopf's debug logging included
    try:
        bitwarden = {"enabled": "true", "secretRef": {"name": BITWARDEN_TLS_SECRET}}
        spec: dict[str, Any] = {"controllerConfig": {"namespace": namespace}, "appConfig": {
            "proxy": {"httpProxy": proxy, "httpsProxy": proxy},
            "bitwardenSecretManagerProvider": bitwarden}}
        await esc.create(spec)
        await wait_installed(kube, namespace, timeout=90)
        # The value does reach the operand, by design: the test is about the operator.
        found = await managed_objects(kube, namespace)
        assert leaks(json.dumps(found[("Deployment", namespace, "bitwarden-sdk-server")]))
        # Failures and repairs write messages and Events: none may carry the value.
        invalid = [{"key": "k", "operator": "Exists", "value": "v"}]
        await replace_spec(kube, f"{ESC_API}/cluster", {**spec, "appConfig": {
            **spec["appConfig"], "tolerations": invalid}})
        await wait_condition(kube, "Degraded", "True")
        await replace_spec(kube, f"{ESC_API}/cluster", spec)
        await wait_installed(kube, namespace, timeout=90)
        await kube.delete(f"/apis/apps/v1/namespaces/{namespace}/deployments/bitwarden-sdk-server")
        await kube.delete(f"/api/v1/namespaces/{namespace}/secrets/{BITWARDEN_TLS_SECRET}")
        await wait_condition(kube, "Degraded", "True", reason="BitwardenSecretNotFound")
        await wait_quiet(audit)
    finally:
        operator.stop()
        await replace_spec(kube, ESM_PATH, {})

    log = operator.log()
    assert "action=apply" in log, log[-2000:]
    assert "action=status" in log, log[-2000:]
    assert leaks(log, forms) == [], [line for line in log.splitlines() if leaks(line, forms)][:5]
    events = await kube.request("GET", "/api/v1/events")
    ours = [e for e in events["items"]
            if e.get("reportingComponent") == "external-secrets-operator"]
    assert ours, "the operator posted no Events"
    assert leaks(json.dumps(events["items"]), forms) == []
    esc_status = (await kube.request("GET", f"{ESC_API}/cluster")).get("status")
    esm_status = (await kube.request("GET", ESM_PATH)).get("status")
    assert esc_status
    assert esm_status
    assert leaks(json.dumps(esc_status), forms) == [], esc_status
    assert leaks(json.dumps(esm_status), forms) == [], esm_status
