"""The CRDs that hack/fetch-crds.sh takes from the pinned modules install into a real API server.

OLM installs the operand CRDs from the bundle, and tests install cert-manager's, so every
one of them must be accepted by kube-apiserver as it is and become Established.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from manager.api.models import ExternalSecretsConfigSpec
from manager.config import OperatorEnvironment, effective_config
from manager.paths import REPO_ROOT
from manager.render import render_operand
from tests.conftest import Cluster

FETCH_SCRIPT = REPO_ROOT / "hack" / "fetch-crds.sh"

# The operand kinds the operator's own objects refer to (webhooks, RBAC, samples).
OPERAND_KINDS = {
    "ExternalSecret", "SecretStore", "ClusterSecretStore", "ClusterExternalSecret",
    "PushSecret", "ClusterPushSecret", "GeneratorState", "ClusterGenerator", "Password",
}
OPERAND_GROUPS = {"external-secrets.io", "generators.external-secrets.io"}
CERT_MANAGER_KINDS = {"Certificate", "Issuer", "ClusterIssuer"}


@pytest.fixture(scope="module")
def crd_dir() -> Path:
    result = subprocess.run(["bash", str(FETCH_SCRIPT)], stdout=subprocess.PIPE, text=True,
                            check=True, timeout=600)
    return Path(result.stdout.strip().splitlines()[-1])


def _crds(directory: Path) -> list[dict[str, object]]:
    documents = [yaml.safe_load(path.read_text()) for path in sorted(directory.glob("*.yaml"))]
    assert documents, f"no CRDs in {directory}"
    return documents


def _kinds(crds: list[dict[str, object]]) -> set[str]:
    return {crd["spec"]["names"]["kind"] for crd in crds}  # type: ignore[index]


def test_operand_crds_are_complete_and_exclude_test_only_generators(crd_dir: Path) -> None:
    crds = _crds(crd_dir / "external-secrets")
    kinds = _kinds(crds)
    assert kinds >= OPERAND_KINDS
    assert "Fake" not in kinds
    assert {crd["spec"]["group"] for crd in crds} == OPERAND_GROUPS  # type: ignore[index]


def _granted(role: dict[str, object], verb: str) -> set[str]:
    """The generators.external-secrets.io resources `role` grants `verb` on (any name)."""
    return {resource for rule in role["rules"]  # type: ignore[attr-defined]
            if "generators.external-secrets.io" in rule["apiGroups"]
            and verb in rule["verbs"] and not rule.get("resourceNames")
            for resource in rule["resources"]}


def test_the_rendered_rbac_covers_every_shipped_generator(crd_dir: Path) -> None:
    """A generator CRD the release adds (v2.9.0: BeyondtrustWorkloadCredentialsDynamicSecret,
    GitlabDeployToken) is useless until the controller may read it, and users of the
    aggregated view and edit roles may see and write it. Compared with the CRDs themselves,
    so the next release's additions fail here, not in a user's ExternalSecret."""
    crds = [crd for crd in _crds(crd_dir / "external-secrets")
            if crd["spec"]["group"] == "generators.external-secrets.io"]  # type: ignore[index]
    plurals = {crd["spec"]["names"]["plural"] for crd in crds}  # type: ignore[index]
    namespaced = {crd["spec"]["names"]["plural"] for crd in crds  # type: ignore[index]
                  if crd["spec"]["scope"] == "Namespaced"}  # type: ignore[index]
    assert {"gitlabdeploytokens", "beyondtrustworkloadcredentialsdynamicsecrets"} <= plurals
    environment = OperatorEnvironment.from_environ({})
    roles = {}
    for spec in ({}, {"appConfig": {"operatingNamespace": "team-a"}}):
        config = effective_config(ExternalSecretsConfigSpec.model_validate(spec), None,
                                  environment)
        roles.update({(obj["kind"], obj["metadata"]["name"]): obj
                      for obj in render_operand(config).objects()
                      if obj["kind"] in ("ClusterRole", "Role")})
    controller = roles[("ClusterRole", "external-secrets-controller")]
    in_namespace = roles[("Role", "external-secrets-controller")]
    for verb in ("get", "list", "watch"):
        assert plurals <= _granted(controller, verb), (verb, plurals - _granted(controller, verb))
        assert namespaced <= _granted(in_namespace, verb), verb
        view = roles[("ClusterRole", "external-secrets-view")]
        assert plurals <= _granted(view, verb), (verb, plurals - _granted(view, verb))
    for verb in ("create", "update", "patch", "delete"):
        edit = roles[("ClusterRole", "external-secrets-edit")]
        assert plurals <= _granted(edit, verb), (verb, plurals - _granted(edit, verb))


def test_cert_manager_crds_include_the_issuer_and_certificate_kinds(crd_dir: Path) -> None:
    assert _kinds(_crds(crd_dir / "cert-manager")) >= CERT_MANAGER_KINDS


def test_cache_is_reused(crd_dir: Path) -> None:
    marker = crd_dir / ".complete"
    before = marker.stat().st_mtime_ns
    again = subprocess.run(["bash", str(FETCH_SCRIPT)], stdout=subprocess.PIPE, text=True,
                           check=True, timeout=60).stdout.strip()
    assert Path(again) == crd_dir
    assert marker.stat().st_mtime_ns == before


def test_every_fetched_crd_installs_and_becomes_established(cluster: Cluster,
                                                           crd_dir: Path) -> None:
    files = sorted(crd_dir.glob("*/*.yaml"))
    names = [yaml.safe_load(path.read_text())["metadata"]["name"] for path in files]
    try:
        _installs_and_serves(cluster, files, names)
    finally:  # the session's cluster is plain Kubernetes: OpenShift's config API goes again
        openshift = [yaml.safe_load(path.read_text())["metadata"]["name"]
                     for path in sorted((crd_dir / "openshift-config").glob("*.yaml"))]
        cluster.kubectl("delete", "--wait=true", "--ignore-not-found",
                        *(f"customresourcedefinition/{name}" for name in openshift))


def _installs_and_serves(cluster: Cluster, files: list[Path], names: list[str]) -> None:
    # Server-side: several of these CRDs are larger than the client-side apply annotation limit.
    cluster.kubectl("apply", "--server-side", "--force-conflicts",
                    "--field-manager=crd-install-test", *(f"--filename={path}" for path in files))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                    *(f"customresourcedefinition/{name}" for name in names))

    listed = json.loads(cluster.kubectl("get", "customresourcedefinitions", "-o", "json").stdout)
    by_name = {item["metadata"]["name"]: item for item in listed["items"]}
    for name in names:
        conditions = {c["type"]: c["status"] for c in by_name[name]["status"]["conditions"]}
        assert conditions.get("Established") == "True", name
        assert conditions.get("NamesAccepted") == "True", name
    # Each kind is served: listing it succeeds instead of "the server doesn't have a
    # resource type".
    for name in names:
        result = cluster.kubectl("get", name, "--all-namespaces", "-o", "name", check=False)
        assert result.returncode == 0, f"{name}: {result.stderr}"
