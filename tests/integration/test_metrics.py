"""The operator's /metrics, scraped as Prometheus does (HTTPS, a ServiceAccount's bearer token
allowed by the shipped reader role) while it installs and repairs the operand, parsed with
prometheus_client's parser: the counters move by what the operator did."""

from __future__ import annotations

import time

from prometheus_client.parser import text_string_to_metric_families

from manager.client.kube import Kube
from tests.e2e.operator_process import free_port
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    eventually,
    wait_condition,
)
from tests.metrics_scrape import get_metrics, service_account_token

NAMESPACE = SCENARIO_NAMESPACES["metrics"]
DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/external-secrets"
Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


async def scrape(port: int, token: str) -> Samples:
    status, text = await get_metrics(port, token)
    assert status == 200, text
    return {(sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text) for sample in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def moved(before: Samples, after: Samples, name: str, **labels: str) -> float:
    return value(after, name, **labels) - value(before, name, **labels)


async def test_counters_follow_install_and_repair(kube: Kube, esc: EscHandle,
                                                  start_operator: StartOperator,
                                                  user_objects: UserObjects) -> None:
    port = free_port()
    token = await service_account_token(kube, NAMESPACE, "metrics-scraper", reader=True)
    operator = await start_operator(metrics_addr=f"127.0.0.1:{port}")  # secure by default
    await operator.wait_idle()
    started = time.time()
    before = await scrape(port, token)

    # Install: three Deployments created, passes counted, conditions and objects gauged.
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    installed = await scrape(port, token)
    assert moved(before, installed, "eso_operator_object_writes_total",
                 action="created", kind="Deployment") == 3
    assert moved(before, installed, "eso_operator_passes_total", result="Ready") >= 1
    assert moved(before, installed, "eso_operator_api_requests_total",
                 verb="apply", resource="deployments") >= 3
    assert value(installed, "eso_operator_managed_objects", kind="Deployment") == 3
    # Reading objects that do not exist yet (before creating them) is not an error.
    assert moved(before, installed, "eso_operator_api_errors_total", status="404") == 0
    assert value(installed, "eso_operator_condition", resource="ExternalSecretsConfig",
                 controller="", type="Ready") == 1
    assert value(installed, "eso_operator_condition", resource="ExternalSecretsConfig",
                 controller="", type="Degraded") == 0
    assert value(installed, "eso_operator_last_successful_pass_timestamp_seconds") >= started
    passes = sum(v for (name, _), v in installed.items()
                 if name == "eso_operator_pass_duration_seconds_count")
    assert passes == sum(v for (name, _), v in installed.items()
                         if name == "eso_operator_passes_total")
    assert value(installed, "process_resident_memory_bytes") > 0

    # Repair: the deleted controller Deployment is created again, once.
    await kube.delete(DEPLOYMENT)

    async def recreated() -> None:
        assert await kube.get(DEPLOYMENT) is not None

    await eventually(recreated, timeout=15)
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    repaired = await scrape(port, token)
    assert moved(installed, repaired, "eso_operator_object_writes_total",
                 action="created", kind="Deployment") == 1
    assert moved(installed, repaired, "eso_operator_object_writes_total",
                 action="created", kind="Service") == 0
    assert moved(installed, repaired, "eso_operator_passes_total", result="Ready") >= 1
    assert moved(installed, repaired, "eso_operator_api_requests_total",
                 verb="apply", resource="deployments") >= 1
    assert value(repaired, "eso_operator_managed_objects", kind="Deployment") == 3
