"""The operand's PrometheusRule, checked by the real Prometheus tools: `promtool check rules`
on the rendered object and `promtool test rules` (tests/promtool/alerts_test.yaml) on every
alert, firing and not firing. promtool is built once from the pinned Prometheus module
(hack/build-tool.sh promtool, manager/versions.py PROMETHEUS_VERSION)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.cluster import ensure_tool
from manager.api import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import OPERAND_MONITORING, OperatorEnvironment, effective_config
from manager.render import render_operand

TESTS = Path(__file__).resolve().parents[1] / "promtool" / "alerts_test.yaml"
CERT_MANAGER_SPEC = {"appConfig": {"certManagerConfig": {
    "enabled": "true", "issuerRef": {"name": "ca", "kind": "ClusterIssuer"}}}}


def rendered_rule(esc: dict[str, Any]) -> dict[str, Any]:
    """The PrometheusRule of `esc` with OperandMonitoring on and its API served."""
    config = effective_config(
        ExternalSecretsConfigSpec.model_validate(esc),
        ExternalSecretsManagerSpec.model_validate(
            {"features": [{"name": OPERAND_MONITORING, "enabled": "true"}]}),
        OperatorEnvironment.from_environ({}, None))
    config = config.model_copy(update={"monitoring": config.monitoring.model_copy(
        update={"served": True})})
    return next(obj for obj in render_operand(config).objects()
                if obj["kind"] == "PrometheusRule")


@pytest.fixture(scope="module")
def promtool() -> Path:
    return ensure_tool("promtool") / "promtool"


def run(promtool: Path, *args: str, cwd: Path) -> str:
    result = subprocess.run([str(promtool), *args], cwd=cwd, capture_output=True, text=True,
                            check=False, timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    return output


@pytest.mark.parametrize("esc", [{}, CERT_MANAGER_SPEC], ids=["cert-controller", "cert-manager"])
def test_check_rules(promtool: Path, tmp_path: Path, esc: dict[str, Any]) -> None:
    rule = rendered_rule(esc)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    output = run(promtool, "check", "rules", "rules.yaml", cwd=tmp_path)
    count = len(rule["spec"]["groups"][0]["rules"])
    assert f"SUCCESS: {count} rules found" in output


def test_every_alert_has_a_summary_a_runnable_description_and_a_severity() -> None:
    for alert in rendered_rule(CERT_MANAGER_SPEC)["spec"]["groups"][0]["rules"]:
        assert alert["labels"]["severity"] in ("critical", "warning"), alert["alert"]
        assert alert["annotations"]["summary"], alert["alert"]
        assert "Run: " in alert["annotations"]["description"], alert["alert"]
        assert "kubectl " in alert["annotations"]["description"], alert["alert"]


def test_rules_unit_tests_cover_every_alert(promtool: Path, tmp_path: Path) -> None:
    rule = rendered_rule(CERT_MANAGER_SPEC)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule["spec"]))
    shutil.copy(TESTS, tmp_path / "alerts_test.yaml")
    output = run(promtool, "test", "rules", "alerts_test.yaml", cwd=tmp_path)
    assert "SUCCESS" in output

    alerts = {alert["alert"] for alert in rule["spec"]["groups"][0]["rules"]}
    firing: set[str] = set()
    quiet: set[str] = set()
    for group in yaml.safe_load(TESTS.read_text())["tests"]:
        for case in group["alert_rule_test"]:
            (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    assert firing == alerts, "an alert without a firing case"
    assert quiet == alerts, "an alert without a not-firing case"
