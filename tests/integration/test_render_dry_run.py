"""Every rendered object of every golden matrix case is accepted by a real kube-apiserver.

Each case is applied server-side with `--dry-run=server` and strict field validation, as
`render` prints it (so the API server also reads our YAML). Certificates need cert-manager's
CRDs, which hack/fetch-crds.sh provides from the pinned module.

The test control plane never finishes deleting namespaces, so each case renders into a
namespace of its own (the golden tests pin the output for the case's real namespace); the
namespace is created for real, because namespaced objects cannot be dry-run into a namespace
that does not exist.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.api.models import ExternalSecretsConfig, ExternalSecretsManager
from manager.commands.render import dump_objects
from manager.config import OperatorEnvironment, effective_config
from manager.paths import REPO_ROOT as ROOT
from manager.render import render_operand
from tests.conftest import Cluster

SAMPLES = ROOT / "samples"
MATRIX: dict[str, dict[str, Any]] = yaml.safe_load(
    (ROOT / "tests" / "golden" / "matrix.yaml").read_text())
FIELD_MANAGER = "render-dry-run-test"


@pytest.fixture(scope="module")
def cert_manager_crds(cluster: Cluster) -> None:
    result = subprocess.run(["bash", str(ROOT / "hack" / "fetch-crds.sh")],
                            stdout=subprocess.PIPE, text=True, check=True, timeout=600)
    files = sorted((Path(result.stdout.strip().splitlines()[-1]) / "cert-manager").glob("*.yaml"))
    assert files, "hack/fetch-crds.sh gave no cert-manager CRDs"
    cluster.kubectl("apply", "--server-side", "--force-conflicts",
                    f"--field-manager={FIELD_MANAGER}", *(f"--filename={path}" for path in files))
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=120s",
                    "customresourcedefinition/certificates.cert-manager.io")


def render_case(case: str, namespace: str) -> tuple[dict[str, Any], ...]:
    inputs = MATRIX[case]
    document = yaml.safe_load((SAMPLES / inputs["esc"]).read_text())
    spec = document.setdefault("spec", {}) or {}
    document["spec"] = spec
    spec.setdefault("controllerConfig", {})["namespace"] = namespace
    esc = ExternalSecretsConfig.model_validate(document)
    esm = (ExternalSecretsManager.model_validate(
        yaml.safe_load((SAMPLES / inputs["esm"]).read_text())) if "esm" in inputs else None)
    config = effective_config(esc.spec, esm.spec if esm else None,
                              OperatorEnvironment.from_environ(inputs.get("env", {})))
    return render_operand(config).objects()


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_every_rendered_object_is_accepted_by_the_api_server(
        cluster: Cluster, cert_manager_crds: None, case: str) -> None:
    namespace = f"dry-run-{uuid.uuid4().hex[:8]}"
    objects = render_case(case, namespace)
    assert objects[0]["kind"] == "Namespace"
    assert objects[0]["metadata"]["name"] == namespace
    cluster.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                    "--filename=-", input=json.dumps(objects[0]))
    # The operating namespace (the controller's Role goes there) exists beforehand.
    for other in {o["metadata"].get("namespace") for o in objects} - {None, namespace}:
        cluster.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                        "--filename=-", input=json.dumps(
                            {"apiVersion": "v1", "kind": "Namespace",
                             "metadata": {"name": other}}))

    result = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "--validate=strict",
        "--field-manager=external-secrets-operator", "--output=json", "--filename=-",
        input=dump_objects(objects), check=False)

    assert result.returncode == 0, result.stderr
    answer = json.loads(result.stdout)
    items = answer["items"] if answer.get("kind") == "List" else [answer]
    assert [(item["kind"], item["metadata"]["name"]) for item in items] == [
        (obj["kind"], obj["metadata"]["name"]) for obj in objects]
    for item, obj in zip(items, objects, strict=True):
        assert item["metadata"].get("namespace") == obj["metadata"].get("namespace")
        # (The API server adds kubernetes.io/metadata.name to a Namespace.)
        assert obj["metadata"]["labels"].items() <= item["metadata"]["labels"].items()
        if obj["kind"] == "Deployment":
            template = item["spec"]["template"]
            assert template["metadata"]["labels"] == \
                obj["spec"]["template"]["metadata"]["labels"]
            for served, rendered in zip(template["spec"]["containers"],
                                        obj["spec"]["template"]["spec"]["containers"],
                                        strict=True):
                assert served["securityContext"] == rendered["securityContext"]
                assert served.get("env") == rendered.get("env")
                assert served.get("args") == rendered.get("args")


def test_the_dry_run_check_rejects_an_unknown_field(cluster: Cluster) -> None:
    """Control: strict validation really inspects the objects (a typo in a template fails)."""
    namespace = f"dry-run-{uuid.uuid4().hex[:8]}"
    objects = render_case("defaults", namespace)
    cluster.kubectl("apply", "--server-side", f"--field-manager={FIELD_MANAGER}",
                    "--filename=-", input=json.dumps(objects[0]))
    deployment = next(obj for obj in objects if obj["kind"] == "Deployment")
    deployment["spec"]["template"]["spec"]["containers"][0]["imagePullPolicyy"] = "Always"

    result = cluster.kubectl(
        "apply", "--server-side", "--dry-run=server", "--validate=strict",
        "--field-manager=external-secrets-operator", "--filename=-",
        input=dump_objects([deployment]), check=False)

    assert result.returncode != 0
    assert "imagePullPolicyy" in result.stderr
