"""A real secret provider reached through the operator's own knobs: AWS Secrets Manager, SSM
Parameter Store and STS, served by moto over TLS with a private CA, synced by the real
external-secrets controller (its aws provider) that the operator installs and configures.

What the administrator sets, and what each scenario proves it does:

- `componentConfigs[ExternalSecretsCoreController].overrideEnv`: the AWS provider's endpoint
  variables (`AWS_SECRETSMANAGER_ENDPOINT`, `AWS_SSM_ENDPOINT`, `AWS_STS_ENDPOINT`, read by
  external-secrets' `providers/v1/aws/*/resolver.go`, v1.3.2 and v2.9.0) point the controller
  at moto.
  The Secrets Manager store assumes a role, so every sync goes through STS first.
- `appConfig.trustedCABundle`: a ConfigMap with moto's private CA. With it the controller
  verifies moto's certificate and syncs, and follows rotations; with another CA in its place
  the operator rolls the controller, which then fails its TLS handshakes: the
  ExternalSecretsConfig stays Ready (the operator did its part) while the ExternalSecrets
  fail. external-secrets keeps their status conditions generic ("could not get secret data
  from provider", and "unable to validate store" for the store whose STS call failed) and
  says the x509 problem whole in their Events, where `kubectl describe` shows it.
- `controllerConfig.networkPolicies`: the provider egress policy narrowed to moto's address.
  The simulated cluster has no CNI, so NetworkPolicies are not enforced here: the scenario
  checks what the operator renders (the default policy pruned, the declared one selecting the
  controller's pods and naming only that address), and that syncing goes on.
- `appConfig.proxy`: a real forward proxy (tinyproxy) carries the provider traffic, while
  the NO_PROXY the operator completes keeps the API server off it: tinyproxy's log shows
  CONNECTs to moto's address and to nothing else.

Network: moto listens on 192.0.2.30:443 (TEST-NET-1, added to `lo` of the test's network
namespace for the module) and tinyproxy on a free port of 127.0.0.1; both are declared as
egress addresses of the simulated cluster (devcluster/egress.py), so the controller's pods
find them at 192.0.2.30:443 and 192.0.2.31:3128. No packet leaves loopback. The address is
not a loopback address on purpose: Go never proxies loopback addresses.

One install serves every scenario, in order; it is removed at the end. Only on the simulated
cluster: the provider and the proxy are the test's own processes.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import openshift_client as oc
import pytest

from tests.conftest import Cluster
from tests.e2e.conftest import (
    ESC,
    USE_EXISTING_CLUSTER,
    condition,
    uninstall_command,
    wait_esc,
)
from tests.e2e.operator_process import OperatorProcess
from tests.forward_proxy import ForwardProxy, tinyproxy
from tests.moto_server import ACCESS_KEY_ID, REGION, SECRET_ACCESS_KEY, MotoServer, moto_server
from tests.private_ca import private_ca
from tests.waiting import wait_for

pytestmark = pytest.mark.skipif(
    USE_EXISTING_CLUSTER, reason="moto and the proxy run beside the simulated cluster")

NAMESPACE = "eso-aws"            # the operand's, created by the administrator beforehand
TEAM = "eso-aws-team"            # where users keep their SecretStores and ExternalSecrets
MOTO_HOST = "192.0.2.30"         # moto's address, in the pods and in the test's namespace
PROXY_ADDRESS = ("192.0.2.31", 3128)  # the proxy's address inside the pods
PROXY_URL = f"http://{PROXY_ADDRESS[0]}:{PROXY_ADDRESS[1]}"
CA_CONFIGMAP = "aws-private-ca"
CA_KEY = "private-ca.pem"        # not the default key: the mapping to the mounted file counts
ROLE = "arn:aws:iam::123456789012:role/eso-reader"
SECRET_NAME = "team/db"          # in Secrets Manager, JSON
PARAMETER = "/team/api-token"    # in Parameter Store
REFRESH = "2s"
CONTROLLER = "external-secrets"
DEFAULT_EGRESS_POLICY = "allow-provider-egress-for-main-controller"
NARROWED_POLICY = "allow-aws-provider"


@dataclass
class Aws:
    moto: MotoServer
    proxy: ForwardProxy
    directory: Path
    sm: Any   # boto3 clients of the test, trusting the private CA
    ssm: Any

    def rotate(self, value: str) -> None:
        """A new current version of the secret and of the parameter in moto."""
        self.sm.put_secret_value(SecretId=SECRET_NAME, SecretString=json.dumps(
            {"username": "app", "password": f"sm-{value}"}))
        self.ssm.put_parameter(Name=PARAMETER, Value=f"ssm-{value}", Type="String",
                               Overwrite=True)


def esc_spec(moto: MotoServer) -> dict[str, Any]:
    """What the administrator applies (docs/configuration.md, "A provider behind a proxy
    and a private CA", without the proxy, which a scenario adds)."""
    return {
        "controllerConfig": {
            "namespace": NAMESPACE,
            "componentConfigs": [{
                "componentName": "ExternalSecretsCoreController",
                "overrideEnv": [{"name": name, "value": moto.url} for name in (
                    "AWS_SECRETSMANAGER_ENDPOINT", "AWS_SSM_ENDPOINT", "AWS_STS_ENDPOINT")],
            }],
        },
        "appConfig": {"trustedCABundle": {"configMapName": CA_CONFIGMAP, "key": CA_KEY}},
    }


def ca_configmap(pem: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": CA_CONFIGMAP, "namespace": NAMESPACE}, "data": {CA_KEY: pem}}


@pytest.fixture(scope="module")
def aws(cluster: Cluster, operator: OperatorProcess | None,
        tmp_path_factory: pytest.TempPathFactory) -> Iterator[Aws]:
    """moto and tinyproxy running and declared to the cluster, the operand installed with
    the endpoints and the private CA, and Ready; afterwards all of it goes."""
    simulated = cluster.simulated
    assert simulated is not None
    directory = tmp_path_factory.mktemp("aws")
    with moto_server(directory, MOTO_HOST) as moto, tinyproxy(directory) as proxy:
        try:
            # Before the operand's pods start: a pod gets the egress addresses declared
            # earlier.
            simulated.add_egress((MOTO_HOST, moto.port), (MOTO_HOST, moto.port))
            simulated.add_egress(PROXY_ADDRESS, (proxy.host, proxy.port))
            for namespace in (NAMESPACE, TEAM):
                oc.invoke("create", ["namespace", namespace])
            oc.apply(ca_configmap(moto.tls.ca.read_text()))
            oc.apply({"apiVersion": "operator.openshift.io/v1alpha1",
                      "kind": "ExternalSecretsConfig", "metadata": {"name": "cluster"},
                      "spec": esc_spec(moto)})
            yield Aws(moto, proxy, directory, moto.client("secretsmanager"),
                      moto.client("ssm"))
        finally:
            # The users' objects first, while the controller still runs: external-secrets
            # (v1.3.2 and v2.9.0) puts a finalizer on every ExternalSecret, which only it removes.
            cluster.kubectl("delete", "namespace", TEAM, "--timeout=60s", check=False)
            oc.selector(ESC).delete(ignore_not_found=True)
            result = uninstall_command(cluster, "--yes", f"--namespace={NAMESPACE}")
            print(result.stdout, result.stderr)
            cluster.kubectl("delete", "namespace", NAMESPACE, "--wait=false", check=False)
            simulated.remove_egress((MOTO_HOST, moto.port))
            simulated.remove_egress(PROXY_ADDRESS)


# --- what the administrator and the users look at ---------------------------------------


def model(kind: str, name: str, namespace: str) -> dict[str, Any]:
    with oc.project(namespace):
        found = oc.selector(f"{kind}/{name}").object(ignore_not_found=True)
    assert found is not None, f"{kind} {namespace}/{name} does not exist"
    result: dict[str, Any] = found.as_dict()
    return result


def ready_condition(obj: dict[str, Any]) -> dict[str, Any]:
    found = condition(obj, "Ready")
    assert found is not None, obj.get("status")
    return found


def secret_data(name: str) -> dict[str, str]:
    data = model("secret", name, TEAM).get("data") or {}
    return {key: base64.b64decode(value).decode() for key, value in data.items()}


def wait_synced(name: str, expected: dict[str, str], timeout: float = 30.0) -> None:
    """Until the ExternalSecret is Ready and its target Secret holds `expected` (test values,
    not secrets)."""
    def check() -> None:
        ready = ready_condition(model("externalsecret", name, TEAM))
        assert ready["status"] == "True", ready
        assert secret_data(name) == expected

    wait_for(check, f"secret/{name} to hold {expected}", timeout, interval=0.5)


def wait_all_synced(version: str, timeout: float = 30.0) -> None:
    wait_synced("from-secrets-manager", {"password": f"sm-{version}"}, timeout)
    wait_synced("from-parameter-store", {"token": f"ssm-{version}"}, timeout)


def controller_process(cluster: Cluster, check: Callable[[Any], None], what: str) -> Any:
    """Until the one running controller process satisfies `check` (after a rollout)."""
    assert cluster.simulated is not None
    simulated = cluster.simulated

    def one() -> Any:
        processes = simulated.processes(NAMESPACE, CONTROLLER)
        assert len(processes) == 1, [p.pod for p in processes]
        check(processes[0])
        return processes[0]

    return wait_for(one, what, 120)


def patch_esc(spec: dict[str, Any]) -> None:
    oc.selector(ESC).object().patch({"spec": spec}, strategy="merge")


def events(cluster: Cluster, kind: str, name: str, reason: str) -> list[dict[str, Any]]:
    """The Events of `kind` `name` in the team's namespace with `reason`, as `kubectl
    describe` shows them."""
    listing = json.loads(cluster.kubectl(
        "get", "events", "-n", TEAM, "-o", "json", "--field-selector",
        f"involvedObject.kind={kind},involvedObject.name={name},reason={reason}",
    ).stdout)
    items: list[dict[str, Any]] = listing["items"]
    return items


def moto_models(moto: MotoServer) -> dict[str, Any]:
    """moto's own view of what it holds (`/moto-api/data.json`), over TLS."""
    context = ssl.create_default_context(cafile=str(moto.tls.ca))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    with opener.open(f"{moto.url}/moto-api/data.json", timeout=10) as answer:
        data: dict[str, Any] = json.load(answer)
        return data


# --- the scenarios, in order --------------------------------------------------------------


def test_secrets_manager_and_parameter_store_sync_through_the_private_ca_and_follow_rotation(
        cluster: Cluster, aws: Aws) -> None:
    esc = wait_esc(timeout=180)
    assert (condition(esc, "Degraded") or {}).get("status") == "False", esc["status"]

    def configured(process: Any) -> None:
        for name in ("AWS_SECRETSMANAGER_ENDPOINT", "AWS_SSM_ENDPOINT", "AWS_STS_ENDPOINT"):
            assert process.env.get(name) == aws.moto.url, (name, process.env.get(name))
        assert process.env.get("SSL_CERT_DIR", "").split(":")[-1] == (
            "/etc/external-secrets/trusted-ca"), process.env.get("SSL_CERT_DIR")
        assert "HTTPS_PROXY" not in process.env

    controller_process(cluster, configured, "the controller with the endpoints and the CA")
    deployment = model("deployment", CONTROLLER, NAMESPACE)
    [volume] = [v for v in deployment["spec"]["template"]["spec"]["volumes"]
                if (v.get("configMap") or {}).get("name") == CA_CONFIGMAP]
    assert volume["configMap"]["items"] == [{"key": CA_KEY, "path": "ca-bundle.crt"}]

    aws.sm.create_secret(Name=SECRET_NAME, SecretString=json.dumps(
        {"username": "app", "password": "sm-v1"}))
    aws.ssm.put_parameter(Name=PARAMETER, Value="ssm-v1", Type="String")
    oc.apply({"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "aws-credentials", "namespace": TEAM},
              "stringData": {"access-key-id": ACCESS_KEY_ID,
                             "secret-access-key": SECRET_ACCESS_KEY}})
    auth = {"secretRef": {
        "accessKeyIDSecretRef": {"name": "aws-credentials", "key": "access-key-id"},
        "secretAccessKeySecretRef": {"name": "aws-credentials", "key": "secret-access-key"}}}
    for name, provider in (
            ("secrets-manager", {"service": "SecretsManager", "role": ROLE}),
            ("parameter-store", {"service": "ParameterStore"})):
        oc.apply({"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                  "metadata": {"name": name, "namespace": TEAM},
                  "spec": {"provider": {"aws": {**provider, "region": REGION,
                                                "auth": auth}}}})
    for name, store, data in (
            ("from-secrets-manager", "secrets-manager",
             [{"secretKey": "password", "remoteRef": {"key": SECRET_NAME,
                                                      "property": "password"}}]),
            ("from-parameter-store", "parameter-store",
             [{"secretKey": "token", "remoteRef": {"key": PARAMETER}}])):
        oc.apply({"apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
                  "metadata": {"name": name, "namespace": TEAM},
                  "spec": {"refreshInterval": REFRESH,
                           "secretStoreRef": {"name": store, "kind": "SecretStore"},
                           "target": {"name": name}, "data": data}})
    wait_all_synced("v1", timeout=90)

    # The Secrets Manager store's credentials came from STS (AssumeRole at moto's endpoint):
    # the store validated, and moto holds the role session the controller asked for.
    def validated() -> None:
        for name in ("secrets-manager", "parameter-store"):
            ready = ready_condition(model("secretstore", name, TEAM))
            assert ready["status"] == "True", (name, ready)
    wait_for(validated, "both SecretStores to be validated", 30)
    assumed = moto_models(aws.moto).get("sts", {}).get("AssumedRole", [])
    assert ROLE in {role.get("role_arn") for role in assumed}, assumed

    aws.rotate("v2")
    wait_all_synced("v2")  # within a few refresh intervals (2 s)
    print(cluster.kubectl("get", "externalsecrets,secretstores", "-n", TEAM).stdout)


def test_a_wrong_ca_fails_the_sync_not_the_operator(cluster: Cluster, aws: Aws) -> None:
    """Another CA in the administrator's ConfigMap: the operator rolls the controller (Go
    reads its roots once), which then cannot verify moto's certificate. That is the
    operand's failure, reported where a user looks (the ExternalSecret), while the
    ExternalSecretsConfig stays Ready. The right CA back, syncing resumes."""
    before = model("deployment", CONTROLLER, NAMESPACE)["spec"]["template"]["metadata"]
    started = time.time()
    impostor = private_ca(aws.directory, "impostor-ca")
    oc.apply(ca_configmap(impostor.read_text()))

    def failing() -> None:
        for name in ("from-secrets-manager", "from-parameter-store"):
            ready = ready_condition(model("externalsecret", name, TEAM))
            assert ready["status"] == "False", (name, ready)
            assert ready["reason"] == "SecretSyncedError", ready
            assert ready["message"] == "could not get secret data from provider", ready
    wait_for(failing, "both ExternalSecrets to fail with the wrong CA", 90)

    # The cause is in the Events, whole: the ExternalSecret's own for the Parameter Store
    # (its GetParameter failed); for Secrets Manager the store's (STS AssumeRole failed, so
    # the store is not ready, and its ExternalSecret says only that).
    def x509_reported() -> dict[str, str]:
        found = {}
        for kind, name, reason in (("ExternalSecret", "from-parameter-store", "UpdateFailed"),
                                   ("SecretStore", "secrets-manager", "InvalidProviderConfig")):
            messages = [event["message"] for event in events(cluster, kind, name, reason)
                        if event.get("type") == "Warning"]
            tls = [m for m in messages if "x509: certificate signed by unknown authority" in m]
            assert tls, (kind, name, messages)
            found[f"{kind} {name}"] = tls[-1]
        return found
    reported = wait_for(x509_reported, "the x509 error in the Events", 30)
    for message in reported.values():
        assert "tls: failed to verify certificate" in message, message
        assert MOTO_HOST in message, message  # which endpoint failed is said
    store = ready_condition(model("secretstore", "secrets-manager", TEAM))
    assert (store["status"], store["message"]) == ("False", "unable to validate store"), store
    assert "STS: AssumeRole" in reported["SecretStore secrets-manager"], reported
    assert "SSM: GetParameter" in reported["ExternalSecret from-parameter-store"], reported

    after = model("deployment", CONTROLLER, NAMESPACE)["spec"]["template"]["metadata"]
    assert after.get("annotations") != before.get("annotations"), (
        "the CA's new content did not roll the controller")
    esc = wait_esc(timeout=60)  # the operator's part works: Ready, not Degraded
    assert (condition(esc, "Degraded") or {}).get("status") == "False", esc["status"]
    assert ready_condition(model("externalsecret", "from-secrets-manager", TEAM))[
        "status"] == "False"
    print(f"  the wrong CA failed the sync {time.time() - started:.1f} s after the change:")
    for where, message in reported.items():
        print(f"    {where}: {message}")

    oc.apply(ca_configmap(aws.moto.tls.ca.read_text()))
    aws.rotate("v3")
    wait_all_synced("v3", timeout=90)
    wait_esc(timeout=60)


def test_the_provider_egress_policy_names_only_the_provider(
        cluster: Cluster, aws: Aws) -> None:
    """NetworkPolicies are not enforced on the simulated cluster (no CNI): this checks what
    the operator renders and that it changes nothing for syncing."""
    with oc.project(NAMESPACE):
        assert oc.selector(f"networkpolicy/{DEFAULT_EGRESS_POLICY}").object(
            ignore_not_found=True) is not None
    rule = {"to": [{"ipBlock": {"cidr": f"{MOTO_HOST}/32"}}],
            "ports": [{"protocol": "TCP", "port": aws.moto.port}]}
    patch_esc({"controllerConfig": {"networkPolicies": [{
        "name": NARROWED_POLICY, "componentName": "ExternalSecretsCoreController",
        "egress": [rule]}]}})
    wait_esc(timeout=60)

    def narrowed() -> dict[str, Any]:
        with oc.project(NAMESPACE):
            assert oc.selector(f"networkpolicy/{DEFAULT_EGRESS_POLICY}").object(
                ignore_not_found=True) is None, "the default provider egress policy stayed"
        return model("networkpolicy", NARROWED_POLICY, NAMESPACE)
    policy = wait_for(narrowed, "the declared policy in place of the default", 30)
    spec = policy["spec"]
    assert spec["policyTypes"] == ["Egress"], spec
    assert spec["egress"] == [rule], spec
    peers = [peer for egress in spec["egress"] for peer in egress.get("to") or []]
    assert [peer["ipBlock"]["cidr"] for peer in peers] == [f"{MOTO_HOST}/32"], peers
    # It selects the controller's pods, and only them.
    selector = spec["podSelector"]["matchLabels"]
    labels = model("deployment", CONTROLLER, NAMESPACE)["spec"]["template"]["metadata"][
        "labels"]
    assert selector, spec["podSelector"]
    assert selector.items() <= labels.items(), (selector, labels)
    for other in ("external-secrets-webhook", "external-secrets-cert-controller"):
        other_labels = model("deployment", other, NAMESPACE)["spec"]["template"]["metadata"][
            "labels"]
        assert not selector.items() <= other_labels.items(), (other, selector)

    aws.rotate("v4")
    wait_all_synced("v4")

    patch_esc({"controllerConfig": {"networkPolicies": None}})
    wait_esc(timeout=60)

    def default_back() -> None:
        with oc.project(NAMESPACE):
            assert oc.selector(f"networkpolicy/{DEFAULT_EGRESS_POLICY}").object(
                ignore_not_found=True) is not None
            assert oc.selector(f"networkpolicy/{NARROWED_POLICY}").object(
                ignore_not_found=True) is None
    wait_for(default_back, "the default provider egress policy back", 30)


def test_a_forward_proxy_carries_the_provider_traffic_and_never_the_api_server(
        cluster: Cluster, aws: Aws) -> None:
    patch_esc({"appConfig": {"proxy": {"httpProxy": PROXY_URL, "httpsProxy": PROXY_URL}}})
    service_host: dict[str, str] = {}

    def proxied(process: Any) -> None:
        assert process.env.get("HTTPS_PROXY") == PROXY_URL, process.env.get("HTTPS_PROXY")
        host = process.env.get("KUBERNETES_SERVICE_HOST")
        assert host, "no KUBERNETES_SERVICE_HOST"
        # The operator completes NO_PROXY: the API server's ClusterIP stays in the cluster.
        assert host in (process.env.get("NO_PROXY") or "").split(","), process.env
        service_host["ip"] = host
    controller_process(cluster, proxied, "the controller to run with the proxy")
    wait_esc(timeout=90)
    seen_before = len(aws.proxy.connect_targets())

    aws.rotate("v5")
    wait_all_synced("v5", timeout=60)

    targets = aws.proxy.connect_targets()[seen_before:]
    print(f"  CONNECTs through tinyproxy: {len(targets)} ({sorted(set(targets))})")
    assert targets, "the provider traffic did not go through the proxy"
    assert set(targets) == {f"{MOTO_HOST}:{aws.moto.port}"}, targets
    # Nothing else, ever: no plain request, no tunnel to the API server (its ClusterIP, or
    # its own address, which the pods never see).
    everything = aws.proxy.requests()
    assert {method for method, _ in everything} == {"CONNECT"}, everything
    assert cluster.local is not None
    api_hosts = {service_host["ip"], urlsplit(cluster.local.server).hostname}
    assert not [target for _, target in everything
                if target.rsplit(":", 1)[0] in api_hosts], everything

    patch_esc({"appConfig": {"proxy": None}})
    controller_process(cluster, _unproxied, "the controller to run without the proxy")
    wait_esc(timeout=90)
    seen = len(aws.proxy.connect_targets())
    aws.rotate("v6")
    wait_all_synced("v6", timeout=60)
    assert len(aws.proxy.connect_targets()) == seen, "the proxy still carries traffic"


def _unproxied(process: Any) -> None:
    assert "HTTPS_PROXY" not in process.env, process.env.get("HTTPS_PROXY")

