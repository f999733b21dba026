"""The operand's and the operator's PrometheusRules, checked by the real Prometheus tools:
`promtool check rules` on the rendered objects and `promtool test rules` on every alert,
firing and not firing, with series labelled as a plain Prometheus Operator labels them
(tests/promtool/alerts_test.yaml), as OpenShift's user-workload monitoring does
(alerts_test_uwm.yaml, with the namespace matcher that stack adds to every selector), and as
it does with the operand namespace exempt from that matcher (alerts_test_uwm_exempt.yaml:
`namespacesWithoutLabelEnforcement`). Under that matcher a rule sees only the series scraped
in its own namespace, so each rule reads only those (checked below): the webhook
certificate's expiry comes from the operator's own series, not cert-manager's. promtool is
built once from the pinned Prometheus module (hack/build-tool.sh promtool,
manager/versions.py PROMETHEUS_VERSION).

The console dashboard's queries too: each one a recording rule, checked by `promtool check
rules` and evaluated by `promtool test rules` against recorded series under both labellings
(tests/promtool/dashboard_test.yaml), so that a wrong metric or label name fails."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster.cluster import ensure_tool
from manager.api import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import OPERAND_MONITORING, OperatorEnvironment, effective_config
from manager.names import LEASE_NAME
from manager.olm import identity
from manager.render import dashboard, render_operand
from manager.render.alerts import operator_alerts
from tests.unit.render.test_dashboard import rendered as rendered_dashboard

TESTS = Path(__file__).resolve().parents[2] / "promtool" / "alerts_test.yaml"
TESTS_UWM = TESTS.with_name("alerts_test_uwm.yaml")
TESTS_UWM_EXEMPT = TESTS.with_name("alerts_test_uwm_exempt.yaml")
OPERAND_NAMESPACE = "external-secrets"
# A metric name and the opening brace of its selector (every selector of our rules has one).
_SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")
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


def operator_groups() -> list[dict[str, Any]]:
    return [{"name": "external-secrets-operator", "rules": operator_alerts(identity.NAMESPACE)}]


def enforce_namespace(groups: list[dict[str, Any]], namespace: str) -> list[dict[str, Any]]:
    """`groups` as user-workload monitoring evaluates them: `namespace="<namespace>"` added
    to every selector (as cluster-monitoring-operator's enforcedNamespaceLabel does)."""
    return [{**group, "rules": [
        {**rule, "expr": _SELECTOR.sub(rf'\1{{namespace="{namespace}", ', rule["expr"])}
        for rule in group["rules"]]} for group in groups]


def write_rules(directory: Path, *, operand_enforced: bool,
                operator_enforced: bool) -> list[dict[str, Any]]:
    """rules.yaml and operator-rules.yaml in `directory`, each with the namespace matcher of
    user-workload monitoring or without; every rule written."""
    operand = rendered_rule(CERT_MANAGER_SPEC)["spec"]["groups"]
    operator = operator_groups()
    if operand_enforced:
        operand = enforce_namespace(operand, OPERAND_NAMESPACE)
    if operator_enforced:
        operator = enforce_namespace(operator, identity.NAMESPACE)
    (directory / "rules.yaml").write_text(yaml.safe_dump({"groups": operand}))
    (directory / "operator-rules.yaml").write_text(yaml.safe_dump({"groups": operator}))
    return [rule for group in operand + operator for rule in group["rules"]]


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
    operand = rendered_rule(CERT_MANAGER_SPEC)["spec"]["groups"][0]["rules"]
    for alert in operand + operator_groups()[0]["rules"]:
        assert alert["labels"]["severity"] in ("critical", "warning"), alert["alert"]
        assert alert["annotations"]["summary"], alert["alert"]
        assert "Run: " in alert["annotations"]["description"], alert["alert"]
        assert "kubectl " in alert["annotations"]["description"], alert["alert"]


def test_operator_rules_check(promtool: Path, tmp_path: Path) -> None:
    (tmp_path / "operator-rules.yaml").write_text(yaml.safe_dump({"groups": operator_groups()}))
    output = run(promtool, "check", "rules", "operator-rules.yaml", cwd=tmp_path)
    assert f"SUCCESS: {len(operator_groups()[0]['rules'])} rules found" in output


# What each rule may read: the operand's, the operand's metrics (its ServiceMonitor, in the
# operand namespace) and kube-state-metrics' (labelled with the Deployment's namespace); the
# operator's, the operator's own series. Never cert-manager's: scraped in cert-manager's
# namespace, no rule of ours sees them under user-workload monitoring.
OPERAND_SERIES = {"kube_deployment_status_condition", "externalsecret_status_condition"}


def test_each_rule_reads_series_of_its_own_namespace() -> None:
    for rule in rendered_rule(CERT_MANAGER_SPEC)["spec"]["groups"][0]["rules"]:
        assert set(_SELECTOR.findall(rule["expr"])) <= OPERAND_SERIES, rule["alert"]
    for rule in operator_groups()[0]["rules"]:
        assert all(name.startswith("eso_operator_")
                   for name in _SELECTOR.findall(rule["expr"])), rule["alert"]


def test_the_certificate_alert_is_the_operators_whether_cert_manager_is_on_or_not() -> None:
    """The operator's rule does not know the operand's configuration: the alert is always
    there, quiet while no series exists (cert-manager off)."""
    operand = {rule["alert"] for esc in ({}, CERT_MANAGER_SPEC)
               for rule in rendered_rule(esc)["spec"]["groups"][0]["rules"]}
    assert "ExternalSecretsWebhookCertificateExpiring" not in operand
    assert "ExternalSecretsWebhookCertificateExpiring" in {
        rule["alert"] for rule in operator_groups()[0]["rules"]}


def test_the_operator_alerts_name_the_lease_the_operator_takes() -> None:
    down = next(rule for group in operator_groups() for rule in group["rules"]
                if rule.get("alert") == "ExternalSecretsOperatorDown")
    assert f"get lease {LEASE_NAME} " in down["annotations"]["description"]


def test_the_enforced_namespace_reaches_every_selector() -> None:
    """The emulation of user-workload monitoring itself: no selector escapes it."""
    groups = rendered_rule(CERT_MANAGER_SPEC)["spec"]["groups"] + operator_groups()
    for rule in (rule for group in enforce_namespace(groups, "x") for rule in group["rules"]):
        selectors = _SELECTOR.findall(rule["expr"])
        assert selectors, rule["alert"]
        assert rule["expr"].count('{namespace="x", ') == len(selectors), rule["expr"]


@pytest.mark.parametrize(("tests", "operand_enforced", "operator_enforced"), [
    (TESTS, False, False), (TESTS_UWM, True, True), (TESTS_UWM_EXEMPT, False, True)],
    ids=["prometheus-operator", "user-workload-monitoring", "user-workload-monitoring-exempt"])
def test_rules_unit_tests_cover_every_alert(promtool: Path, tmp_path: Path, tests: Path,
                                            operand_enforced: bool,
                                            operator_enforced: bool) -> None:
    rules = write_rules(tmp_path, operand_enforced=operand_enforced,
                        operator_enforced=operator_enforced)
    shutil.copy(tests, tmp_path / tests.name)
    output = run(promtool, "test", "rules", tests.name, cwd=tmp_path)
    assert "SUCCESS" in output

    alerts = {rule["alert"] for rule in rules}
    firing: set[str] = set()
    quiet: set[str] = set()
    for group in yaml.safe_load(tests.read_text())["tests"]:
        for case in group["alert_rule_test"]:
            (firing if case["exp_alerts"] else quiet).add(case["alertname"])
    assert firing == alerts, "an alert without a firing case"
    assert quiet == alerts, "an alert without a not-firing case"


# --- the console dashboard's queries (manager/render/dashboard.py) --------------------------

DASHBOARD_TESTS = TESTS.with_name("dashboard_test.yaml")


def dashboard_rules(board: dict[str, Any]) -> dict[str, Any]:
    return {"groups": [{"name": "external-secrets-dashboard",
                        "rules": dashboard.recording_rules(board)}]}


def write_dashboard(directory: Path, board: dict[str, Any]) -> list[str]:
    """dashboard-rules.yaml (each query a recording rule) and the tests beside it; the
    records written."""
    rules = dashboard_rules(board)
    (directory / "dashboard-rules.yaml").write_text(yaml.safe_dump(rules))
    shutil.copy(DASHBOARD_TESTS, directory / DASHBOARD_TESTS.name)
    return [rule["record"] for rule in rules["groups"][0]["rules"]]


def test_every_dashboard_query_parses(promtool: Path, tmp_path: Path) -> None:
    _, board = rendered_dashboard()
    records = write_dashboard(tmp_path, board)
    output = run(promtool, "check", "rules", "dashboard-rules.yaml", cwd=tmp_path)
    assert f"SUCCESS: {len(records)} rules found" in output
    assert len(records) == sum(len(panel["targets"]) for panel in dashboard.panels(board))


def test_every_dashboard_query_computes_its_figure_under_both_labellings(
        promtool: Path, tmp_path: Path) -> None:
    _, board = rendered_dashboard()
    records = write_dashboard(tmp_path, board)
    output = run(promtool, "test", "rules", DASHBOARD_TESTS.name, cwd=tmp_path)
    assert "SUCCESS" in output
    groups = yaml.safe_load(DASHBOARD_TESTS.read_text())["tests"]
    # The first two groups are the two labellings: each evaluates every query.
    for group in groups[:2]:
        assert {case["expr"] for case in group["promql_expr_test"]} == set(records)
        assert all(case["exp_samples"] for case in group["promql_expr_test"]), \
            "a figure without a sample proves nothing about the name it reads"


@pytest.mark.parametrize(("wrong", "right"), [
    ("externalsecret_sync_calls_error", "externalsecret_sync_calls_error_total"),
    ("controller_runtime_webhook_latency_seconds_sum", "controller_runtime_webhook_latency_sum"),
    ('certificate_namespace="external-secrets"', 'namespace="external-secrets"'),
], ids=["metric-name", "histogram-name", "label"])
def test_a_wrong_name_fails_the_dashboard_tests(promtool: Path, tmp_path: Path, wrong: str,
                                                right: str) -> None:
    """The tests can fail: one name changed in the queries, and promtool says which figure
    went wrong."""
    _, board = rendered_dashboard()
    broken = json.loads(json.dumps(board).replace(wrong.replace('"', '\\"'),
                                                  right.replace('"', '\\"')))
    assert broken != board
    write_dashboard(tmp_path, broken)
    result = subprocess.run([str(promtool), "test", "rules", DASHBOARD_TESTS.name],
                            cwd=tmp_path, capture_output=True, text=True, check=False,
                            timeout=120)
    assert result.returncode != 0, result.stdout
    assert "dashboard:" in result.stdout + result.stderr
