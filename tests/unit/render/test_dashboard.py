"""The operand's dashboard in OpenShift's console (manager/render/dashboard.py): when it is
rendered, that it is what the console reads, and that its queries read series the operand
and the operator really export (the names checked against both release trees of
external-secrets and the controller-runtime each pins). What the queries compute is checked
by promtool (test_promtool.py, tests/promtool/dashboard_test.yaml)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from manager import metrics
from manager.api import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.client.watch_spec import WatchSpec
from manager.config import (
    OPERAND_MONITORING,
    EffectiveConfig,
    OperatorEnvironment,
    effective_config,
)
from manager.names import CONSOLE_DASHBOARDS_NAMESPACE, DASHBOARD_CONFIGMAP
from manager.render import dashboard, render_operand
from manager.render.alerts import CONTROLLER_METRICS_JOB
from manager.steps.preflight import dependency_watches
from manager.steps.removed_providers import CHECKED_OPERAND_VERSION, NEXT_OPERAND_VERSION
from tests.upstream_tree import UpstreamTree

# A metric name and the opening brace of its selector (every query's selectors have one).
SELECTOR = re.compile(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\{")


def config(esc: dict[str, Any], enabled: str | None, *, served: bool) -> EffectiveConfig:
    """The effective config of `esc`, with OperandMonitoring as `enabled` says and its API
    served or not (a cluster fact)."""
    features = [] if enabled is None else [{"name": OPERAND_MONITORING, "enabled": enabled}]
    result = effective_config(ExternalSecretsConfigSpec.model_validate(esc),
                              ExternalSecretsManagerSpec.model_validate({"features": features}),
                              OperatorEnvironment.from_environ({}, None))
    return result.model_copy(update={"monitoring": result.monitoring.model_copy(
        update={"served": served})})


def with_console(cfg: EffectiveConfig, present: bool = True) -> EffectiveConfig:
    return cfg.model_copy(update={"monitoring": cfg.monitoring.model_copy(
        update={"console_dashboards": present})})


def dashboards(cfg: EffectiveConfig) -> list[dict[str, Any]]:
    return [obj for obj in render_operand(cfg).objects()
            if obj["kind"] == "ConfigMap" and obj["metadata"]["name"] == DASHBOARD_CONFIGMAP]


def rendered(namespace: str = "external-secrets") -> tuple[dict[str, Any], dict[str, Any]]:
    """The ConfigMap and its dashboard, for an operand in `namespace`."""
    [configmap] = dashboards(with_console(config(
        {"controllerConfig": {"namespace": namespace}}, "true", served=True)))
    [text] = configmap["data"].values()
    return configmap, json.loads(text)


def queries(board: dict[str, Any]) -> list[str]:
    return [target["expr"] for panel in dashboard.panels(board) for target in panel["targets"]]


# --- when ---------------------------------------------------------------------------------


@pytest.mark.parametrize(("enabled", "served", "console"), [
    (None, True, True), ("false", True, True), ("true", False, True), ("true", True, False)],
    ids=["feature-absent", "feature-off", "monitoring-api-not-served", "not-openshift"])
def test_absent_without_the_feature_its_api_or_the_consoles_namespace(
        enabled: str | None, served: bool, console: bool) -> None:
    assert dashboards(with_console(config({}, enabled, served=served), console)) == []


def test_present_with_the_feature_and_the_consoles_namespace() -> None:
    configmap, _ = rendered()
    metadata = configmap["metadata"]
    assert (metadata["namespace"], metadata["name"]) == (CONSOLE_DASHBOARDS_NAMESPACE,
                                                         "external-secrets-operator-dashboard")
    labels = metadata["labels"]
    assert labels["console.openshift.io/dashboard"] == "true"
    # Ours, so that pruning and uninstalling find it, and only ours delete it.
    assert labels["app.kubernetes.io/managed-by"] == "external-secrets-operator"
    assert labels["app.kubernetes.io/part-of"] == "external-secrets-operator"


def test_the_fact_is_not_enough_without_the_feature() -> None:
    """The namespace alone (OpenShift, feature off) renders nothing."""
    assert dashboards(with_console(config({}, "false", served=True))) == []


# --- what the console reads ---------------------------------------------------------------


def test_one_key_of_json_with_the_four_subjects() -> None:
    configmap, board = rendered()
    assert list(configmap["data"]) == ["external-secrets.json"]  # the console reads the first
    assert board["title"] == "External Secrets / Operand"
    titles = [panel["title"] for panel in dashboard.panels(board)]
    for subject in ("Sync rate", "Sync errors by namespace", "Webhook latency",
                    "Webhook certificate expires in"):
        assert subject in titles, titles


def test_only_what_the_console_draws() -> None:
    """Rows of panels of the types the console draws, each with a query and at most 12
    columns a row; no datasource (the cluster's Thanos Querier); unique panel ids."""
    _, board = rendered()
    assert board["rows"], "no rows"
    assert "panels" not in board  # the row layout only, so no panel is cut into a wrong row
    ids = [panel["id"] for panel in dashboard.panels(board)]
    assert len(ids) == len(set(ids))
    for row in board["rows"]:
        assert row["showTitle"]
        assert row["title"]
        assert sum(panel["span"] for panel in row["panels"]) <= 12, row["title"]
        for panel in row["panels"]:
            assert panel["type"] in dashboard.SUPPORTED_PANELS, panel["type"]
            assert panel["targets"]
            assert all(target["expr"] for target in panel["targets"])
            if panel["type"] == "graph":
                assert panel["yaxes"][0]["format"] in ("short", "s", "ms", "percentunit")
    assert "datasource" not in json.dumps(board)


def test_the_queries_are_for_the_operand_namespace() -> None:
    """Where an operand namespace is in a query, it is this operand's."""
    _, board = rendered("eso-team")
    for expr in queries(board):
        named = set(re.findall(r'(?<!_)namespace="([^"]*)"', expr))
        assert named <= {"eso-team"}, expr
    webhook = [expr for expr in queries(board) if "controller_runtime_webhook" in expr]
    assert webhook
    assert all('namespace="eso-team"' in expr for expr in webhook)


def test_the_jobs_are_the_metrics_services_the_service_monitors_select() -> None:
    """Prometheus Operator's job label is the Service's name: the controller's and the
    webhook's metrics Services, each selected by a rendered ServiceMonitor."""
    objects = render_operand(with_console(config({}, "true", served=True))).objects()
    services = {obj["metadata"]["name"]: obj for obj in objects if obj["kind"] == "Service"}
    selected = set()
    for monitor in (obj for obj in objects if obj["kind"] == "ServiceMonitor"):
        match = monitor["spec"]["selector"]["matchLabels"].items()
        selected |= {name for name, service in services.items()
                     if match <= service["metadata"]["labels"].items()}
    assert {CONTROLLER_METRICS_JOB, dashboard.WEBHOOK_METRICS_JOB} <= selected


# --- the names are the releases' ------------------------------------------------------------


def read_names(board: dict[str, Any]) -> set[str]:
    """The metric names the queries select (a histogram's `_sum` and `_count` by their
    histogram's name)."""
    names = {name for expr in queries(board) for name in SELECTOR.findall(expr)}
    return {re.sub(r"_(sum|count|bucket)$", "", name)
            if name.startswith("controller_runtime_webhook_latency") else name
            for name in names}


class Tree(UpstreamTree):
    """One external-secrets release tree, with what the dashboard's queries name."""

    def externalsecret_metrics(self) -> set[str]:
        """`<subsystem>_<name>` of every metric the ExternalSecret controller registers."""
        source = self.read("pkg/controllers/externalsecret/esmetrics/esmetrics.go")
        [subsystem] = re.findall(r'ExternalSecretSubsystem = "(\w+)"', source)
        return {f"{subsystem}_{name}" for name in re.findall(r'\w+Key = "(\w+)"', source)}

    def controller_runtime(self) -> str:
        [version] = re.findall(r"sigs\.k8s\.io/controller-runtime (v\S+)", self.read("go.mod"))
        return version


def module_cache() -> Path:
    if os.environ.get("GOMODCACHE"):
        return Path(os.environ["GOMODCACHE"])
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain to find the module cache (GOMODCACHE)")
    return Path(subprocess.run([go, "env", "GOMODCACHE"], capture_output=True, text=True,
                               check=True).stdout.strip())


def webhook_metrics_source(version: str) -> str:
    """controller-runtime's webhook metrics at `version`, from the Go module cache (the
    operand's builds put it there: hack/build-tool.sh)."""
    path = (module_cache() / f"sigs.k8s.io/controller-runtime@{version}"
            / "pkg/webhook/internal/metrics/metrics.go")
    if not path.exists():
        pytest.skip(f"{path} is not in the module cache")
    return path.read_text()


@pytest.mark.parametrize("version", [CHECKED_OPERAND_VERSION, NEXT_OPERAND_VERSION])
def test_every_series_read_is_exported_by_the_release(version: str) -> None:
    tree = Tree(version)
    webhook = webhook_metrics_source(tree.controller_runtime())
    exported = (tree.externalsecret_metrics()
                | set(re.findall(r'Name:\s+"(controller_runtime_webhook_\w+)"', webhook))
                | {family.name for collector in (metrics.WEBHOOK_CERTIFICATE_EXPIRY,
                                                 metrics.LEADER)
                   for family in collector.describe()})
    _, board = rendered()
    read = read_names(board)
    assert read <= exported, read - exported
    # Each release's own names, not a list of this test's (sync_calls_error has no _total).
    assert {"externalsecret_sync_calls_total", "externalsecret_sync_calls_error",
            "externalsecret_status_condition"} <= tree.externalsecret_metrics()


@pytest.mark.parametrize(("version", "classic"), [
    (CHECKED_OPERAND_VERSION, False), (NEXT_OPERAND_VERSION, True)])
def test_the_webhook_latency_is_shown_as_a_mean_whatever_its_buckets(version: str,
                                                                     classic: bool) -> None:
    """The controller-runtime of v1.3.2 declares the latency a native histogram without
    classic buckets (a Prometheus that keeps classic histograms only has no bucket to take a
    quantile of); v2.9.0's has them again, a factor of 10 apart. `_sum` over `_count` is
    right with both: the panel shows the mean."""
    source = webhook_metrics_source(Tree(version).controller_runtime())
    opts = source[source.index("RequestLatency = "):source.index("RequestTotal = ")]
    assert "NativeHistogramBucketFactor" in opts
    assert ("Buckets:" in opts) == classic
    if classic:
        assert "ExponentialBuckets(10e-9, 10, 12)" in opts
    _, board = rendered()
    latency = " ".join(expr for expr in queries(board) if "webhook_latency" in expr)
    assert "_sum" in latency
    assert "_count" in latency
    assert "histogram_quantile" not in latency


def test_the_consoles_namespace_is_watched_while_the_feature_is_on() -> None:
    """Its arrival must start a pass (steps/preflight.py): nothing else would before the
    resync."""
    watch = WatchSpec("v1", "Namespace",
                      field_selector=f"metadata.name={CONSOLE_DASHBOARDS_NAMESPACE}")
    assert watch in dependency_watches(config({}, "true", served=False))
    assert watch not in dependency_watches(config({}, "false", served=True))
