"""`python -m manager gather` on the simulated cluster: the operator runs as its Deployment
(the operator image: this source tree), the operand's processes are real, and `kubectl logs`
serves their output (devcluster/podlogs.py). Sentinel values are planted wherever a secret
can hide (Secrets, the bitwarden TLS Secret: a real key pair, which bitwarden-sdk-server
serves; a proxy URL's password, overrideEnv, the operator's own environment, literally and
from a Secret, Secret annotations, a Deployment's `--token=...` and `--password ...`
arguments, a probe's HTTP header, a Vault token, an AWS access key ID and a `password=...` in
a container's log); the bundle must hold none of them, in any member, raw or
base64-encoded, and every part it lists. Another operator installed in the operator's
namespace (a Deployment, its Pod and log, a Secret) must not appear at all.

The must-gather contract besides: the `version` file, and logs limited by MUST_GATHER_SINCE_TIME
and MUST_GATHER_SINCE as `oc adm must-gather --since-time/--since` sets them; a workload that
prints a numbered line every second (its times as `kubectl logs --timestamps` shows them)
tells which lines a window must leave out."""

from __future__ import annotations

import base64
import functools
import gzip
import json
import os
import re
import secrets
import shlex
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import crds
from devcluster import images as image_map
from devcluster.pods import ImageEntry
from manager import versions
from manager.offline.gather import SECURE_METRICS
from manager.offline.logwindow import SINCE_TIME_VARIABLE, SINCE_VARIABLE, format_time
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.conftest import Cluster
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret, counts_as_installed
from tests.waiting import wait_for

OPERATOR_NS = "external-secrets-operator"
OPERATOR_DEPLOYMENT = "external-secrets-operator-controller-manager"
OPERAND_NS = "eso-gather"
IMAGE = "example.test/external-secrets-operator:gather-test"
OPERATOR_MANIFESTS = ("namespace", "serviceaccount", "rbac", "metrics-service", "deployment")
TOKEN = secrets.token_hex(6)
SENTINELS = {where: f"sentinel{where}{TOKEN}" for where in (
    "UserSecret", "ProxyPassword", "OverrideEnv",
    "OperatorEnv", "OperatorSecretEnv", "SecretAnnotation", "OperatorSecretAnnotation",
    "ArgToken", "ArgPassword", "CommandPassword", "ProbeHeader", "LogPassword",
    "OtherSecret", "OtherLog")}
# Found by their shape alone: they are in no object, only in the printer's log.
SENTINELS["VaultToken"] = f"hvs.CAESI{TOKEN}sentinelVault"
SENTINELS["AwsKeyId"] = f"AKIA{TOKEN.upper()}SNTL"
# Another operator in the operator's namespace: its name is in all its objects and its pod's.
OTHER_OPERATOR = SENTINELS["OtherOperator"] = f"other-operator-{TOKEN}"
PRINTER = "sentinel-printer"  # a workload planted in the operand's namespace
PRINTER_IMAGE = "example.test/printer:gather-test"
OTHER_IMAGE = "example.test/other-operator:gather-test"
PRINTED = "vault login ok"
TICKER = "log-ticker"  # prints `tick <n>` every second, in the operand's namespace
TICKER_IMAGE = "example.test/ticker:gather-test"
SINCE_SECONDS = 10  # the MUST_GATHER_SINCE window


def forms(value: str) -> set[bytes]:
    raw = value.encode()
    encoded = {base64.b64encode(raw), base64.urlsafe_b64encode(raw)}
    return {raw, *encoded, *(e.rstrip(b"=") for e in encoded)}


def secret(name: str, namespace: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name,
                                                               "namespace": namespace},
            "stringData": data}


def operator_deployment() -> dict[str, Any]:
    deployment = yaml.safe_load((REPO_ROOT / "manifests/operator/deployment.yaml").read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["image"] = IMAGE
    container["env"] += [
        {"name": "SUPPORT_CONTACT", "value": SENTINELS["OperatorEnv"]},
        {"name": "VENDOR_TOKEN", "valueFrom": {"secretKeyRef": {"name": "operator-extra",
                                                                "key": "token"}}}]
    return deployment


def printer_image(*lines: str) -> ImageEntry:
    """An image whose entrypoint `/printer` prints `lines` and sleeps; its arguments are
    ignored. The lines are in this map only, in no object of the cluster."""
    script = "".join(f"echo {shlex.quote(line)}; " for line in lines) + "exec sleep 86400"
    return ImageEntry(("/printer",), ("/bin/sh", "-c", script, "printer"))


def deployment(name: str, namespace: str, image: str, container: dict[str, Any],
               ) -> dict[str, Any]:
    """A Deployment of one container that the "restricted" Pod Security level admits (the
    operator's namespace enforces it)."""
    labels = {"app": name}
    security = {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"replicas": 1, "selector": {"matchLabels": labels}, "template": {
                "metadata": {"labels": labels},
                "spec": {"securityContext": {"runAsNonRoot": True,
                                             "seccompProfile": {"type": "RuntimeDefault"}},
                         "containers": [{"name": "main", "image": image,
                                         "securityContext": security, **container}]}}}}


def printer() -> dict[str, Any]:
    """A Deployment in the operand's namespace with secrets in its command line and in its
    readiness probe's headers (the probe fails: nothing listens, the pod stays unready)."""
    return deployment(PRINTER, OPERAND_NS, PRINTER_IMAGE, {
        "command": ["/printer", "--password", SENTINELS["CommandPassword"]],
        "args": [f"--namespace={OPERAND_NS}", "--loglevel=debug",
                 f"--token={SENTINELS['ArgToken']}", "--password", SENTINELS["ArgPassword"]],
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8089, "httpHeaders": [
            {"name": "X-Probe-Key", "value": SENTINELS["ProbeHeader"]}]},
            "periodSeconds": 30}})


def ticker_image() -> ImageEntry:
    script = "i=0; while :; do echo \"tick $i\"; i=$((i+1)); sleep 1; done"
    return ImageEntry(("/ticker",), ("/bin/sh", "-c", script, "ticker"))


def other_operator() -> list[dict[str, Any]]:
    """Another operator sharing the operator's namespace, as OLM's openshift-operators is."""
    other_secret = secret(f"{OTHER_OPERATOR}-credentials", OPERATOR_NS,
                          {"token": SENTINELS["OtherSecret"]})
    return [other_secret, deployment(OTHER_OPERATOR, OPERATOR_NS, OTHER_IMAGE, {
        "args": [f"--namespace={OPERATOR_NS}"],
        "env": [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {
            "name": other_secret["metadata"]["name"], "key": "token"}}}]})]


def annotated(obj: dict[str, Any], note: str) -> dict[str, Any]:
    obj["metadata"]["annotations"] = {"example.com/note": note}
    return obj


def esc() -> dict[str, Any]:
    return {"apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
            "metadata": {"name": "cluster"},
            "spec": {"appConfig": {
                "proxy": {"httpsProxy": f"http://gather:{SENTINELS['ProxyPassword']}"
                                        "@proxy.invalid:3128"},
                "bitwardenSecretManagerProvider": {"enabled": "true",
                                                   "secretRef": {"name": BITWARDEN_TLS_SECRET}}},
                "controllerConfig": {"namespace": OPERAND_NS, "componentConfigs": [
                    {"componentName": "ExternalSecretsCoreController", "overrideEnv": [
                        {"name": "EXTRA_SETTING", "value": SENTINELS["OverrideEnv"]}]}]}}}


def apply(cluster: Cluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl("apply", "--server-side", "--force-conflicts", "--field-manager=gather-test",
                    "-f", "-", input=yaml.safe_dump_all(objects))


@pytest.fixture(scope="module")
def bitwarden_tls() -> dict[str, Any]:
    """bitwarden-sdk-server's TLS Secret: a real key pair (the server serves it and the ESC
    becomes Ready), whose values, the private key above all, must be nowhere in the bundle."""
    return bitwarden_tls_secret(OPERAND_NS, string_data=True)


def bitwarden_planted(secret_: dict[str, Any]) -> dict[str, str]:
    """The TLS Secret's values as sentinels: each PEM whole, and each line of its base64 body
    (a line is long enough to be found only where that PEM was copied)."""
    planted = {f"Bitwarden {key}": value for key, value in secret_["stringData"].items()}
    for key, value in secret_["stringData"].items():
        planted.update({f"Bitwarden {key} line {number}": line for number, line in enumerate(
            value.splitlines()) if not line.startswith("-----") and len(line) >= 40})
    return planted


@pytest.fixture(scope="module")
def installed(cluster: Cluster, bitwarden_tls: dict[str, Any]) -> Iterator[None]:
    if cluster.simulated is None:
        pytest.skip("plants sentinels in the operator's Deployment: simulated cluster only")
    simulated = cluster.simulated
    crds.install(simulated.api, crds.all_crds())
    image_map.add(simulated.images_file, {
        IMAGE: image_map.operator_image(REPO_ROOT),
        PRINTER_IMAGE: printer_image(
            f"{PRINTED} token {SENTINELS['VaultToken']} aws key {SENTINELS['AwsKeyId']}",
            f"level=info msg=connect password={SENTINELS['LogPassword']}"),
        OTHER_IMAGE: printer_image(f"other operator {SENTINELS['OtherLog']}"),
        TICKER_IMAGE: ticker_image()})
    operator = [doc for name in OPERATOR_MANIFESTS if name != "deployment"
                for doc in yaml.safe_load_all((REPO_ROOT / f"manifests/operator/{name}.yaml")
                                              .read_text()) if doc]
    apply(cluster, *operator, {"apiVersion": "v1", "kind": "Namespace",
                               "metadata": {"name": OPERAND_NS}},
          annotated(secret("operator-extra", OPERATOR_NS,
                           {"token": SENTINELS["OperatorSecretEnv"]}),
                    SENTINELS["OperatorSecretAnnotation"]),
          annotated(secret("user-credentials", OPERAND_NS, {"password": SENTINELS["UserSecret"]}),
                    SENTINELS["SecretAnnotation"]),
          printer(), *other_operator(), deployment(TICKER, OPERAND_NS, TICKER_IMAGE, {}),
          bitwarden_tls,
          operator_deployment(), esc())
    try:
        wait_for(lambda: _installed(cluster), "the operand installed by the operator's Deployment",
                 120)
        for namespace, name, line in ((OPERAND_NS, PRINTER, PRINTED),
                                      (OPERATOR_NS, OTHER_OPERATOR, SENTINELS["OtherLog"]),
                                      (OPERAND_NS, TICKER, "tick 1")):
            wait_for(functools.partial(_printed, cluster, namespace, name, line),
                     f"{name}'s log", 60)
        yield
    finally:
        cluster.kubectl("delete", "externalsecretsconfig", "cluster", "--ignore-not-found")
        subprocess.run([sys.executable, "-m", "manager", "uninstall", "--operand", "--yes",
                        f"--namespace={OPERAND_NS}", f"--kubeconfig={cluster.kubeconfig}"],
                       capture_output=True, check=False, timeout=180, cwd=REPO_ROOT)
        cluster.kubectl("delete", "namespace", OPERATOR_NS, OPERAND_NS, "--ignore-not-found",
                        "--wait=false")
        cluster.kubectl("delete", "-f", str(REPO_ROOT / "manifests/operator/rbac.yaml"),
                        "--ignore-not-found", check=False)
        cluster.kubectl("delete", "externalsecretsmanager", "cluster", "--ignore-not-found")


def _printed(cluster: Cluster, namespace: str, name: str, line: str) -> None:
    logs = cluster.kubectl("logs", "-n", namespace, f"deployment/{name}", check=False)
    assert line in logs.stdout, "\n".join((logs.stdout, logs.stderr, cluster.kubectl(
        "get", "pods,replicasets,events", "-n", namespace, "-o", "wide", check=False).stdout))


def _installed(cluster: Cluster) -> None:
    found = json.loads(cluster.kubectl("get", "externalsecretsconfig", "cluster", "-o", "json",
                                       check=False).stdout or "{}")
    assert counts_as_installed(found.get("status")), (
        found.get("status"), cluster.kubectl("get", "pods", "-A", "-o", "wide", check=False).stdout,
        cluster.kubectl("logs", "-n", OPERATOR_NS, "deployment/" + OPERATOR_DEPLOYMENT,
                        "--tail=20", check=False))
    logs = cluster.kubectl("logs", "-n", OPERAND_NS, "deployment/external-secrets", check=False)
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.strip()


@pytest.fixture(scope="module")
def bundle(cluster: Cluster, installed: None, tmp_path_factory: pytest.TempPathFactory,
           ) -> dict[str, bytes]:
    """The members of the archive `gather` writes, by path below its top directory, and the
    whole uncompressed tar stream (member names and headers too)."""
    output = tmp_path_factory.mktemp("gather") / "bundle.tar.gz"
    result = subprocess.run([sys.executable, "-m", "manager", "gather", "-o", str(output),
                             f"--kubeconfig={cluster.kubeconfig}"], capture_output=True,
                            text=True, check=False, timeout=300, cwd=REPO_ROOT)
    assert result.returncode == 0, result.stderr
    members: dict[str, bytes] = {}
    with tarfile.open(output) as archive:
        for member in archive.getmembers():
            extracted = archive.extractfile(member)
            assert extracted is not None, member.name
            members[member.name.split("/", 1)[1]] = extracted.read()
    members["(the whole tar stream)"] = gzip.decompress(output.read_bytes())
    return members


def test_no_sentinel_anywhere(bundle: dict[str, bytes], bitwarden_tls: dict[str, Any]) -> None:
    planted = {**SENTINELS, **bitwarden_planted(bitwarden_tls)}
    leaks = [f"{where} in {path}" for path, content in bundle.items()
             for where, value in planted.items() for form in forms(value) if form in content]
    assert leaks == []


def test_every_part_is_there(bundle: dict[str, bytes]) -> None:
    manifest = yaml.safe_load(bundle["manifest.yaml"])
    listed = {part["path"] for part in manifest["parts"]}
    assert listed == set(bundle) - {"manifest.yaml", "(the whole tar stream)"}
    for namespace in (OPERATOR_NS, OPERAND_NS):
        for kind in ("deployments", "replicasets", "pods", "events", "secrets"):
            assert f"namespaces/{namespace}/{kind}.yaml" in listed
    for path in ("cluster/externalsecretsconfigs/cluster.yaml",
                 "cluster/externalsecretsmanagers/cluster.yaml",
                 "cluster/validatingwebhookconfigurations.yaml",
                 "cluster/crd-stored-versions.yaml", "plan.txt"):
        assert path in listed
    missing = {entry["part"]: entry["reason"] for entry in manifest["missing"]}
    # No OLM on this cluster: the OperatorCondition is missing, and says why.
    assert missing.pop(f"namespaces/{OPERATOR_NS}/operatorconditions.yaml").startswith(
        "not served")
    # The operator's /metrics needs a bearer token the API server's proxy does not pass on.
    [secure] = [part for part in missing if f"namespaces/{OPERATOR_NS}/metrics/" in part]
    assert missing.pop(secure) == SECURE_METRICS
    # Nothing else is missing: every container ran, bitwarden-sdk-server's too, and has a log.
    assert missing == {}, missing


def text(bundle: dict[str, bytes], path: str) -> str:
    return bundle[path].decode()


def test_logs_are_the_processes_own(bundle: dict[str, bytes]) -> None:
    logs = {path: text(bundle, path) for path in bundle if "/logs/" in path}
    operator = [body for path, body in logs.items() if path.startswith(
        f"namespaces/{OPERATOR_NS}/logs/external-secrets-operator-controller-manager-")]
    assert any("action=start" in body for body in operator), list(logs)
    controller = [body for path, body in logs.items() if path.startswith(
        f"namespaces/{OPERAND_NS}/logs/external-secrets-") and path.endswith(
        "/external-secrets.log") and "webhook" not in path and "cert-controller" not in path]
    assert controller, list(logs)
    assert all('"msg"' in body for body in controller), controller


def test_what_stays_useful(bundle: dict[str, bytes]) -> None:
    esc = yaml.safe_load(bundle["cluster/externalsecretsconfigs/cluster.yaml"])
    assert esc["spec"]["appConfig"]["proxy"]["httpsProxy"] == (
        "http://<redacted>@proxy.invalid:3128")
    assert esc["spec"]["controllerConfig"]["componentConfigs"][0]["overrideEnv"] == [
        {"name": "EXTRA_SETTING", "value": "<redacted>"}]
    secrets_ = yaml.safe_load(bundle[f"namespaces/{OPERAND_NS}/secrets.yaml"])["items"]
    assert {s["metadata"]["name"]: s["keys"] for s in secrets_}["bitwarden-tls"] == [
        "ca.crt", "tls.crt", "tls.key"]
    deployments = yaml.safe_load(bundle[f"namespaces/{OPERATOR_NS}/deployments.yaml"])
    env = {e["name"]: e for e in deployments["items"][0]["spec"]["template"]["spec"][
        "containers"][0]["env"]}
    assert env["VENDOR_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "operator-extra",
                                                              "key": "token"}
    assert env["SUPPORT_CONTACT"]["value"] == "<redacted>"
    assert env["OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION"]["value"] == (
        versions.EXTERNAL_SECRETS_VERSION)
    webhooks = yaml.safe_load(bundle["cluster/validatingwebhookconfigurations.yaml"])
    fingerprints = [f for item in webhooks["items"] for w in item["webhooks"]
                    for f in w["clientConfig"]["caBundle"]]
    assert fingerprints, webhooks
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", f) for f in fingerprints), fingerprints
    stored = {row["name"]: row["storedVersions"] for row in yaml.safe_load(
        bundle["cluster/crd-stored-versions.yaml"])["crds"]}
    assert stored["externalsecrets.external-secrets.io"] == ["v1"]
    assert stored["externalsecretsconfigs.operator.openshift.io"] == ["v1alpha1"]
    assert "Plan: 0 to create" in text(bundle, "plan.txt")
    # (The operator's metrics are listed as missing, see test_every_part_is_there.)


def test_what_stays_useful_of_hidden_arguments_headers_annotations_and_logs(
        bundle: dict[str, bytes]) -> None:
    workloads = {d["metadata"]["name"]: d for d in yaml.safe_load(
        bundle[f"namespaces/{OPERAND_NS}/deployments.yaml"])["items"]}
    main = workloads[PRINTER]["spec"]["template"]["spec"]["containers"][0]
    assert main["command"] == ["/printer", "--password", "<redacted>"]
    assert main["args"] == [f"--namespace={OPERAND_NS}", "--loglevel=debug",
                            "--token=<redacted>", "--password", "<redacted>"]
    assert main["readinessProbe"]["httpGet"]["httpHeaders"] == [
        {"name": "X-Probe-Key", "value": "<redacted>"}]
    secrets_ = {s["metadata"]["name"]: s for s in yaml.safe_load(
        bundle[f"namespaces/{OPERAND_NS}/secrets.yaml"])["items"]}
    assert secrets_["user-credentials"]["metadata"]["annotations"] == {
        "example.com/note": "<redacted>"}
    printed = [text(bundle, path) for path in bundle
               if path.startswith(f"namespaces/{OPERAND_NS}/logs/{PRINTER}-")]
    assert printed, list(bundle)
    assert all(f"{PRINTED} token <redacted> aws key <redacted>\n"
               "level=info msg=connect password=<redacted>\n" in body for body in printed), printed


def test_the_operator_namespace_holds_the_operators_own_objects_only(
        bundle: dict[str, bytes]) -> None:
    """The other operator's Deployment, Pod, log and Secret are nowhere (its name is a
    sentinel of test_no_sentinel_anywhere); what is there is the operator's."""
    def names(kind: str) -> list[str]:
        listing = yaml.safe_load(bundle[f"namespaces/{OPERATOR_NS}/{kind}.yaml"])
        return [item["metadata"]["name"] for item in listing["items"]]

    assert names("deployments") == [OPERATOR_DEPLOYMENT]
    for kind in ("replicasets", "pods"):
        assert names(kind), kind
        assert all(name.startswith(f"{OPERATOR_DEPLOYMENT}-") for name in names(kind)), kind
    assert names("secrets") == ["operator-extra"]  # named by the operator's pod template
    events = yaml.safe_load(bundle[f"namespaces/{OPERATOR_NS}/events.yaml"])["items"]
    assert events
    assert {event["involvedObject"]["name"] for event in events} <= {
        OPERATOR_DEPLOYMENT, *names("replicasets"), *names("pods"), "operator-extra",
        "external-secrets-operator-leader"}
    logs = [path for path in bundle if path.startswith(f"namespaces/{OPERATOR_NS}/logs/")]
    assert logs
    assert all(path.startswith(f"namespaces/{OPERATOR_NS}/logs/{OPERATOR_DEPLOYMENT}-")
               for path in logs), logs


def test_the_version_file_says_product_and_version(bundle: dict[str, bytes]) -> None:
    assert bundle["version"] == f"{identity.PACKAGE}\n{identity.OPERATOR_VERSION}\n".encode()


_STAMP = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?Z")


def stamped_ticks(cluster: Cluster) -> list[tuple[datetime, str]]:
    """Every line of the ticker's log with the time the log API keeps for it."""
    logs = cluster.kubectl("logs", "-n", OPERAND_NS, f"deployment/{TICKER}", "--timestamps")
    lines = []
    for line in logs.stdout.splitlines():
        stamp, _, text = line.partition(" ")
        found = _STAMP.fullmatch(stamp)
        assert found, line
        moment = datetime.strptime(found[1], "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC)
        lines.append((moment + timedelta(microseconds=int((found[2] or "0")[:6].ljust(6, "0"))),
                      text))
    return lines


def gather_into(cluster: Cluster, directory: Path, **environ: str) -> dict[str, bytes]:
    """`gather --dest-dir` (as the image's /usr/bin/gather runs it) with the must-gather
    variables in `environ`: the files it wrote, by path."""
    result = subprocess.run([sys.executable, "-m", "manager", "gather", "--dest-dir",
                             str(directory), f"--kubeconfig={cluster.kubeconfig}"],
                            capture_output=True, text=True, check=False, timeout=300,
                            cwd=REPO_ROOT, env={**os.environ, **environ})
    assert result.returncode == 0, result.stderr
    return {str(path.relative_to(directory)): path.read_bytes()
            for path in directory.rglob("*") if path.is_file()}


def collected_ticks(files: dict[str, bytes]) -> list[str]:
    [path] = [path for path in files if path.startswith(f"namespaces/{OPERAND_NS}/logs/{TICKER}-")
              and path.endswith("/main.log")]
    return files[path].decode().splitlines()


def _ticked_since(cluster: Cluster, moment: datetime) -> None:
    assert any(when >= moment for when, _ in stamped_ticks(cluster)), moment


@pytest.fixture(scope="module")
def since_time_run(cluster: Cluster, installed: None, tmp_path_factory: pytest.TempPathFactory,
                   ) -> tuple[datetime, list[tuple[datetime, str]], dict[str, bytes]]:
    """A bundle of the logs since a whole second a little ahead of now, taken once the
    ticker has printed past it: its cutoff, the ticker's stamped lines, the bundle."""
    cutoff = datetime.now(UTC).replace(microsecond=0) + timedelta(seconds=2)
    wait_for(functools.partial(_ticked_since, cluster, cutoff + timedelta(seconds=1)),
             "a tick after the cutoff", 30)
    files = gather_into(cluster, tmp_path_factory.mktemp("since-time"),
                        **{SINCE_TIME_VARIABLE: format_time(cutoff)})
    return cutoff, stamped_ticks(cluster), files


def test_must_gather_since_time_leaves_out_the_lines_before_it(
        since_time_run: tuple[datetime, list[tuple[datetime, str]], dict[str, bytes]]) -> None:
    cutoff, stamped, files = since_time_run
    before = [text for when, text in stamped if when < cutoff]
    after = [text for when, text in stamped if when >= cutoff]
    collected = collected_ticks(files)
    assert before, stamped
    assert after, stamped
    assert set(before).isdisjoint(collected), (before, collected)
    assert collected[0] == after[0], (collected, after)  # nothing at or after it is lost
    manifest = yaml.safe_load(files["manifest.yaml"])
    assert manifest["logs"].startswith(f"lines since {format_time(cutoff)} (sinceTime)")
    assert files["version"] == f"{identity.PACKAGE}\n{identity.OPERATOR_VERSION}\n".encode()


@pytest.fixture(scope="module")
def since_run(cluster: Cluster, installed: None, tmp_path_factory: pytest.TempPathFactory,
              ) -> tuple[datetime, list[tuple[datetime, str]], dict[str, bytes]]:
    """A bundle of the last SINCE_SECONDS of logs, once the ticker has printed for longer
    than that: when gather started (the API server's now is later), the stamped lines, the
    bundle."""
    first = stamped_ticks(cluster)[0][0]
    time.sleep(max(0.0, (first + timedelta(seconds=SINCE_SECONDS + 3) - datetime.now(UTC))
                   .total_seconds()))
    started = datetime.now(UTC)
    files = gather_into(cluster, tmp_path_factory.mktemp("since"),
                        **{SINCE_VARIABLE: f"{SINCE_SECONDS}s"})
    return started, stamped_ticks(cluster), files


def test_must_gather_since_leaves_out_older_lines(
        since_run: tuple[datetime, list[tuple[datetime, str]], dict[str, bytes]]) -> None:
    started, stamped, files = since_run
    too_old = [text for when, text in stamped
               if when < started - timedelta(seconds=SINCE_SECONDS)]
    collected = collected_ticks(files)
    assert too_old, stamped
    assert set(too_old).isdisjoint(collected), (too_old, collected)
    assert collected, stamped  # a line a second: the last 10 seconds hold some
    assert yaml.safe_load(files["manifest.yaml"])["logs"].startswith(
        f"lines of the last {SINCE_SECONDS} seconds (sinceSeconds)")
