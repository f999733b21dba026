"""The operand the operator installs really works: the real external-secrets processes run
(on the simulated cluster, through its pod runner; on a real cluster, as pods), issue their
certificates, validate through their webhook and sync secrets.

The scenarios run in order on one default install (`spec: {}`), driven as an administrator
would with openshift-client; the operator runs as a process (tests/e2e/conftest.py).
bitwarden-sdk-server runs too: it serves its certificate (the administrator's, then
cert-manager's) verified for the Service's DNS name, follows a renewal, and the controller's
Bitwarden provider reaches it by that name, over verified TLS (the simulated cluster names
and relays Services for pods as cluster DNS and kube-proxy would: devcluster/services.py).

Which binary: on a real cluster, the image the operator renders; on the simulated cluster,
the same releases (external-secrets v2.9.0, bitwarden-sdk-server v0.5.2) built from their
source trees (docs/development.md, "Which operand runs").
"""

from __future__ import annotations

import base64
import json
import ssl
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openshift_client as oc
import pytest

from devcluster.crds import fetched_dir as fetched_crds
from manager.names import DEFAULT_OPERAND_NAMESPACE, WEBHOOK_SECRET_CERT_MANAGER
from tests.certificates import self_signed_ca, signed_key_pair
from tests.conftest import CertManager, Cluster
from tests.e2e import bitwarden
from tests.e2e.conftest import (
    ESC,
    ESM,
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
GENERIC_FLAG = "--unsafe-allow-generic-targets=true"


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
        # external-secrets v1.x puts a finalizer on every ExternalSecret that only its
        # running controller removes; a scenario may have uninstalled it already. These are
        # the test's own objects: release them, then their namespaces can go.
        for namespace in (TEAM, SOURCE):
            with oc.project(namespace):
                for found in oc.selector("externalsecrets.external-secrets.io").objects():
                    found.patch({"metadata": {"finalizers": None}}, strategy="merge")
            oc.invoke("delete", ["namespace", namespace, "--wait=false"])
        oc.selector(ESC).delete(ignore_not_found=True)
        result = uninstall_command(cluster, "--yes", f"--namespace={NAMESPACE}")
        print(result.stdout, result.stderr)


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


def set_generic_targets(enabled: bool) -> None:
    """The ExternalSecretsManager feature UnsafeAllowGenericTargets on, or its entry gone."""
    features = ([{"name": "UnsafeAllowGenericTargets", "enabled": "true"}] if enabled
                else None)
    oc.selector(ESM).object().patch({"spec": {"features": features}}, strategy="merge")


def controller_flag(wanted: bool) -> Callable[[], None]:
    def check() -> None:
        deployment = model("deployment", "external-secrets", NAMESPACE)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert (GENERIC_FLAG in args) == wanted, args
        status = deployment.get("status") or {}
        # Rolled out: the pods that run are the template's (the flag is read at start).
        assert status.get("observedGeneration") == deployment["metadata"]["generation"], status
        assert status.get("updatedReplicas") == status.get("replicas") == 1, status
        assert status.get("availableReplicas") == 1, status
    return check


def test_with_generic_targets_on_an_external_secret_writes_a_configmap(
        cluster: Cluster, operand: None) -> None:
    """UnsafeAllowGenericTargets: the rolled controller writes a ConfigMap target (the RBAC
    the operator grants is what lets it); off again, the same ExternalSecret is refused by
    the controller and the ConfigMap it wrote stays."""
    store = secret_store("generic-fake", {"fake": {"data": [
        {"key": "/app/colour", "value": "blue"}]}})
    try:
        set_generic_targets(True)
        wait_for(controller_flag(True), "the controller to roll with the flag", 120)
        wait_esc(timeout=120)
        with oc.project(TEAM):
            oc.invoke("apply", ["-f", "-"], stdin_str=json.dumps(store))
        es = external_secret("to-configmap", "generic-fake", [
            {"secretKey": "colour", "remoteRef": {"key": "/app/colour"}}])
        es["spec"]["target"]["manifest"] = {"apiVersion": "v1", "kind": "ConfigMap"}
        oc.apply(es)

        def synced() -> None:
            ready = _ready(model("externalsecret", "to-configmap", TEAM))
            assert ready is not None, "no Ready condition yet"
            assert ready["status"] == "True", ready
            assert model("configmap", "to-configmap", TEAM).get("data") == {"colour": "blue"}

        wait_for(synced, "configmap/to-configmap to hold the expected data", 90, interval=0.5)
        with oc.project(TEAM):
            assert oc.selector("secret/to-configmap").object(ignore_not_found=True) is None
        print(kubectl(cluster, "get", "externalsecret,configmap", "to-configmap", "-n", TEAM))

        set_generic_targets(False)
        wait_for(controller_flag(False), "the controller to roll without the flag", 120)
        wait_esc(timeout=120)

        def refused() -> None:
            ready = _ready(model("externalsecret", "to-configmap", TEAM))
            assert ready is not None
            assert (ready["status"], ready.get("message")) == ("False",
                                                               "invalid generic target"), ready
            events = json.loads(kubectl(
                cluster, "get", "events", "-n", TEAM, "-o", "json", "--field-selector",
                "involvedObject.name=to-configmap,reason=UpdateFailed"))["items"]
            assert any("generic targets are disabled" in e.get("message", "")
                       for e in events), [e.get("message") for e in events]

        wait_for(refused, "the controller to refuse the generic target", 90, interval=0.5)
        assert model("configmap", "to-configmap", TEAM).get("data") == {"colour": "blue"}
    finally:
        set_generic_targets(False)


def _ready(obj: dict[str, Any]) -> dict[str, Any] | None:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), None)


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


# --- bitwarden-sdk-server ---------------------------------------------------------------------
#
# Both ways the API allows: a Secret the administrator made with openssl (secretRef), then
# the Certificate the operator asks cert-manager for. Each: the pod Ready (the runner's HTTPS
# probes), the ESC Ready, a TLS handshake verified as the controller's provider verifies it
# (the CA, the Service's DNS name the operator renders) presenting exactly that certificate,
# GET /ready; a new key pair reaching the serving process, which loads it only at start, so
# the operator must roll the pod (facts.py); the controller's Bitwarden provider reaching the
# server by the Service's name; and switched off, gone, with Ready back.

BITWARDEN = bitwarden.SERVICE  # the Deployment, its Service and its container
BITWARDEN_SECRET = "bitwarden-tls"  # the administrator's (secretRef)
ISSUED = "bitwarden-tls-certs"  # cert-manager's: the Certificate and its Secret
BITWARDEN_DNS = bitwarden.service_dns_name(NAMESPACE)
BITWARDEN_URL = f"https://{BITWARDEN_DNS}:{bitwarden.PORT}"
BITWARDEN_SELECTOR = {"app.kubernetes.io/name": BITWARDEN}
LOADED_CONTENT = "operator.openshift.io/loaded-content-hash"
# From the Secret's change until every answer comes from the new process: the operator's
# pass, a new pod Ready (probes a second apart here), the old one gone.
RENEWAL_BOUND = 60.0
SWITCHED_ANSWERS = 10  # this many answers in a row with the new certificate: switched
MAX_SAMPLE_INTERVAL = 1.0  # seconds between two requests, at most, or the sampler was starved
# The switch never leaves the Service without a ready endpoint (maxUnavailable 0: the new pod
# is Ready before the old one goes). Requests may still fail: the old process closes its
# listener at SIGTERM, and without a preStop sleep in the Deployment (the webhook's has one)
# that is when its endpoint's removal starts to propagate, so a request sent in between is
# reset, as on a cluster (where kube-proxy lags as the EndpointSlice does here). They are
# counted and printed; with a sleep there must be none.

# The Bitwarden provider's objects. The machine account's access token has the wrong format:
# bitwarden-sdk-server's SDK refuses it before any call to Bitwarden, so what comes back is
# the sdk-server's own answer, offline.
TOKEN_SECRET = "bitwarden-access-token"
ACCESS_TOKEN = "not-a-machine-account-token"
ORGANIZATION = "5b8a1f8e-2c7d-4f43-9d0e-3a6b7c8d9e01"
PROJECT = "0d6c2e4a-8b1f-4c3d-a5e7-9f1b2c3d4e5f"
SECRET_ID = "7e3f9a2b-1c4d-4e5f-8a6b-2c3d4e5f6a7b"  # a UUID: the provider asks for it by id
LOGIN_REFUSED = "failed to login to bitwarden using access token"  # bitwarden-sdk-server's
UNKNOWN_CA = "x509: certificate signed by unknown authority"  # Go's TLS client's


@dataclass(frozen=True)
class AdminCa:
    """The administrator's CA (openssl), which signs each key pair they put into the Secret."""

    directory: Path
    pem: bytes

    def key_pair(self, name: str) -> tuple[bytes, bytes]:
        return signed_key_pair(self.directory, "bitwarden-ca", name,
                               (BITWARDEN_DNS, f"{BITWARDEN}.{NAMESPACE}.svc"))


@pytest.fixture(scope="module")
def admin_ca(tmp_path_factory: pytest.TempPathFactory) -> AdminCa:
    directory = tmp_path_factory.mktemp("bitwarden-tls")
    return AdminCa(directory, base64.b64decode(self_signed_ca(directory, "bitwarden-ca")))


def apply_server_side(obj: dict[str, Any]) -> None:
    """Apply as the administrator, server-side: no last-applied annotation repeats a key."""
    oc.invoke("apply", ["--server-side", "--force-conflicts", "--field-manager=e2e", "-f", "-"],
              stdin_str=json.dumps(obj))


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def apply_tls_secret(cert: bytes, key: bytes, ca: bytes) -> None:
    apply_server_side({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                       "metadata": {"name": BITWARDEN_SECRET, "namespace": NAMESPACE},
                       "data": {"tls.crt": b64(cert), "tls.key": b64(key), "ca.crt": b64(ca)}})


def secret_key(name: str, key: str) -> bytes:
    return base64.b64decode(model("secret", name, NAMESPACE)["data"][key])


def bitwarden_pods() -> list[dict[str, Any]]:
    """bitwarden-sdk-server's pods that are not being deleted."""
    with oc.project(NAMESPACE):
        found = [p.as_dict() for p in oc.selector("pods", labels=BITWARDEN_SELECTOR).objects()]
    return [p for p in found if not p["metadata"].get("deletionTimestamp")]


def one_ready_bitwarden_pod() -> dict[str, Any]:
    pods = bitwarden_pods()
    assert len(pods) == 1, [p["metadata"]["name"] for p in pods]
    conditions = {c["type"]: c["status"] for c in pods[0]["status"].get("conditions") or []}
    assert conditions.get("Ready") == "True", pods[0]["status"]
    return pods[0]


def restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses") or [])


def wait_serving(ca: bytes, leaf: bytes, timeout: float = 60.0) -> dict[str, Any]:
    """Until the one bitwarden-sdk-server pod is Ready and answers GET /ready at its address
    with the certificate `leaf` (PEM), verified with `ca` for the Service's DNS name; the pod."""
    def check() -> dict[str, Any]:
        pod = one_ready_bitwarden_pod()
        try:
            answer = bitwarden.get_ready_at(pod["status"]["podIP"], ca, BITWARDEN_DNS)
        except OSError as error:  # ssl.SSLCertVerificationError among them
            raise AssertionError(f"{pod['metadata']['name']}: {error!r}") from error
        assert answer.leaf == bitwarden.der(leaf), "it presents another certificate"
        assert (answer.status, answer.body) == (200, "ready"), answer
        return pod

    return wait_for(check, "bitwarden-sdk-server to serve the certificate", timeout)


def wait_bitwarden_ready(timeout: float = 180.0) -> None:
    wait_esc(timeout=timeout)
    status = model("deployment", BITWARDEN, NAMESPACE)["status"]
    assert status.get("availableReplicas") == 1, status


@dataclass(frozen=True)
class Renewal:
    before: dict[str, Any]  # the pod that served the old certificate
    after: dict[str, Any]  # the one that serves the new certificate
    leaf: bytes  # the new certificate (PEM)
    figures: dict[str, Any]


def renew(cluster: Cluster, ca: bytes, change: Callable[[], None],
          new_leaf: Callable[[bytes], bytes]) -> Renewal:
    """`change` the certificate, and measure what a client of the Service sees meanwhile:
    the sampler asks GET /ready from inside the controller's pod at the Service's ClusterIP,
    verifying with `ca` for the Service's DNS name, every 0.1 s, from before the change until
    the last SWITCHED_ANSWERS answers present the new certificate (`new_leaf(old DER)`: its
    PEM, once it differs) and the old pod is gone."""
    before = one_ready_bitwarden_pod()
    old = bitwarden.get_ready_at(before["status"]["podIP"], ca, BITWARDEN_DNS).leaf
    controllers = operand_processes(cluster, "external-secrets")
    assert len(controllers) == 1, [p.pod for p in controllers]
    cluster_ip = model("service", BITWARDEN, NAMESPACE)["spec"]["clusterIP"]
    assert cluster.simulated is not None
    api = cluster.simulated.api
    sampler = bitwarden.RenewalSampler(
        lambda: bitwarden.get_ready_from(controllers[0].pid, cluster_ip, ca, BITWARDEN_DNS),
        lambda: bitwarden.ready_endpoints(api, NAMESPACE)).start()
    try:
        wait_for(lambda: _asserted(sampler.last_samples_serve(old, 5), sampler.samples[-5:]),
                 "the sampler's first answers", 30, interval=0.2)
        changed_at = sampler.elapsed()
        change()
        leaf = wait_for(lambda: new_leaf(old), "the new certificate in the Secret", 60)

        def switched() -> dict[str, Any]:
            assert sampler.last_samples_serve(bitwarden.der(leaf), SWITCHED_ANSWERS), (
                sampler.samples[-3:])
            return wait_serving(ca, leaf, timeout=0)

        after = wait_for(switched, "every answer to present the new certificate",
                         RENEWAL_BOUND + 30, interval=0.2)
    finally:
        sampler.stop()
    figures = sampler.figures(changed_at, bitwarden.der(leaf))
    print(f"bitwarden-sdk-server renewal, as the controller sees the Service: {figures}")
    return Renewal(before, after, leaf, figures)


def _asserted(holds: bool, context: object) -> None:
    assert holds, context


def assert_renewed(renewal: Renewal) -> None:
    """The operator rolled the pod (the loaded content's digest changed), the new process
    serves the new certificate, soon, the Service always had a ready endpoint, and no request
    failed if the old process had a preStop sleep to outlast its endpoint's removal."""
    old, new = renewal.before, renewal.after
    assert new["metadata"]["name"] != old["metadata"]["name"], "the pod was not replaced"
    hashes = [pod["metadata"].get("annotations", {}).get(LOADED_CONTENT) for pod in (old, new)]
    assert None not in hashes, hashes
    assert hashes[0] != hashes[1], hashes
    assert restarts(new) == 0, new["status"]
    figures = renewal.figures
    assert figures["first_new_s"] is not None, figures
    assert figures["first_new_s"] <= RENEWAL_BOUND, figures
    assert figures["largest_interval_s"] <= MAX_SAMPLE_INTERVAL, (
        f"the sampler could not see the switch: {figures}")
    assert figures["fewest_ready_endpoints"] >= 1, figures
    if pre_stop_sleep(new):
        assert figures["failed"] == 0, figures


def pre_stop_sleep(pod: dict[str, Any]) -> int:
    """Seconds of bitwarden-sdk-server's preStop sleep hook (0: none)."""
    container = next(c for c in pod["spec"]["containers"] if c["name"] == BITWARDEN)
    hook = ((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}
    return int(hook.get("seconds") or 0)


def bitwarden_store(name: str, ca: bytes) -> dict[str, Any]:
    return secret_store(name, {"bitwardensecretsmanager": {
        "bitwardenServerSDKURL": BITWARDEN_URL, "caBundle": b64(ca),
        "organizationID": ORGANIZATION, "projectID": PROJECT,
        "auth": {"secretRef": {"credentials": {"name": TOKEN_SECRET, "key": "token"}}}}})


def events_of(kind: str, name: str, namespace: str) -> list[str]:
    with oc.project(namespace):
        listing = oc.invoke("get", ["events", "-o", "json", "--field-selector",
                                    f"involvedObject.kind={kind},involvedObject.name={name}"])
    return [str(e.get("message") or "") for e in json.loads(listing.out())["items"]]


def provider_error(store: str, ca: bytes, must_contain: str) -> str:
    """A SecretStore of the bitwarden provider with `ca` and an ExternalSecret of it; the
    first failure the controller reports for it (an Event: the status says only that the
    provider failed) that holds `must_contain`."""
    name = f"from-{store}"
    oc.apply(bitwarden_store(store, ca))
    oc.apply(external_secret(name, store, [
        {"secretKey": "value", "remoteRef": {"key": SECRET_ID}}]))

    def reported() -> str:
        messages = events_of("ExternalSecret", name, TEAM)
        found = [m for m in messages if must_contain in m]
        assert found, messages
        status = model("externalsecret", name, TEAM).get("status") or {}
        ready = [c for c in status.get("conditions") or [] if c["type"] == "Ready"]
        assert [c["status"] for c in ready] == ["False"], status
        return found[0]

    message: str = wait_for(reported, f"the controller's error for {store}", 60, interval=1)
    print(f"{name}: {message}")
    return message


def assert_reached_by_service_name(ca: bytes, store: str) -> None:
    """The controller's Bitwarden provider calls bitwarden-sdk-server at the Service's name,
    over TLS verified with `ca`: the answer is the sdk-server's own refusal of the token
    (status 400), and the sdk-server logged the request for that name. The same store with
    another CA fails the handshake, so the first answer came over verified TLS."""
    apply_server_side({"apiVersion": "v1", "kind": "Secret",
                       "metadata": {"name": TOKEN_SECRET, "namespace": TEAM},
                       "stringData": {"token": ACCESS_TOKEN}})
    message = provider_error(store, ca, LOGIN_REFUSED)
    assert "status code 400" in message, message
    assert UNKNOWN_CA not in message, message
    assert "no such host" not in message, message
    request = f'"GET https://{BITWARDEN_DNS}:{bitwarden.PORT}/rest/api/1/secret HTTP/1.1"'

    def logged() -> None:
        with oc.project(NAMESPACE):
            logs = oc.invoke("logs", [f"deployment/{BITWARDEN}"]).out()
        assert request in logs, logs[-2000:]

    wait_for(logged, "bitwarden-sdk-server to log the controller's request", 10)

    other = base64.b64decode(self_signed_ca(Path(tempfile.mkdtemp()), "another-ca"))
    refused = provider_error(f"{store}-other-ca", other, UNKNOWN_CA)
    assert LOGIN_REFUSED not in refused, refused
    with oc.project(TEAM):
        for kind, name in (("externalsecret", f"from-{store}"),
                           ("externalsecret", f"from-{store}-other-ca"),
                           ("secretstore", store), ("secretstore", f"{store}-other-ca")):
            oc.selector(f"{kind}/{name}").delete()


def test_bitwarden_with_the_administrators_certificate_becomes_ready(
        cluster: Cluster, operand: None, admin_ca: AdminCa) -> None:
    cert, key = admin_ca.key_pair("bitwarden-1")
    apply_tls_secret(cert, key, admin_ca.pem)
    patch_esc({"appConfig": {"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": BITWARDEN_SECRET}}}})
    wait_bitwarden_ready()
    one_ready_bitwarden_pod()
    print(kubectl(cluster, "get", "pods", "-n", NAMESPACE, "-l",
                  f"app.kubernetes.io/name={BITWARDEN}", "-o", "wide"))


@pytest.mark.skipif(USE_EXISTING_CLUSTER, reason="reaches pod addresses of the simulated cluster")
def test_bitwarden_serves_that_certificate_verified_for_its_service_name(
        cluster: Cluster, operand: None, admin_ca: AdminCa) -> None:
    """The real bitwarden-sdk-server, its HTTPS probes passing (Ready, and no liveness
    restart), presents the administrator's certificate, which verifies with their CA for
    the Service's DNS name."""
    pod = wait_serving(admin_ca.pem, secret_key(BITWARDEN_SECRET, "tls.crt"))
    process = operand_processes(cluster, BITWARDEN)
    assert [p.pod for p in process] == [pod["metadata"]["name"]]
    assert process[0].argv[-1] == "serve", process[0].argv
    assert process[0].argv[0].endswith("/" + BITWARDEN), process[0].argv
    time.sleep(4)  # a few liveness probes (HTTPS /live, a second apart here)
    assert restarts(model("pod", pod["metadata"]["name"], NAMESPACE)) == 0
    with pytest.raises(ssl.SSLCertVerificationError):  # the name is checked, not only the CA
        bitwarden.get_ready_at(pod["status"]["podIP"], admin_ca.pem, "elsewhere.example.com")


@pytest.mark.skipif(USE_EXISTING_CLUSTER, reason="samples from inside a simulated pod")
def test_a_new_key_pair_in_the_bitwarden_secret_reaches_the_serving_process(
        cluster: Cluster, operand: None, admin_ca: AdminCa) -> None:
    """The administrator replaces the key pair (same CA): bitwarden-sdk-server read the old
    one at start and never again, so only the operator's roll puts the new one in service."""
    cert, key = admin_ca.key_pair("bitwarden-2")

    def new_leaf(old: bytes) -> bytes:
        current = secret_key(BITWARDEN_SECRET, "tls.crt")
        assert bitwarden.der(current) != old
        return current

    renewal = renew(cluster, admin_ca.pem, lambda: apply_tls_secret(cert, key, admin_ca.pem),
                    new_leaf)
    assert renewal.leaf == cert
    assert_renewed(renewal)
    wait_esc(timeout=60)


def test_the_controller_reaches_bitwarden_by_its_service_name_over_verified_tls(
        operand: None, admin_ca: AdminCa) -> None:
    assert_reached_by_service_name(admin_ca.pem, "bitwarden")


def test_bitwarden_off_removes_it_and_the_esc_is_ready_again(operand: None) -> None:
    patch_esc({"appConfig": {"bitwardenSecretManagerProvider": {"enabled": "false"}}})
    wait_esc(timeout=120)
    with oc.project(NAMESPACE):
        for kind in ("deployment", "service", "serviceaccount"):
            assert oc.selector(f"{kind}/{BITWARDEN}").object(ignore_not_found=True) is None, kind
    wait_for(lambda: _asserted(not bitwarden_pods(), "pods left"), "its pods to go", 60)
    with oc.project(NAMESPACE):
        oc.selector(f"secret/{BITWARDEN_SECRET}").delete()


CA_ISSUER = "bitwarden-ca-issuer"


def install_cert_manager_crds() -> Path:
    directory = fetched_crds() / "cert-manager"
    oc.invoke("apply", ["--server-side", "--force-conflicts", "--field-manager=e2e",
                        "-f", str(directory)])
    oc.invoke("wait", ["--for=condition=Established", "--timeout=60s", "-f", str(directory)])
    return directory


def create_ca_issuer() -> None:
    """A CA of its own for the operand namespace, as in production: renewals keep the CA."""
    def issuer(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec}

    oc.apply(issuer("bitwarden-selfsigned", {"selfSigned": {}}))
    oc.apply({"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
              "metadata": {"name": "bitwarden-ca", "namespace": NAMESPACE},
              "spec": {"isCA": True, "commonName": "bitwarden-ca", "secretName": "bitwarden-ca",
                       "privateKey": {"algorithm": "ECDSA", "size": 256},
                       "issuerRef": {"name": "bitwarden-selfsigned", "kind": "Issuer"}}})
    oc.apply(issuer(CA_ISSUER, {"ca": {"secretName": "bitwarden-ca"}}))
    with oc.project(NAMESPACE):
        oc.invoke("wait", ["--for=condition=Ready", "--timeout=60s", f"issuer/{CA_ISSUER}"])


def force_renewal(certificate: str) -> None:
    """Renew now, as `cmctl renew` does: an Issuing condition on the Certificate's status."""
    conditions = [c for c in (model("certificate", certificate, NAMESPACE).get("status") or {})
                  .get("conditions") or [] if c["type"] != "Issuing"]
    with oc.project(NAMESPACE):
        oc.invoke("patch", [f"certificate/{certificate}", "--subresource=status", "--type=merge",
                            "-p", json.dumps({"status": {"conditions": [*conditions, {
                                "type": "Issuing", "status": "True",
                                "reason": "ManuallyTriggered",
                                "message": "renewal forced by the test (as cmctl renew does)"}]}})])


@pytest.mark.skipif(USE_EXISTING_CLUSTER, reason="runs cert-manager as processes")
def test_bitwarden_with_the_cert_manager_certificate_serves_it_and_follows_a_renewal(
        cluster: Cluster, operand: None, cert_manager: CertManager) -> None:
    """cert-manager issues bitwarden-sdk-server's certificate (the operator's Certificate,
    the CA Issuer named in certManagerConfig); it serves it, verified with the issued CA for
    the Service's name; a renewal (a new key) reaches the serving process; the controller
    reaches it by name with that CA. cert-manager cannot be switched off again, so the
    scenario ends by removing the ExternalSecretsConfig, the operand and cert-manager's CRDs."""
    crds = install_cert_manager_crds()
    try:
        cert_manager.start()
        create_ca_issuer()
        patch_esc({"appConfig": {
            "certManagerConfig": {"enabled": "true",
                                  "issuerRef": {"name": CA_ISSUER, "kind": "Issuer"}},
            "bitwardenSecretManagerProvider": {"enabled": "true", "secretRef": None}}})
        wait_bitwarden_ready(timeout=240)
        issued_ca = secret_key(ISSUED, "ca.crt")
        assert issued_ca == secret_key("bitwarden-ca", "tls.crt")  # the CA Issuer's own CA
        wait_serving(issued_ca, secret_key(ISSUED, "tls.crt"))

        def new_leaf(old: bytes) -> bytes:
            current = secret_key(ISSUED, "tls.crt")
            assert bitwarden.der(current) != old
            return current

        renewal = renew(cluster, issued_ca, lambda: force_renewal(ISSUED), new_leaf)
        assert secret_key(ISSUED, "ca.crt") == issued_ca, "the renewal changed the CA"
        assert_renewed(renewal)
        wait_esc(timeout=60)
        assert_reached_by_service_name(issued_ca, "bitwarden-issued")

        patch_esc({"appConfig": {"bitwardenSecretManagerProvider": {"enabled": "false"}}})
        wait_esc(timeout=120)
        with oc.project(NAMESPACE):
            for kind, name in (("deployment", BITWARDEN), ("certificate", ISSUED)):
                assert oc.selector(f"{kind}/{name}").object(ignore_not_found=True) is None, kind
    finally:  # the operand, cert-manager (its objects with its CRDs) and the Secrets it made
        oc.selector(ESC).delete(ignore_not_found=True)
        result = uninstall_command(cluster, "--yes", f"--namespace={NAMESPACE}")
        print(result.stdout, result.stderr)
        cert_manager.stop()
        oc.invoke("delete", ["--ignore-not-found", "--wait=true", "-f", str(crds)])
        with oc.project(NAMESPACE):
            oc.selector([f"secret/{name}" for name in (
                "bitwarden-ca", ISSUED, WEBHOOK_SECRET_CERT_MANAGER)]).delete(
                ignore_not_found=True)
