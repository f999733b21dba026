"""`python -m manager render`: output on success, a message naming the field on failure."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from manager.cli import main
from manager.paths import REPO_ROOT

SAMPLES = REPO_ROOT / "samples"


def write(tmp_path: Path, text: str, name: str = "esc.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["render", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


ESC_HEADER = "apiVersion: operator.openshift.io/v1alpha1\nkind: ExternalSecretsConfig\n" \
             "metadata:\n  name: cluster\n"


def test_render_prints_every_object_in_apply_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(SAMPLES / "esc-default.yaml"))
    assert code == 0
    objects = list(yaml.safe_load_all(out))
    assert len(objects) == 28
    assert objects[0]["kind"] == "Namespace"
    assert objects[-1]["kind"] == "ValidatingWebhookConfiguration"


def test_env_options_are_the_operator_environment(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(SAMPLES / "esc-default.yaml"),
                       "--env", "HTTPS_PROXY=http://proxy:3128",
                       "--env", "RELATED_IMAGE_EXTERNAL_SECRETS=mirror/eso:1")
    assert code == 0
    deployment = next(obj for obj in yaml.safe_load_all(out) if obj["kind"] == "Deployment")
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "mirror/eso:1"
    assert {"name": "https_proxy", "value": "http://proxy:3128"} in container["env"]


def test_the_esm_contributes_its_global_config(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(SAMPLES / "esc-default.yaml"),
                       "--esm", str(SAMPLES / "esm-labels.yaml"))
    assert code == 0
    for obj in yaml.safe_load_all(out):
        assert obj["metadata"]["labels"]["team"] == "security"


@pytest.mark.parametrize(("spec", "field"), [
    ("spec:\n  appConfig:\n    logLevel: 9\n", "spec.appConfig.logLevel"),
    ("spec:\n  appConfig:\n    bitwardenSecretManagerProvider:\n      enabled: \"true\"\n",
     "spec.appConfig.bitwardenSecretManagerProvider.secretRef"),
    ("spec:\n  appConfig:\n    resources:\n      requests: {cpu: '2'}\n      limits: {cpu: '1'}\n",
     "spec.appConfig.resources.requests.cpu"),
    ("spec:\n  controllerConfig:\n    labels:\n      app: mine\n",
     "spec.controllerConfig.labels['app']"),
    ("spec:\n  appConfig:\n    unknownField: 1\n", "spec.appConfig.unknownField"),
])
def test_invalid_specs_exit_non_zero_naming_the_field(tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      spec: str, field: str) -> None:
    code, out, err = run(capsys, "-f", write(tmp_path, ESC_HEADER + spec))
    assert code == 1
    assert out == ""
    assert f"{field}:" in err


def test_an_invalid_esm_names_its_field(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    esm = write(tmp_path, "kind: ExternalSecretsManager\nmetadata: {name: cluster}\n"
                          "spec:\n  globalConfig:\n    tolerations: [{operator: Equal}]\n",
                "esm.yaml")
    code, _, err = run(capsys, "-f", str(SAMPLES / "esc-default.yaml"), "--esm", esm)
    assert code == 1
    assert "spec.globalConfig.tolerations[0].operator:" in err


@pytest.mark.parametrize(("text", "message"), [
    ("kind: ExternalSecretsManager\nspec: {}\n", "kind: expected ExternalSecretsConfig"),
    ("kind: ExternalSecretsConfig\nmetadata: {name: other}\n", "metadata.name"),
    ("- just\n- a list\n", "expected one ExternalSecretsConfig"),
    ("spec: [unclosed\n", "not valid YAML"),
])
def test_files_that_are_no_esc_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                           text: str, message: str) -> None:
    code, _, err = run(capsys, "-f", write(tmp_path, text))
    assert code == 1
    assert message in err


def test_a_missing_file_and_a_malformed_env_are_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, "-f", str(tmp_path / "absent.yaml"))[0] == 1
    code, _, err = run(capsys, "-f", str(SAMPLES / "esc-default.yaml"), "--env", "NOVALUE")
    assert code == 1
    assert "NAME=VALUE" in err


def test_a_system_namespace_is_refused_naming_the_field(tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, "kind: ExternalSecretsConfig\nmetadata: {name: cluster}\n"
                           "spec: {controllerConfig: {namespace: kube-system}}\n")
    code, out, err = run(capsys, "-f", path)
    assert code == 1
    assert out == ""
    assert "spec.controllerConfig.namespace" in err
    assert "'kube-system' is a shared or system namespace" in err


def test_the_default_spec_renders_no_policy_with_an_empty_pod_selector(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(SAMPLES / "esc-default.yaml"))
    assert code == 0
    policies = [doc for doc in yaml.safe_load_all(out) if doc["kind"] == "NetworkPolicy"]
    assert policies
    for policy in policies:
        selector = policy["spec"]["podSelector"]
        assert selector.get("matchLabels"), policy["metadata"]["name"]


def test_render_adds_the_api_server_address_given_to_no_proxy(
        capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "-f", str(SAMPLES / "esc-proxy.yaml"),
                       "--api-server-address", "172.30.0.1")
    assert code == 0
    env = {(obj["metadata"]["name"], variable["name"]): variable["value"]
           for obj in yaml.safe_load_all(out) if obj["kind"] == "Deployment"
           for container in obj["spec"]["template"]["spec"]["containers"]
           for variable in container.get("env", [])}
    assert env["external-secrets", "NO_PROXY"] == (
        ".cluster.local,.svc,10.0.0.0/16,127.0.0.1,localhost,172.30.0.1,"
        "kubernetes.default.svc")
    assert env["external-secrets", "no_proxy"] == env["external-secrets", "NO_PROXY"]
    assert not any(name == "external-secrets-webhook" for name, _ in env)
