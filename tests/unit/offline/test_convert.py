"""manager/offline/convert.py and `python -m manager convert`: Red Hat's GA-shaped
ExternalSecretsConfig and ExternalSecretsManager in this operator's API.

GA_ESC and GA_ESM use every field of the GA shape (openshift/external-secrets-operator's
api/v1alpha1 types and Red Hat's API reference), with values written for these tests, as
`kubectl get -o yaml` prints them (server-set metadata, status, Red Hat's finalizer). Every
leaf of them must come out mapped, reported as not mapped, or named in a note; the result must
validate against this API's models and hold, at each mapped target, the source's value.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager import cli
from manager.api.models import ExternalSecretsConfig, ExternalSecretsManager
from manager.offline.convert import (
    DIFFERENT_MEANING,
    GA_FINALIZER,
    NO_EQUIVALENT,
    NOT_ADMISSIBLE,
    Conversion,
    ConvertError,
    convert_object,
    convert_text,
    dotted,
)
from manager.paths import REPO_ROOT

SECRET_VALUE = "env-value-that-is-a-credential-7781"

GA_ESC = f"""
apiVersion: operator.openshift.io/v1alpha1
kind: ExternalSecretsConfig
metadata:
  name: cluster
  uid: 5f0c1c8e-2a0d-4c55-9f54-0d2b6f1b8d11
  resourceVersion: "48213"
  generation: 7
  creationTimestamp: "2025-11-03T09:12:44Z"
  finalizers: [{GA_FINALIZER}]
  labels: {{example.com/team: platform}}
  annotations:
    operator.openshift.io/external-secrets-processed: "true"
    kubectl.kubernetes.io/last-applied-configuration: '{{"spec": {{}}}}'
    example.com/ticket: OPS-1182
  managedFields:
  - {{manager: kubectl, operation: Apply, apiVersion: operator.openshift.io/v1alpha1}}
spec:
  appConfig:
    logLevel: 3
    operatingNamespace: payments
    webhookConfig: {{certificateCheckInterval: 15m}}
    resources:
      requests: {{cpu: 20m, memory: 64Mi}}
      limits: {{memory: 384Mi}}
    affinity:
      nodeAffinity:
        requiredDuringSchedulingIgnoredDuringExecution:
          nodeSelectorTerms:
          - matchExpressions: [{{key: kubernetes.io/os, operator: In, values: [linux]}}]
    tolerations: [{{key: node-role.kubernetes.io/infra, operator: Exists, effect: NoSchedule}}]
    nodeSelector: {{node-role.kubernetes.io/infra: ""}}
    proxy:
      httpProxy: http://egress.corp.example:8080
      httpsProxy: http://egress.corp.example:8443
      noProxy: .cluster.local,.svc,10.0.0.0/16
      networkPolicyProvisioning: Unmanaged
  plugins:
    bitwardenSecretManagerProvider:
      mode: Enabled
      secretRef: {{name: bitwarden-server-tls}}
  controllerConfig:
    certProvider:
      certManager:
        mode: Enabled
        injectAnnotations: "true"
        issuerRef: {{name: corp-ca, kind: ClusterIssuer, group: cert-manager.io}}
        certificateDuration: 4380h
        certificateRenewBefore: 720h
    labels: {{example.com/cost-center: "4711"}}
    annotations: {{example.com/contact: secrets-team}}
    networkPolicies:
    - name: to-vault
      componentName: ExternalSecretsCoreController
      egress:
      - to: [{{ipBlock: {{cidr: 10.20.30.40/32}}}}]
        ports: [{{protocol: TCP, port: 8200}}]
    - name: to-bitwarden-cloud
      componentName: BitwardenSDKServer
      egress: [{{ports: [{{protocol: TCP, port: 443}}]}}]
    componentConfigs:
    - componentName: ExternalSecretsCoreController
      deploymentConfigs: {{revisionHistoryLimit: 4, replicas: 2}}
      overrideEnv:
      - {{name: VAULT_TOKEN_HINT, value: {SECRET_VALUE}}}
      advancedOverrides:
        spec:
          template:
            spec:
              affinity:
                podAntiAffinity:
                  preferredDuringSchedulingIgnoredDuringExecution:
                  - weight: 50
                    podAffinityTerm:
                      topologyKey: kubernetes.io/hostname
                      labelSelector: {{matchLabels: {{app.kubernetes.io/name: external-secrets}}}}
              tolerations: [{{key: dedicated, operator: Equal, value: secrets, effect: NoSchedule}}]
              nodeSelector: {{example.com/pool: secrets}}
              topologySpreadConstraints:
              - maxSkew: 1
                topologyKey: topology.kubernetes.io/zone
                whenUnsatisfiable: ScheduleAnyway
                labelSelector: {{matchLabels: {{app.kubernetes.io/name: external-secrets}}}}
              containers:
              - name: external-secrets
                args: [--concurrent=4]
                resources: {{limits: {{cpu: "1"}}}}
    - componentName: Webhook
      deploymentConfigs: {{revisionHistoryLimit: 3}}
    trustedCABundle: {{name: corp-ca-bundle, key: corp-ca.pem, optional: false}}
status:
  conditions:
  - {{type: Ready, status: "True", reason: Ready, message: reconciliation successful,
     lastTransitionTime: "2025-11-03T09:13:10Z"}}
  externalSecretsImage: registry.redhat.io/external-secrets/external-secrets-rhel9@sha256:0
"""

GA_ESM = """
apiVersion: operator.openshift.io/v1alpha1
kind: ExternalSecretsManager
metadata:
  name: cluster
  generation: 2
  resourceVersion: "1022"
spec:
  globalConfig:
    labels: {example.com/owner: platform}
    logLevel: 2
    resources: {requests: {memory: 48Mi}}
    affinity: {}
    tolerations: [{key: infra, operator: Exists}]
    nodeSelector: {kubernetes.io/os: linux}
    proxy:
      httpsProxy: http://egress.corp.example:8443
      networkPolicyProvisioning: Unmanaged
  features:
  - {name: UnsafeAllowGenericTargets, mode: Enabled}
status:
  controllerStatuses:
  - {name: external-secrets, observedGeneration: 2, conditions: [{type: Ready, status: "True",
     message: ""}]}
"""


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> list[tuple[str | int, ...]]:
    """Every leaf path of a parsed YAML value (an empty map or list counts as a leaf)."""
    if isinstance(value, dict) and value:
        return [leaf for key, item in value.items() for leaf in leaves(item, (*path, key))]
    if isinstance(value, list) and value:
        return [leaf for i, item in enumerate(value) for leaf in leaves(item, (*path, i))]
    return [path]


def accounted(conv: Conversion, leaf: tuple[str | int, ...]) -> bool:
    """Whether the report names the leaf or a field above it."""
    sources = {e.source for e in conv.mapped} | {e.source for e in conv.not_mapped}
    noted = {note.split(": ", 1)[0] for note in conv.notes}
    prefixes = {dotted(leaf[:n]) for n in range(1, len(leaf) + 1)}
    return bool(prefixes & (sources | noted))


def at(obj: Any, path: str) -> Any:
    """The value at a dotted path as `dotted` writes it (map keys without dots)."""
    node = obj
    for part in path.replace("[", ".[").split("."):
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]
    return node


def convert_one(text: str, **kwargs: Any) -> Conversion:
    (conv,) = convert_text(text, **kwargs)
    return conv


@pytest.mark.parametrize("text", [GA_ESC, GA_ESM], ids=["esc", "esm"])
def test_every_ga_field_is_mapped_or_reported(text: str) -> None:
    conv = convert_one(text)
    source = yaml.safe_load(text)
    missing = [dotted(leaf) for leaf in leaves(source)
               if leaf not in (("apiVersion",), ("kind",), ("metadata", "name"))
               and not accounted(conv, leaf)]
    assert not missing, missing
    assert conv.converted


@pytest.mark.parametrize("text", [GA_ESC, GA_ESM], ids=["esc", "esm"])
def test_each_mapped_field_holds_the_source_value(text: str) -> None:
    conv = convert_one(text)
    source = yaml.safe_load(text)
    copied = [e for e in conv.mapped if e.target and not e.detail]
    assert len(copied) >= 8
    for entry in copied:
        if entry.source.startswith("metadata."):
            continue  # annotations: Red Hat's own are dropped, the rest kept (tested below)
        assert at(conv.result, entry.target) == at(source, entry.source), entry


def test_the_esc_is_this_api_and_says_the_same() -> None:
    conv = convert_one(GA_ESC)
    ExternalSecretsConfig.model_validate(conv.result)
    app = conv.result["spec"]["appConfig"]
    controller = conv.result["spec"]["controllerConfig"]
    assert app["bitwardenSecretManagerProvider"] == {
        "enabled": "true", "secretRef": {"name": "bitwarden-server-tls"}}
    assert app["certManagerConfig"] == {
        "enabled": "true", "addInjectorAnnotations": "true",
        "issuerRef": {"name": "corp-ca", "kind": "ClusterIssuer", "group": "cert-manager.io"},
        "certificateDuration": "4380h", "certificateRenewBefore": "720h"}
    assert app["trustedCABundle"] == {"configMapName": "corp-ca-bundle", "key": "corp-ca.pem"}
    assert app["proxy"] == {"httpProxy": "http://egress.corp.example:8080",
                            "httpsProxy": "http://egress.corp.example:8443",
                            "noProxy": ".cluster.local,.svc,10.0.0.0/16"}
    core, webhook = controller["componentConfigs"]
    assert set(core) == {"componentName", "deploymentConfigs", "overrideEnv", "affinity",
                         "tolerations", "nodeSelector", "topologySpreadConstraints", "resources"}
    assert core["resources"] == {"limits": {"cpu": "1"}}
    assert webhook == {"componentName": "Webhook", "deploymentConfigs": {"revisionHistoryLimit": 3}}
    assert [p["name"] for p in controller["networkPolicies"]] == ["to-vault", "to-bitwarden-cloud"]
    assert "plugins" not in conv.result["spec"]
    assert "certProvider" not in controller
    assert "trustedCABundle" not in controller
    assert conv.result["metadata"] == {"name": "cluster",
                                       "labels": {"example.com/team": "platform"},
                                       "annotations": {"example.com/ticket": "OPS-1182"}}
    assert "status" not in conv.result


def test_what_the_esc_cannot_say_is_reported_and_left_out() -> None:
    conv = convert_one(GA_ESC)
    refused = {e.source: e.kind for e in conv.not_mapped}
    args = ("spec.controllerConfig.componentConfigs[0].advancedOverrides.spec.template.spec"
            ".containers[0].args")
    assert refused == {args: DIFFERENT_MEANING}
    assert "overrideArgs" not in conv.result["spec"]["controllerConfig"]["componentConfigs"][0]
    notes = "\n".join(conv.notes)
    assert f"metadata.finalizers: {GA_FINALIZER} dropped" in notes
    assert "status: dropped" in notes
    assert "metadata.uid: dropped" in notes
    assert "metadata.managedFields: dropped" in notes


def test_the_esm_is_this_api() -> None:
    conv = convert_one(GA_ESM)
    ExternalSecretsManager.model_validate(conv.result)
    assert conv.result["spec"]["features"] == [
        {"name": "UnsafeAllowGenericTargets", "enabled": "true"}]
    assert conv.result["spec"]["globalConfig"]["proxy"] == {
        "httpsProxy": "http://egress.corp.example:8443"}
    assert not conv.not_mapped
    (feature,) = [e for e in conv.mapped if e.source == "spec.features[0].mode"]
    assert feature.detail == 'Enabled -> "true"'
    assert "ConfigMaps" in feature.note


def ga(kind: str, spec: dict[str, Any]) -> str:
    return yaml.safe_dump({"apiVersion": "operator.openshift.io/v1alpha1", "kind": kind,
                           "metadata": {"name": "cluster"}, "spec": spec})


ESC, ESM = "ExternalSecretsConfig", "ExternalSecretsManager"


@pytest.mark.parametrize(("kind", "spec", "source", "why"), [
    (ESC, {"appConfig": {"proxy": {"httpProxy": "http://p:1",
                                   "networkPolicyProvisioning": "Managed"}}},
     "spec.appConfig.proxy.networkPolicyProvisioning", NO_EQUIVALENT),
    (ESC, {"controllerConfig": {"trustedCABundle": {"name": "ca", "optional": True}}},
     "spec.controllerConfig.trustedCABundle.optional", DIFFERENT_MEANING),
    (ESC, {"controllerConfig": {"replicas": 3}}, "spec.controllerConfig.replicas", NO_EQUIVALENT),
    (ESC, {"plugins": {"bitwardenSecretManagerProvider": {"mode": "Sometimes"}}},
     "spec.plugins.bitwardenSecretManagerProvider.mode", NO_EQUIVALENT),
    (ESC, {"controllerConfig": {"componentConfigs": [{
        "componentName": "Webhook",
        "advancedOverrides": {"spec": {"replicas": 2}}}]}},
     "spec.controllerConfig.componentConfigs[0].advancedOverrides.spec.replicas", NO_EQUIVALENT),
    (ESM, {"features": [{"name": "SomethingNew", "mode": "Enabled"}]},
     "spec.features[0]", NO_EQUIVALENT),
    (ESM, {"globalConfig": {"proxy": {"networkPolicyProvisioning": "Managed"}}},
     "spec.globalConfig.proxy.networkPolicyProvisioning", NO_EQUIVALENT),
])
def test_a_field_without_equivalent_is_named(kind: str, spec: dict[str, Any], source: str,
                                             why: str) -> None:
    conv = convert_one(ga(kind, spec))
    assert [(e.source, e.kind) for e in conv.not_mapped] == [(source, why)]


def test_a_value_beyond_this_apis_bounds_is_left_out_and_reported() -> None:
    # Red Hat's API allows 50 tolerations and nodeSelector entries; this one 10.
    tolerations = [{"key": f"k{i}", "operator": "Exists"} for i in range(12)]
    conv = convert_one(ga(ESC, {"appConfig": {"tolerations": tolerations, "logLevel": 2}}))
    assert [(e.source, e.kind) for e in conv.not_mapped] == [
        ("spec.appConfig.tolerations", NOT_ADMISSIBLE)]
    assert "at most 10" in conv.not_mapped[0].why
    assert conv.result["spec"]["appConfig"] == {"logLevel": 2}
    ExternalSecretsConfig.model_validate(conv.result)


def test_bitwarden_disabled_maps_with_the_difference_named() -> None:
    conv = convert_one(ga(ESC, {"plugins": {"bitwardenSecretManagerProvider": {
        "mode": "Disabled"}}}))
    assert conv.result["spec"]["appConfig"]["bitwardenSecretManagerProvider"] == {
        "enabled": "false"}
    (entry,) = conv.mapped
    assert "removes the bitwarden objects it created" in entry.note
    assert not conv.not_mapped


def test_a_proxy_without_url_is_not_written() -> None:
    # Red Hat's operator then takes the ESM's or the cluster's proxy; `proxy: {}` here would
    # mean "no proxy" and hide them.
    conv = convert_one(ga(ESC, {"appConfig": {"proxy": {
        "httpProxy": "", "networkPolicyProvisioning": "Unmanaged"}}}))
    assert conv.result["spec"] == {}
    assert {e.source for e in conv.mapped} == {"spec.appConfig.proxy.httpProxy",
                                               "spec.appConfig.proxy.networkPolicyProvisioning"}
    empty = convert_one(ga(ESM, {"globalConfig": {"proxy": {}}, "features": [
        {"name": "UnsafeAllowGenericTargets", "mode": "Disabled"}]}))
    assert "globalConfig" not in empty.result["spec"]
    assert any(note.startswith("spec.globalConfig.proxy: {} not written") for note in empty.notes)


def test_an_empty_proxy_valid_in_both_shapes_is_flagged() -> None:
    # Valid in this API, where it means "no proxy"; in Red Hat's it meant "the next source".
    conv = convert_one(ga(ESM, {"globalConfig": {"proxy": {}}}))
    assert not conv.converted
    assert conv.result["spec"] == {"globalConfig": {"proxy": {}}}
    assert any(note.startswith("spec.globalConfig.proxy: {} means no proxy here")
               for note in conv.notes)


def test_a_feature_without_mode_is_disabled_and_the_old_boolean_is_read() -> None:
    conv = convert_one(ga(ESM, {"features": [{"name": "UnsafeAllowGenericTargets"},
                                             {"name": "UnsafeAllowGenericTargets",
                                              "enabled": True}]}))
    assert conv.result["spec"]["features"] == [
        {"name": "UnsafeAllowGenericTargets", "enabled": "false"},
        {"name": "UnsafeAllowGenericTargets", "enabled": "true"}]
    assert any("no mode" in note for note in conv.notes)


@pytest.mark.parametrize("sample", sorted((REPO_ROOT / "samples").glob("*.yaml")),
                         ids=lambda path: path.name)
def test_an_object_in_this_shape_passes_through_unchanged(sample: Path) -> None:
    text = sample.read_text()
    (conv,) = convert_text(text)
    assert not conv.converted
    assert conv.result == yaml.safe_load(text)
    assert conv.notes[0] == "already in this operator's shape: written unchanged"
    assert not conv.mapped
    assert not conv.not_mapped


def test_the_output_converts_to_itself() -> None:
    first = convert_text(GA_ESC + "---\n" + GA_ESM)
    again = convert_text(yaml.safe_dump_all([conv.result for conv in first]))
    assert [conv.result for conv in again] == [conv.result for conv in first]
    assert not any(conv.converted for conv in again)


def test_red_hats_bookkeeping_alone_marks_an_object_as_ga() -> None:
    # Valid in both shapes, but exported from a cluster where Red Hat's operator ran: its
    # finalizer must not be carried over (nothing would ever remove it).
    text = yaml.safe_dump({"apiVersion": "operator.openshift.io/v1alpha1", "kind": ESC,
                           "metadata": {"name": "cluster", "finalizers": [GA_FINALIZER]},
                           "spec": {"appConfig": {"logLevel": 2}}})
    conv = convert_one(text)
    assert conv.converted
    assert conv.result == {"apiVersion": "operator.openshift.io/v1alpha1", "kind": ESC,
                           "metadata": {"name": "cluster"},
                           "spec": {"appConfig": {"logLevel": 2}}}


def test_adopt_adds_the_opt_in() -> None:
    conv = convert_one(GA_ESC, adopt=True)
    assert conv.result["spec"]["controllerConfig"]["adoptExistingObjects"] == "true"
    esm = convert_one(GA_ESM, adopt=True)
    assert "adoptExistingObjects" not in yaml.safe_dump(esm.result)


def test_egress_default_difference_is_noted_only_without_a_controller_policy() -> None:
    assert not any(note.startswith("egress:") for note in convert_one(GA_ESC).notes)
    assert any(note.startswith("egress:")
               for note in convert_one(ga(ESC, {"plugins": {}})).notes)


def test_a_list_as_kubectl_prints_it() -> None:
    listed = {"apiVersion": "v1", "kind": "List",
              "items": [yaml.safe_load(GA_ESC), yaml.safe_load(GA_ESM)]}
    kinds = [conv.kind for conv in convert_text(yaml.safe_dump(listed))]
    assert kinds == [ESC, ESM]


@pytest.mark.parametrize("text", [
    "spec: [", "", "just a string", "apiVersion: v1\nkind: ConfigMap\n",
    "apiVersion: operator.openshift.io/v1\nkind: ExternalSecretsConfig\n",
])
def test_unreadable_input_is_an_error(text: str) -> None:
    with pytest.raises(ConvertError):
        convert_text(text)


def test_convert_object_refuses_other_kinds() -> None:
    with pytest.raises(ConvertError, match="is not an ExternalSecretsConfig"):
        convert_object({"apiVersion": "operator.openshift.io/v1alpha1", "kind": "Other"})


# --- the command ------------------------------------------------------------------------------


def run_cli(argv: list[str], capsys: pytest.CaptureFixture[str],
            monkeypatch: pytest.MonkeyPatch, stdin: str = "") -> tuple[int, str, str]:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    code = cli.main(["convert", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_cli_writes_the_objects_and_reports_every_field(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "ga.yaml"
    source.write_text(GA_ESC + "---\n" + GA_ESM)
    out = tmp_path / "ours.yaml"
    code, stdout, stderr = run_cli(["-f", str(source), "-o", str(out), "--adopt"],
                                   capsys, monkeypatch)
    assert code == 3  # the advancedOverrides args
    assert stdout == ""
    esc, esm = yaml.safe_load_all(out.read_text())
    ExternalSecretsConfig.model_validate(esc)
    ExternalSecretsManager.model_validate(esm)
    assert esc["spec"]["controllerConfig"]["adoptExistingObjects"] == "true"
    assert ("  mapped      spec.plugins.bitwardenSecretManagerProvider.mode -> "
            "spec.appConfig.bitwardenSecretManagerProvider.enabled (Enabled -> \"true\")"
            in stderr.splitlines())
    assert "NOT MAPPED  spec.controllerConfig.componentConfigs[0].advancedOverrides" in stderr
    assert stderr.rstrip().endswith("NOT MAPPED (exit 3)")
    assert SECRET_VALUE not in stderr  # values never go into the report


def test_cli_reads_stdin_and_exits_0_when_everything_maps(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, stdout, stderr = run_cli(["-f", "-"], capsys, monkeypatch, stdin=GA_ESM)
    assert code == 0
    assert yaml.safe_load(stdout)["spec"]["features"][0]["enabled"] == "true"
    assert stderr.rstrip().endswith("none left out")


def test_cli_passes_this_shape_through(capsys: pytest.CaptureFixture[str],
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    text = (REPO_ROOT / "samples" / "esc-default.yaml").read_text()
    code, stdout, stderr = run_cli(["-f", "-"], capsys, monkeypatch, stdin=text)
    assert code == 0
    assert yaml.safe_load(stdout) == yaml.safe_load(text)
    assert "unchanged" in stderr


@pytest.mark.parametrize("stdin", ["spec: [", "apiVersion: v1\nkind: Secret\n"])
def test_cli_exits_2_and_writes_nothing_for_unreadable_input(
        stdin: str, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "ours.yaml"
    code, stdout, stderr = run_cli(["-f", "-", "-o", str(out)], capsys, monkeypatch,
                                   stdin=stdin)
    assert code == 2
    assert not out.exists()
    assert stdout == ""
    assert stderr.startswith("convert: nothing written:")


def test_cli_exits_2_for_a_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, stderr = run_cli(["-f", str(tmp_path / "absent.yaml")], capsys, monkeypatch)
    assert code == 2
    assert "absent.yaml" in stderr


def test_cli_exits_2_when_the_output_cannot_be_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    code, stdout, stderr = run_cli(["-f", "-", "-o", str(tmp_path / "absent" / "ours.yaml")],
                                   capsys, monkeypatch, stdin=GA_ESM)
    assert code == 2
    assert stdout == ""
    assert stderr.startswith("convert: nothing written:")
