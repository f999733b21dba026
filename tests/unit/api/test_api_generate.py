"""The generated CRDs and docs: committed copies are current, and they say what the seed says."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from manager.api import artefacts, docs, rules
from manager.api.crd import crds
from manager.api.markers import Rule
from manager.paths import REPO_ROOT as ROOT

ESC = "operator.openshift.io_externalsecretsconfigs.yaml"
ESM = "operator.openshift.io_externalsecretsmanagers.yaml"


def generate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "manager", "generate", *args], cwd=ROOT,
                          capture_output=True, text=True, check=False, timeout=120)


def test_committed_files_are_not_stale() -> None:
    result = generate("--check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "up to date" in result.stdout


@pytest.fixture
def copy_of_generated(tmp_path: Path) -> Path:
    for relative in artefacts.generated_files():
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / relative, tmp_path / relative)
    return tmp_path


def test_check_fails_on_an_edited_file(copy_of_generated: Path) -> None:
    crd_file = copy_of_generated / "manifests" / "crds" / ESC
    crd_file.write_text(crd_file.read_text().replace("maxLength: 63", "maxLength: 64", 1))
    result = generate("--check", f"--root={copy_of_generated}")
    assert result.returncode == 1
    assert f"STALE manifests/crds/{ESC}" in result.stdout


def test_check_fails_on_a_missing_file_and_generate_restores_it(copy_of_generated: Path) -> None:
    (copy_of_generated / docs.DOCS_PATH).unlink()
    assert generate("--check", f"--root={copy_of_generated}").returncode == 1
    assert generate(f"--root={copy_of_generated}").returncode == 0
    assert (copy_of_generated / docs.DOCS_PATH).read_text() == (ROOT / docs.DOCS_PATH).read_text()


def test_generation_is_deterministic() -> None:
    assert artefacts.generated_files() == artefacts.generated_files()


# --- the CRDs carry the seed's markers --------------------------------------------------------


def _version(name: str) -> dict[str, Any]:
    version: dict[str, Any] = crds()[name]["spec"]["versions"][0]
    return version


def _at(name: str, path: str) -> dict[str, Any]:
    node: dict[str, Any] = _version(name)["schema"]["openAPIV3Schema"]
    for part in path.split("."):
        node = node["items"] if part == "[]" else node["properties"][part]
    return node


def test_resource_names_scope_and_labels() -> None:
    for name, kind, short in ((ESC, "ExternalSecretsConfig", ["esc", "externalsecretsconfig",
                                                              "esconfig"]),
                              (ESM, "ExternalSecretsManager", ["esm", "externalsecretsmanager",
                                                               "esmanager"])):
        document = crds()[name]
        assert document["spec"]["scope"] == "Cluster"
        assert document["spec"]["group"] == "operator.openshift.io"
        assert document["spec"]["names"]["kind"] == kind
        assert document["spec"]["names"]["shortNames"] == short
        # Not `external-secrets`: that category is the operand's (docs/api.md, deviations).
        assert document["spec"]["names"]["categories"] == ["external-secrets-operator"]
        assert document["metadata"]["labels"] == {
            "app.kubernetes.io/name": kind.lower(),
            "app.kubernetes.io/part-of": "external-secrets-operator",
        }
        version = _version(name)
        assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
        assert version["subresources"] == {"status": {}}


def test_print_columns() -> None:
    ready = ".status.conditions[?(@.type=='Ready')]"
    columns = _version(ESC)["additionalPrinterColumns"]
    # The seed's three columns, as the seed writes them, shown by a plain `kubectl get`.
    seed = [{"name": "Ready", "type": "string", "jsonPath": f"{ready}.status"},
            {"name": "Message", "type": "string", "jsonPath": f"{ready}.message"},
            {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]
    assert [c for c in columns if c in seed] == seed
    assert [(c["name"], c["jsonPath"], c.get("priority", 0)) for c in columns] == [
        ("Ready", f"{ready}.status", 0), ("Reason", f"{ready}.reason", 0),
        ("Version", ".status.externalSecretsVersion", 0),
        ("Namespace", ".status.operandNamespace", 0), ("Message", f"{ready}.message", 0),
        ("AGE", ".metadata.creationTimestamp", 0),
        ("Failure", ".status.failure.object", 1),
        ("Image", ".status.externalSecretsImage", 1)]
    assert _version(ESM)["additionalPrinterColumns"] == [
        {"name": "Ready", "type": "string", "jsonPath": ".status.controllersReady"},
        {"name": "AGE", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]


# (file, path, expected subset of the schema), straight from the seed's markers.
SEED_MARKERS = [
    (ESC, "spec.appConfig.logLevel", {"type": "integer", "format": "int32", "default": 1,
                                      "minimum": 1, "maximum": 5}),
    (ESC, "spec.appConfig.operatingNamespace", {"minLength": 1, "maxLength": 63}),
    (ESC, "spec.appConfig.tolerations", {"type": "array", "maxItems": 10, "minItems": 0,
                                         "x-kubernetes-list-type": "atomic"}),
    (ESC, "spec.appConfig.nodeSelector", {"maxProperties": 10, "minProperties": 0,
                                          "x-kubernetes-map-type": "atomic"}),
    (ESC, "spec.appConfig.proxy.httpProxy", {"minLength": 0, "maxLength": 2048}),
    (ESC, "spec.appConfig.proxy.httpsProxy", {"minLength": 0, "maxLength": 2048}),
    (ESC, "spec.appConfig.proxy.noProxy", {"minLength": 0, "maxLength": 4096}),
    (ESC, "spec.appConfig.bitwardenSecretManagerProvider.enabled",
     {"enum": ["true", "false"], "default": "false"}),
    (ESC, "spec.appConfig.bitwardenSecretManagerProvider.secretRef",
     {"required": ["name"]}),
    (ESC, "spec.appConfig.bitwardenSecretManagerProvider.secretRef.name",
     {"minLength": 1, "maxLength": 253}),
    (ESC, "spec.appConfig.webhookConfig.certificateCheckInterval",
     {"type": "string", "default": "5m"}),
    (ESC, "spec.appConfig.certManagerConfig", {"required": ["enabled"]}),
    (ESC, "spec.appConfig.certManagerConfig.enabled", {"enum": ["true", "false"],
                                                       "default": "false"}),
    (ESC, "spec.appConfig.certManagerConfig.addInjectorAnnotations",
     {"enum": ["true", "false"], "default": "false"}),
    (ESC, "spec.appConfig.certManagerConfig.certificateDuration", {"default": "8760h"}),
    (ESC, "spec.appConfig.certManagerConfig.certificateRenewBefore", {"default": "30m"}),
    (ESC, "spec.appConfig.certManagerConfig.issuerRef", {"required": ["name"]}),
    (ESC, "spec.appConfig.certManagerConfig.issuerRef.kind", {"minLength": 1,
                                                              "maxLength": 253}),
    (ESC, "spec.appConfig.certManagerConfig.issuerRef.group", {"minLength": 1,
                                                               "maxLength": 253}),
    (ESC, "spec.controllerConfig.namespace", {"default": "external-secrets", "minLength": 1,
                                              "maxLength": 63}),
    (ESC, "spec.controllerConfig.labels", {"maxProperties": 20, "minProperties": 0,
                                           "x-kubernetes-map-type": "granular"}),
    (ESC, "status.conditions", {"x-kubernetes-list-type": "map",
                                "x-kubernetes-list-map-keys": ["type"]}),
    (ESC, "status.conditions.[]", {"required": ["lastTransitionTime", "message", "reason",
                                                "status", "type"]}),
    (ESC, "status.bitwardenSDKServerImage", {"type": "string"}),
    (ESM, "spec.globalConfig.labels", {"maxProperties": 20, "minProperties": 0,
                                       "x-kubernetes-map-type": "granular"}),
    (ESM, "spec.globalConfig.logLevel", {"default": 1, "minimum": 1, "maximum": 5}),
    (ESM, "spec.features.[]", {"required": ["enabled", "name"]}),
    (ESM, "spec.features.[].enabled", {"enum": ["true", "false"]}),
    (ESM, "status.controllerStatuses", {"x-kubernetes-list-type": "map",
                                        "x-kubernetes-list-map-keys": ["name"]}),
    (ESM, "status.controllerStatuses.[].conditions", {"x-kubernetes-list-type": "map",
                                                      "x-kubernetes-list-map-keys": ["type"]}),
    (ESM, "status.controllerStatuses.[].conditions.[]", {"required": ["message", "status",
                                                                     "type"]}),
    (ESM, "status.controllerStatuses.[].observedGeneration", {"format": "int64",
                                                              "minimum": 0}),
    (ESM, "status.lastTransitionTime", {"type": "string", "format": "date-time"}),
]


@pytest.mark.parametrize(("name", "path", "subset"), SEED_MARKERS,
                         ids=[f"{n.split('_')[1][:-5]}:{p}" for n, p, _ in SEED_MARKERS])
def test_seed_markers_reach_the_schema(name: str, path: str, subset: dict[str, Any]) -> None:
    node = _at(name, path)
    assert {k: node.get(k) for k in subset} == subset


def test_core_types_are_real_schemas_not_preserve_unknown_fields() -> None:
    resources = _at(ESC, "spec.appConfig.resources")
    assert set(resources["properties"]) >= {"limits", "requests", "claims"}
    quantity = resources["properties"]["limits"]["additionalProperties"]
    assert quantity["x-kubernetes-int-or-string"] is True
    toleration = _at(ESC, "spec.appConfig.tolerations.[]")
    assert toleration["properties"]["operator"]["enum"] == ["Equal", "Exists"]
    assert "nodeAffinity" in _at(ESM, "spec.globalConfig.affinity")["properties"]
    text = (ROOT / "manifests" / "crds" / ESC).read_text()
    assert "x-kubernetes-preserve-unknown-fields" not in text
    assert "$ref" not in text


def _all_rules() -> Iterator[Rule]:
    for value in vars(rules).values():
        if isinstance(value, Rule):
            yield value
        elif isinstance(value, tuple):
            yield from (v for v in value if isinstance(v, Rule))


def _rules_in(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for entry in node.get("x-kubernetes-validations", []):
            yield entry["rule"], entry["message"]
        for value in node.values():
            yield from _rules_in(value)
    elif isinstance(node, list):
        for value in node:
            yield from _rules_in(value)


def test_every_declared_rule_reaches_a_crd() -> None:
    generated = {pair for document in crds().values() for pair in _rules_in(document)}
    declared = {(r.rule, r.message) for r in _all_rules()}
    assert declared - generated == set()
    assert generated - declared == set()


def test_seed_rules_keep_their_exact_messages() -> None:
    messages = {r.message for r in _all_rules()}
    assert messages >= {
        "ExternalSecretsConfig is a singleton, .metadata.name must be 'cluster'",
        "ExternalSecretsManager is a singleton, .metadata.name must be 'cluster'",
        "namespace can only be configured during creation",
        "namespace is immutable once set",
        "issuerRef must be provided when enabled is set to 'true'.",
        "addInjectorAnnotations can only be set when enabled is set to 'true'.",
        "enabled is immutable once set",
        "issuerRef is immutable once set",
        "kind must be either 'Issuer' or 'ClusterIssuer'",
        "group must be 'cert-manager.io'",
    }


def test_docs_examples_parse_with_the_models() -> None:
    parsed = docs.example_models()
    assert len(parsed) == len(docs.EXAMPLES) >= 3


def test_docs_list_every_rule_message_and_deviation() -> None:
    text = (ROOT / docs.DOCS_PATH).read_text()
    for rule in _all_rules():
        assert rule.message.replace("|", "\\|") in text
    assert "has()" in text
    assert "Where the CRDs deviate from the seed" in text


def _spec_fields(schema: dict[str, Any], path: str) -> list[tuple[str, dict[str, Any]]]:
    """Every field under `spec`, down to the core/v1 types (whose descriptions are theirs)."""
    found = []
    for name, child in (schema.get("properties") or {}).items():
        found.append((f"{path}.{name}", child))
        if name in ("resources", "affinity", "tolerations", "egress", "overrideEnv",
                    "topologySpreadConstraints"):
            continue
        items = child.get("items") if child.get("type") == "array" else None
        found.extend(_spec_fields(items or child, f"{path}.{name}"))
    return found


def test_every_spec_field_says_its_default_for_kubectl_explain() -> None:
    """`kubectl explain` prints descriptions only: each says its default (or that it is
    required), and the bounded ones their range."""
    for name in (ESC, ESM):
        for path, field in _spec_fields(_at(name, "spec"), "spec"):
            text = field.get("description", "")
            assert "Default" in text or "Required" in text, (name, path, text)
    text = _at(ESC, "spec.appConfig.logLevel")["description"]
    assert "Range 1 to 5" in text
    assert "4 (debug) and 5 (trace) give `debug`" in text
