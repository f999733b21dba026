"""The operand's pod templates meet the `restricted` Pod Security profile.

Every Deployment the renderer produces for each sample ExternalSecretsConfig (every
component: controller, webhook, cert-controller, bitwarden-sdk-server; with scheduling,
resources and proxy settings) is applied with a server-side dry run to a namespace labelled
`pod-security.kubernetes.io/enforce=restricted` and `warn=restricted`. The API server's Pod
Security admission answers with a warning for any template that would violate the profile;
kubectl prints it as "Warning: would violate PodSecurity ...". A control case proves the
namespace does warn about a template that breaks the profile.

(The operator's own Deployment is checked the same way in test_bundle.py.)
"""

from __future__ import annotations

import copy
import json
import os
import uuid
from typing import Any

import pytest
import yaml

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import OperatorEnvironment, effective_config
from manager.paths import REPO_ROOT
from manager.render import render_operand
from tests.conftest import Cluster

SAMPLES = REPO_ROOT / "samples"
ESC_SAMPLES = sorted(path.name for path in SAMPLES.glob("esc-*.yaml"))


def rendered_deployments(esc_sample: str, esm_sample: str | None = None,
                         ) -> list[dict[str, Any]]:
    esc = yaml.safe_load((SAMPLES / esc_sample).read_text())
    esm = yaml.safe_load((SAMPLES / esm_sample).read_text()) if esm_sample else None
    config = effective_config(
        ExternalSecretsConfigSpec.model_validate(esc["spec"]),
        ExternalSecretsManagerSpec.model_validate(esm["spec"]) if esm else None,
        OperatorEnvironment.from_environ(os.environ))
    return [obj for obj in render_operand(config).objects() if obj["kind"] == "Deployment"]


@pytest.fixture(scope="module")
def restricted_namespace(cluster: Cluster) -> str:
    name = f"eso-psa-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", name)
    cluster.kubectl("label", "namespace", name, "pod-security.kubernetes.io/enforce=restricted",
                    "pod-security.kubernetes.io/warn=restricted")
    return name


def dry_run_warnings(cluster: Cluster, namespace: str, deployment: dict[str, Any]) -> str:
    """kubectl's stderr for a server-side dry-run apply of `deployment` into `namespace`."""
    document = copy.deepcopy(deployment)
    document["metadata"]["namespace"] = namespace
    result = cluster.kubectl("apply", "--server-side", "--dry-run=server",
                             "--field-manager=pod-security-test", "-f", "-", check=False,
                             input=json.dumps(document))
    assert result.returncode == 0, result.stderr
    assert "dry run" in result.stdout, result.stdout
    return result.stderr


@pytest.mark.parametrize("esc_sample", ESC_SAMPLES)
def test_operand_pod_templates_raise_no_pod_security_warning(
        cluster: Cluster, restricted_namespace: str, esc_sample: str) -> None:
    deployments = rendered_deployments(esc_sample, "esm-labels.yaml")
    assert deployments, f"{esc_sample} renders no Deployment"
    for deployment in deployments:
        stderr = dry_run_warnings(cluster, restricted_namespace, deployment)
        assert "Warning" not in stderr, f"{esc_sample}: {deployment['metadata']['name']}: {stderr}"


def test_every_operand_component_is_covered() -> None:
    names = {d["metadata"]["name"] for sample in ESC_SAMPLES for d in rendered_deployments(sample)}
    assert names == {"external-secrets", "external-secrets-webhook",
                     "external-secrets-cert-controller", "bitwarden-sdk-server"}


@pytest.mark.parametrize("breakage", ["privilege-escalation", "root", "host-network"])
def test_a_template_that_breaks_the_profile_does_raise_a_warning(
        cluster: Cluster, restricted_namespace: str, breakage: str) -> None:
    deployment = rendered_deployments("esc-default.yaml")[0]
    pod = deployment["spec"]["template"]["spec"]
    container = pod["containers"][0]
    if breakage == "privilege-escalation":
        container.setdefault("securityContext", {})["allowPrivilegeEscalation"] = True
    elif breakage == "root":
        container.setdefault("securityContext", {})["runAsNonRoot"] = False
        pod.setdefault("securityContext", {})["runAsNonRoot"] = False
    else:
        pod["hostNetwork"] = True
    stderr = dry_run_warnings(cluster, restricted_namespace, deployment)
    assert 'Warning: would violate PodSecurity "restricted:' in stderr, stderr
