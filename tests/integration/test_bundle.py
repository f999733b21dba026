"""The OLM bundle: generated from the repository's inputs, valid for OLM, and installable.

The generator runs on the real inputs (manifests/crds, manifests/operator/rbac.yaml, the
pinned operand CRDs); the operator-framework's own validators (hack/validate-bundle.sh)
judge the result; the local API server accepts the CRDs, every alm-example and the
operator Deployment under the restricted Pod Security profile.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager import versions
from manager.olm import bundle, crds, identity, operator_manifests, rbac
from manager.paths import REPO_ROOT
from tests.conftest import Cluster

VALIDATE = REPO_ROOT / "hack" / "validate-bundle.sh"


@pytest.fixture(scope="module")
def operand_crd_dir() -> Path:
    return crds.fetch_operand_crds(REPO_ROOT)


@pytest.fixture(scope="module")
def generated(operand_crd_dir: Path) -> bundle.GeneratedFiles:
    return bundle.generate(bundle.BundleSources(REPO_ROOT, operand_crd_dir))


def _write(root: Path, files: bundle.GeneratedFiles) -> None:
    for relative, content in files.all().items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(content)


@pytest.fixture(scope="module")
def bundle_dir(generated: bundle.GeneratedFiles, tmp_path_factory: pytest.TempPathFactory,
               ) -> Path:
    root = tmp_path_factory.mktemp("generated")
    _write(root, generated)
    return root / bundle.BUNDLE_DIR


def _csv(files: bundle.GeneratedFiles) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load(files.committed[bundle.CSV_FILE])
    return document


def _validate(directory: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    # The first run builds the validator from the Go module proxy (minutes, once per machine).
    return subprocess.run(["bash", str(VALIDATE), *flags, str(directory)], capture_output=True,
                          text=True, check=False, timeout=1800)


def test_committed_files_match_the_generator(generated: bundle.GeneratedFiles) -> None:
    assert bundle.stale_files(REPO_ROOT, generated) == []


def test_operator_framework_validators_accept_the_bundle(bundle_dir: Path) -> None:
    result = _validate(bundle_dir, "-strict")
    assert result.returncode == 0, result.stdout + result.stderr
    assert ", 0 errors, 0 warnings" in result.stdout


def test_validators_reject_a_bundle_missing_an_owned_crd(bundle_dir: Path, tmp_path: Path,
                                                        ) -> None:
    broken = tmp_path / "bundle"
    shutil.copytree(bundle_dir, broken)
    (broken / "manifests" / "external-secrets.io_externalsecrets.yaml").unlink()
    result = _validate(broken)
    assert result.returncode == 1
    assert "ERROR [bundle]" in result.stdout
    assert "Kind=ExternalSecret: owned CRD" in result.stdout


def test_validators_reject_broken_bundle_metadata(bundle_dir: Path, tmp_path: Path) -> None:
    broken = tmp_path / "bundle"
    shutil.copytree(bundle_dir, broken)
    annotations = broken / "metadata" / "annotations.yaml"
    annotations.write_text(annotations.read_text().replace("registry+v1", "plain+v0"))
    result = _validate(broken, "-suites=metadata")
    assert result.returncode == 1
    assert "ERROR [metadata]" in result.stdout


def test_csv_installs_the_operator_deployment_with_the_pinned_images(
        generated: bundle.GeneratedFiles) -> None:
    csv = _csv(generated)
    deployment = yaml.safe_load(generated.committed[bundle.OPERATOR_DIR / "deployment.yaml"])
    [installed] = csv["spec"]["install"]["spec"]["deployments"]
    assert installed["spec"] == deployment["spec"]
    related = {image["name"]: image["image"] for image in csv["spec"]["relatedImages"]}
    assert related["external-secrets"] == versions.EXTERNAL_SECRETS_IMAGE
    assert related["bitwarden-sdk-server"] == versions.BITWARDEN_SDK_SERVER_IMAGE
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert related[identity.PACKAGE] == container["image"] == csv["metadata"]["annotations"][
        "containerImage"]
    assert csv["spec"]["version"] == identity.OPERATOR_VERSION
    assert csv["metadata"]["annotations"]["olm.skipRange"] == f"<{identity.OPERATOR_VERSION}"
    assert [m["type"] for m in csv["spec"]["installModes"] if m["supported"]] == ["AllNamespaces"]
    assert csv["metadata"]["annotations"]["features.operators.openshift.io/proxy-aware"] == "true"


def test_csv_permissions_are_the_rbac_files_rules(generated: bundle.GeneratedFiles) -> None:
    permissions = rbac.load(REPO_ROOT / bundle.RBAC_FILE)
    install = _csv(generated)["spec"]["install"]["spec"]
    cluster = install.get("clusterPermissions", [{"rules": []}])
    assert cluster[0]["rules"] == permissions.cluster_rules
    namespaced = install.get("permissions", [{"rules": []}])
    assert namespaced[0]["rules"] == permissions.namespace_rules
    for entry in [*install.get("clusterPermissions", []), *install.get("permissions", [])]:
        assert entry["serviceAccountName"] == identity.SERVICE_ACCOUNT


def _schema_at(schema: dict[str, Any], path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in path.split("."):
        while node is not None and node.get("type") == "array":
            node = node.get("items")
        if node is None or part not in node.get("properties", {}):
            return None
        node = node["properties"][part]
    return node


def test_every_owned_crd_is_shipped_and_every_descriptor_path_exists(
        generated: bundle.GeneratedFiles) -> None:
    shipped = {}
    for relative, content in generated.all().items():
        documents = list(yaml.safe_load_all(content)) if relative.suffix == ".yaml" else []
        for document in documents:  # manifests/operator/ files may hold several
            if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                shipped[document["metadata"]["name"]] = document
    owned = _csv(generated)["spec"]["customresourcedefinitions"]["owned"]
    assert {entry["name"] for entry in owned} == set(shipped)
    for entry in owned:
        crd = crds.Crd("", shipped[entry["name"]])
        assert entry["version"] == crd.version("storage")["name"]
        assert entry["description"], entry["name"]
        for section, key in (("spec", "specDescriptors"), ("status", "statusDescriptors")):
            for descriptor in entry.get(key, []):
                assert _schema_at(crd.schema, f"{section}.{descriptor['path']}") is not None, (
                    f"{entry['kind']}: {section}.{descriptor['path']} is not in the schema")


def test_operand_crds_are_the_pinned_modules_files_with_the_operand_label(
        generated: bundle.GeneratedFiles, operand_crd_dir: Path) -> None:
    originals = sorted(operand_crd_dir.glob("*.yaml"))
    assert {bundle.BUNDLE_MANIFESTS / path.name for path in originals} == set(generated.build_time)
    for path in originals:
        original = yaml.safe_load(path.read_text())
        shipped = yaml.safe_load(generated.build_time[bundle.BUNDLE_MANIFESTS / path.name])
        assert shipped["metadata"]["labels"] == {**original["metadata"].get("labels", {}),
                                                 **crds.OPERAND_LABELS}
        shipped["metadata"]["labels"] = original["metadata"].get("labels", {})
        assert shipped == original, path.name


def test_bundle_command_check_mode_detects_drift_and_leftovers(
        tmp_path: Path, operand_crd_dir: Path) -> None:
    # A scratch root with the same inputs, so the real work tree is never written.
    shutil.copytree(REPO_ROOT / bundle.OWN_CRD_DIR, tmp_path / bundle.OWN_CRD_DIR)
    (tmp_path / bundle.OPERATOR_DIR).mkdir(parents=True)
    shutil.copy(REPO_ROOT / bundle.RBAC_FILE, tmp_path / bundle.RBAC_FILE)

    def command(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "manager", "bundle", f"--root={tmp_path}",
             f"--operand-crds={operand_crd_dir}", *extra],
            capture_output=True, text=True, check=False, cwd=REPO_ROOT, timeout=300)

    assert command("--check").returncode == 1  # nothing written yet
    assert command().returncode == 0
    assert command("--check").returncode == 0
    deployment = tmp_path / bundle.OPERATOR_DIR / "deployment.yaml"
    deployment.write_text(deployment.read_text().replace("replicas: 1", "replicas: 2"))
    leftover = tmp_path / bundle.BUNDLE_MANIFESTS / "old.yaml"
    leftover.write_text("{}\n")
    result = command("--check")
    assert result.returncode == 1
    assert "manifests/operator/deployment.yaml: stale" in result.stderr
    assert "bundle/manifests/old.yaml: not generated any more" in result.stderr
    assert command().returncode == 0
    assert not leftover.exists()
    assert command("--check").returncode == 0


def _crd_files(directory: Path) -> list[Path]:
    return [path for path in sorted(directory.glob("*.yaml"))
            if yaml.safe_load(path.read_text()).get("kind") == "CustomResourceDefinition"]


def _accepted(result: subprocess.CompletedProcess[str]) -> bool:
    # The API server validates a custom object against its CRD (schema and CEL) before it
    # calls validating webhooks and before storage. A sample that got as far as the
    # operand's webhook (absent here, if another test installed its configuration) or to
    # AlreadyExists (a singleton another test created) has therefore passed validation.
    return (result.returncode == 0 or "failed calling webhook" in result.stderr
            or "AlreadyExists" in result.stderr or "already exists" in result.stderr)


def test_bundle_crds_install_and_every_sample_is_valid(cluster: Cluster, bundle_dir: Path,
                                                       generated: bundle.GeneratedFiles) -> None:
    files = _crd_files(bundle_dir / "manifests")
    cluster.kubectl("apply", "--server-side", "--force-conflicts",
                    "--field-manager=bundle-test", *(f"--filename={path}" for path in files))
    names = [yaml.safe_load(path.read_text())["metadata"]["name"] for path in files]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                    *(f"customresourcedefinition/{name}" for name in names))

    examples = json.loads(_csv(generated)["metadata"]["annotations"]["alm-examples"])
    owned = {entry["kind"] for entry in
             _csv(generated)["spec"]["customresourcedefinitions"]["owned"]}
    assert {example["kind"] for example in examples} == owned
    for example in examples:
        result = cluster.kubectl("create", "--dry-run=server", "-o", "name", "-f", "-",
                                 check=False, input=json.dumps(example))
        assert _accepted(result), f"{example['kind']}: {result.stderr}"


def _namespace(cluster: Cluster, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    labels = [f"pod-security.kubernetes.io/{mode}=restricted"
              for mode in ("enforce", "warn", "audit")]
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, *labels)
    return name


def _apply_dry_run(cluster: Cluster, document: dict[str, Any],
                   ) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl("apply", "--dry-run=server", "-f", "-", check=False,
                           input=json.dumps(document))


def test_operator_deployment_meets_the_restricted_pod_security_profile(
        cluster: Cluster) -> None:
    namespace = _namespace(cluster, "olm-psa")
    deployment = operator_manifests.deployment()
    deployment["metadata"]["namespace"] = namespace
    result = _apply_dry_run(cluster, deployment)
    assert result.returncode == 0, result.stderr
    assert "PodSecurity" not in result.stderr
    assert "Warning" not in result.stderr

    # Control: the same namespace does warn about a pod template that breaks the profile.
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["securityContext"]["allowPrivilegeEscalation"] = True
    result = _apply_dry_run(cluster, deployment)
    assert "would violate PodSecurity" in result.stderr


def test_operator_namespace_enforces_the_restricted_profile() -> None:
    labels = operator_manifests.namespace()["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
