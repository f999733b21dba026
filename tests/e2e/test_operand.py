"""The operand the operator installs really works: the real external-secrets processes run
(on the simulated cluster, through its pod runner; on a real cluster, as pods), issue their
certificates, validate through their webhook and sync secrets.

The scenarios run in order on one default install (`spec: {}`), driven as an administrator
would with openshift-client; the operator runs as a process (tests/e2e/conftest.py). What the
simulated cluster cannot run is said where it matters: bitwarden-sdk-server has no binary
here, so its Deployment stays unavailable and the operator must say exactly that.

Which binary: on a real cluster, the image the operator renders (external-secrets v1.3.2).
On the simulated cluster, the pods keep that image reference, but the pod runner runs
external-secrets v0.16.2 for it (SIMULATION_EXTERNAL_SECRETS_VERSION in manager/versions.py):
v1.3.2 cannot be built here, and v0.16.2 serves the same v1 SecretStore and ExternalSecret
APIs and accepts every flag the operator renders (tests/integration/test_operand_flags.py;
docs/development.md, "Which operand runs"). So what passes here proves the operator's
objects work with v0.16.2's certificate bootstrap, webhook and sync, not v1.3.2's.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import openshift_client as oc
import pytest

from manager.constants import DEFAULT_OPERAND_NAMESPACE
from tests.conftest import Cluster
from tests.e2e.conftest import (
    ESC,
    USE_EXISTING_CLUSTER,
    condition,
    uninstall_command,
    wait_esc,
    wait_for,
)
from tests.e2e.operator_process import OperatorProcess

NAMESPACE = DEFAULT_OPERAND_NAMESPACE
TEAM = "eso-e2e-team"        # where users keep their SecretStores and ExternalSecrets
SOURCE = "eso-e2e-source"    # a namespace the kubernetes provider reads from
DEPLOYMENTS = ("external-secrets", "external-secrets-webhook", "external-secrets-cert-controller")
WEBHOOK_CONFIGURATIONS = ("externalsecret-validate", "secretstore-validate")
REFRESH = "2s"


def kubectl(cluster: Cluster, *args: str) -> str:
    """What an administrator would see (printed for the record)."""
    return cluster.kubectl(*args).stdout


def model(kind: str, name: str, namespace: str | None = None) -> dict[str, Any]:
    with oc.project(namespace or "default"):
        found = oc.selector(f"{kind}/{name}").object(ignore_not_found=True)
    assert found is not None, f"{kind} {name} does not exist"
    result: dict[str, Any] = found.as_dict()
    return result


@pytest.fixture(scope="module")
def operand(cluster: Cluster, operator: OperatorProcess | None) -> Iterator[None]:
    """The default install, Ready; afterwards the operand and the test namespaces go."""
    for namespace in (TEAM, SOURCE):
        oc.invoke("create", ["namespace", namespace])
    oc.apply({"apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
              "metadata": {"name": "cluster"}, "spec": {}})
    try:
        yield
    finally:
        oc.selector(ESC).delete(ignore_not_found=True)
        result = uninstall_command(cluster, "--yes", f"--namespace={NAMESPACE}")
        print(result.stdout, result.stderr)
        for namespace in (TEAM, SOURCE):
            oc.invoke("delete", ["namespace", namespace, "--wait=false"])


def test_default_install_becomes_ready_with_every_deployment_available(
        cluster: Cluster, operand: None) -> None:
    esc = wait_esc(timeout=180)
    ready = condition(esc, "Ready")
    assert ready is not None
    assert "every Deployment is available and the webhooks are trusted" in ready["message"]
    progressing = condition(esc, "Progressing")
    assert progressing is not None
    assert progressing["status"] == "False"
    for name in DEPLOYMENTS:
        status = model("deployment", name, NAMESPACE)["status"]
        assert status.get("availableReplicas") == 1, (name, status)
    print(kubectl(cluster, "get", "deployments", "-n", NAMESPACE))


def test_the_cert_controller_issued_the_webhook_certificate_and_both_ca_bundles(
        operand: None) -> None:
    data = model("secret", "external-secrets-webhook", NAMESPACE).get("data") or {}
    assert {"tls.crt", "tls.key", "ca.crt"} <= set(data), sorted(data)
    for name in WEBHOOK_CONFIGURATIONS:
        webhooks = model("validatingwebhookconfiguration", name)["webhooks"]
        assert webhooks, name
        assert all(w["clientConfig"].get("caBundle") == data["ca.crt"] for w in webhooks), name


def secret_store(name: str, provider: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
            "metadata": {"name": name, "namespace": TEAM}, "spec": {"provider": provider}}


def test_the_real_webhook_admits_a_valid_store_and_refuses_an_invalid_one(
        operand: None) -> None:
    with oc.project(TEAM):
        admitted = oc.invoke("apply", ["-f", "-"], stdin_str=json.dumps(secret_store(
            "fake", {"fake": {"data": [{"key": "/db/password", "value": "first"}]}})))
        # The fake provider warns that it is not maintained: said by the webhook itself.
        assert "isn't currently maintained" in admitted.err()
        with pytest.raises(oc.OpenShiftPythonException) as refused:
            oc.invoke("apply", ["-f", "-"], stdin_str=json.dumps(secret_store(
                "broken", {"fake": {"data": [{"key": "k", "value": ""}]}})))
    message = str(refused.value.result.err())
    assert 'admission webhook "validate.secretstore.external-secrets.io" denied' in message
    assert "at least one value must be set" in message


def external_secret(name: str, store: str, data: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
            "metadata": {"name": name, "namespace": TEAM},
            "spec": {"refreshInterval": REFRESH,
                     "secretStoreRef": {"name": store, "kind": "SecretStore"},
                     "target": {"name": name}, "data": data}}


def wait_synced(name: str, expected: dict[str, str], timeout: float) -> None:
    """Until the ExternalSecret reports it synced and its target Secret holds `expected`
    (test values, not secrets)."""
    def check() -> None:
        status = model("externalsecret", name, TEAM).get("status") or {}
        ready = next((c for c in status.get("conditions") or [] if c["type"] == "Ready"), None)
        assert ready is not None, status
        assert ready["status"] == "True", ready
        data = model("secret", name, TEAM).get("data") or {}
        assert {k: base64.b64decode(v).decode() for k, v in data.items()} == expected

    wait_for(check, f"secret/{name} to hold the expected data", timeout, interval=0.5)


def test_the_fake_provider_syncs_into_a_secret(cluster: Cluster, operand: None) -> None:
    oc.apply(external_secret("from-fake", "fake", [
        {"secretKey": "password", "remoteRef": {"key": "/db/password"}}]))
    wait_synced("from-fake", {"password": "first"}, 60)
    print(kubectl(cluster, "get", "externalsecret", "from-fake", "-n", TEAM))


def test_the_kubernetes_provider_reads_another_namespace_and_follows_updates(
        cluster: Cluster, operand: None) -> None:
    """The controller authenticates as a ServiceAccount of the store's namespace (a token it
    requests) and reads a Secret in another namespace that a Role lets that account read."""
    server = ("https://kubernetes.default.svc" if USE_EXISTING_CLUSTER
              else cluster.local.server if cluster.local else "")
    oc.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": SOURCE},
              "stringData": {"password": "v1"}})
    oc.apply({"apiVersion": "v1", "kind": "ServiceAccount",
              "metadata": {"name": "reader", "namespace": TEAM}})
    oc.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
              "metadata": {"name": "read-secrets", "namespace": SOURCE},
              "rules": [{"apiGroups": [""], "resources": ["secrets"],
                         "verbs": ["get", "list", "watch"]}]})
    oc.apply({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
              "metadata": {"name": "reader", "namespace": SOURCE},
              "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                          "name": "read-secrets"},
              "subjects": [{"kind": "ServiceAccount", "name": "reader", "namespace": TEAM}]})
    oc.apply(secret_store("kubernetes", {"kubernetes": {
        "remoteNamespace": SOURCE,
        "server": {"url": server, "caProvider": {"type": "ConfigMap", "name": "kube-root-ca.crt",
                                                 "key": "ca.crt"}},
        "auth": {"serviceAccount": {"name": "reader"}}}}))
    oc.apply(external_secret("from-kubernetes", "kubernetes", [
        {"secretKey": "password", "remoteRef": {"key": "db", "property": "password"}}]))
    wait_synced("from-kubernetes", {"password": "v1"}, 60)

    oc.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "db", "namespace": SOURCE},
              "stringData": {"password": "v2"}})
    # Within the refresh interval (2 s), with room for a busy machine.
    wait_synced("from-kubernetes", {"password": "v2"}, 10)
    print(kubectl(cluster, "get", "externalsecret", "from-kubernetes", "-n", TEAM))
    keys = sorted(model("secret", "from-kubernetes", TEAM)["data"])
    print(f"secret/from-kubernetes keys: {keys}")


def patch_esc(spec: dict[str, Any]) -> None:
    oc.selector(ESC).object().patch({"spec": spec}, strategy="merge")


def operand_processes(cluster: Cluster, container: str) -> list[Any]:
    assert cluster.simulated is not None
    return cluster.simulated.processes(NAMESPACE, container)


def wait_controller(cluster: Cluster, check: Any, what: str) -> Any:
    """Until the one running controller process satisfies `check` (after the rollout)."""
    def one() -> Any:
        processes = operand_processes(cluster, "external-secrets")
        assert len(processes) == 1, [p.pod for p in processes]
        check(processes[0])
        return processes[0]
    return wait_for(one, what, 90)


@pytest.mark.skipif(USE_EXISTING_CLUSTER, reason="reads the processes of the simulated cluster")
def test_the_running_controller_follows_proxy_and_operating_namespace(
        cluster: Cluster, operand: None) -> None:
    proxy = {"httpProxy": "http://proxy.example.com:3128", "noProxy": "127.0.0.1,.svc"}
    patch_esc({"appConfig": {"proxy": proxy}})

    def proxied(process: Any) -> None:
        assert process.env.get("HTTP_PROXY") == proxy["httpProxy"]
        # The administrator's entries first, then what stays in the cluster.
        assert (process.env.get("NO_PROXY") or "").startswith(proxy["noProxy"] + ",")

    wait_controller(cluster, proxied, "the controller to run with the proxy")
    wait_esc(timeout=120)

    patch_esc({"appConfig": {"proxy": None, "operatingNamespace": TEAM}})

    def scoped(process: Any) -> None:
        assert "HTTP_PROXY" not in process.env
        assert f"--namespace={TEAM}" in process.argv
        assert "--enable-cluster-store-reconciler=false" in process.argv

    wait_controller(cluster, scoped, "the controller to run scoped to the team namespace")
    wait_esc(timeout=120)
    patch_esc({"appConfig": {"operatingNamespace": None}})
    wait_controller(cluster, _not_scoped, "the controller to run cluster-wide")
    wait_esc(timeout=120)


@pytest.mark.skipif(USE_EXISTING_CLUSTER, reason="reads the processes of the simulated cluster")
def test_a_proxy_that_accepts_nothing_keeps_in_cluster_traffic_working(
        cluster: Cluster, operand: None) -> None:
    """No noProxy from the administrator, and a proxy where nothing listens: the controller
    still reaches the API server (the kubernetes Service's ClusterIP, which the operator adds
    to NO_PROXY), the webhook gets no proxy at all, and a new ExternalSecret syncs."""
    dead = "http://127.0.0.1:9"  # nothing listens in the pod: every proxied dial is refused
    patch_esc({"appConfig": {"proxy": {"httpProxy": dead, "httpsProxy": dead}}})

    def proxied(process: Any) -> None:
        assert process.env.get("HTTPS_PROXY") == dead
        assert process.env.get("KUBERNETES_SERVICE_HOST") in (
            process.env.get("NO_PROXY") or "").split(",")

    wait_controller(cluster, proxied, "the controller to run with the dead proxy")
    wait_esc(timeout=120)
    webhooks = operand_processes(cluster, "webhook")
    assert webhooks, "no webhook process runs"
    assert not [p.pod for p in webhooks if "HTTPS_PROXY" in p.env]
    oc.apply(external_secret("past-a-dead-proxy", "fake", [
        {"secretKey": "password", "remoteRef": {"key": "/db/password"}}]))
    wait_synced("past-a-dead-proxy", {"password": "first"}, 60)
    patch_esc({"appConfig": {"proxy": None}})
    wait_controller(cluster, _unproxied, "the controller to run without the proxy")
    wait_esc(timeout=120)


def _unproxied(process: Any) -> None:
    assert "HTTPS_PROXY" not in process.env


def _not_scoped(process: Any) -> None:
    assert not any(arg.startswith("--namespace=") for arg in process.argv), process.argv


def test_bitwarden_on_is_reported_as_waiting_then_off_is_ready(
        cluster: Cluster, operand: None) -> None:
    """bitwarden-sdk-server cannot be built here, so the simulated cluster leaves its pod
    waiting; the operator must report exactly that, then recover when it is switched off."""
    with oc.project(NAMESPACE):
        oc.invoke("create", ["secret", "generic", "bitwarden-tls", "--from-literal=tls.crt=x",
                             "--from-literal=tls.key=x", "--from-literal=ca.crt=x"])
    patch_esc({"appConfig": {"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": "bitwarden-tls"}}}})
    if USE_EXISTING_CLUSTER:
        wait_esc(timeout=300)
    else:
        def reported() -> None:
            esc = wait_esc("True", kind="Progressing", reason="WaitingForOperand", timeout=60)
            awaited = {item["object"]: item["message"]
                       for item in esc["status"].get("awaited") or []}
            message = awaited.get("Deployment external-secrets/bitwarden-sdk-server", "")
            assert message.startswith(
                "0 of 1 replicas available; pod external-secrets/bitwarden-sdk-server-"), awaited
            assert ("container bitwarden-sdk-server waiting: NoLocalBinary: the simulated "
                    "cluster has no binary for image ") in message
            assert (condition(esc, "Degraded") or {}).get("status") == "False"

        wait_for(reported, "the operator to report the bitwarden pod waiting", 60)
    patch_esc({"appConfig": {"bitwardenSecretManagerProvider": {"enabled": "false"}}})
    wait_esc(timeout=120)
    with oc.project(NAMESPACE):
        assert oc.selector("deployment/bitwarden-sdk-server").object(
            ignore_not_found=True) is None
        oc.selector("secret/bitwarden-tls").delete()
