"""The control plane under test is a real kube-apiserver: CEL, server-side apply, RBAC, and
the loopback rule."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio

from manager.client.kube import CRD_COLLECTION, ApiError, Kube
from tests.conftest import Cluster

GROUP = "widgets.test.eso.local"
PLURAL = "widgets"

WIDGET_CRD: dict[str, Any] = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": f"{PLURAL}.{GROUP}"},
    "spec": {
        "group": GROUP,
        "scope": "Namespaced",
        "names": {"plural": PLURAL, "singular": "widget", "kind": "Widget"},
        "versions": [{
            "name": "v1",
            "served": True,
            "storage": True,
            "schema": {"openAPIV3Schema": {
                "type": "object",
                "properties": {"spec": {
                    "type": "object",
                    "properties": {"size": {"type": "integer"}, "colour": {"type": "string"}},
                    "x-kubernetes-validations": [
                        {"rule": "self.size <= 10", "message": "size must be at most 10"},
                    ],
                }},
            }},
        }],
    },
}


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest_asyncio.fixture(loop_scope="session")
async def namespace(kube: Kube) -> AsyncIterator[str]:
    name = unique("cp")
    await kube.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": {
        "eso-test": name}}}, field_manager="eso-test")
    yield name


@pytest_asyncio.fixture(loop_scope="session")
async def widget_crd(kube: Kube) -> str:
    try:
        await kube.create(CRD_COLLECTION, WIDGET_CRD, field_manager="eso-test")
    except ApiError as error:
        if error.status != 409:
            raise
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        crd = await kube.request("GET", f"{CRD_COLLECTION}/{PLURAL}.{GROUP}")
        if any(c["type"] == "Established" and c["status"] == "True"
               for c in (crd.get("status") or {}).get("conditions") or []):
            return GROUP
        await asyncio.sleep(0.2)
    raise AssertionError("widget CRD never became Established")


def widget(name: str, size: int) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": "Widget", "metadata": {"name": name},
            "spec": {"size": size, "colour": "blue"}}


async def test_cel_rule_rejects_with_422_and_its_message(
    kube: Kube, namespace: str, widget_crd: str,
) -> None:
    collection = f"/apis/{widget_crd}/v1/namespaces/{namespace}/{PLURAL}"
    with pytest.raises(ApiError) as rejected:
        await kube.create(collection, widget("too-big", 11), field_manager="eso-test")
    assert rejected.value.status == 422
    causes = rejected.value.details["causes"]
    assert [(c["field"], c["message"]) for c in causes] == [
        ("spec", 'Invalid value: "object": size must be at most 10')]

    created = await kube.create(collection, widget("fits", 10), field_manager="eso-test")
    assert created["spec"]["size"] == 10


async def test_server_side_apply_records_the_field_manager(
    cluster: Cluster, namespace: str, widget_crd: str,
) -> None:
    manifest = json.dumps(widget("applied", 3))
    cluster.kubectl("apply", "--server-side", "--field-manager=eso-test", "-n", namespace,
                    "-f", "-", input=manifest)
    live = json.loads(cluster.kubectl("get", f"{PLURAL}.{widget_crd}", "applied", "-n",
                                      namespace, "-o", "json", "--show-managed-fields").stdout)
    managers = {(m["manager"], m["operation"]) for m in live["metadata"]["managedFields"]}
    assert ("eso-test", "Apply") in managers
    owned = next(m["fieldsV1"] for m in live["metadata"]["managedFields"]
                 if m["manager"] == "eso-test")
    assert "f:size" in owned["f:spec"]


async def test_rbac_denies_a_service_account_without_permissions(
    kube: Kube, cluster: Cluster, namespace: str,
) -> None:
    accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
    await kube.create(accounts, {"metadata": {"name": "nobody"}}, field_manager="eso-test")
    token = (await kube.request("POST", f"{accounts}/nobody/token", body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
        "spec": {"expirationSeconds": 600}}))["status"]["token"]

    result = cluster.kubectl("get", "secrets", "-n", namespace, f"--token={token}",
                             "--user=", check=False)
    assert result.returncode != 0
    assert "Forbidden" in result.stderr
    assert f"system:serviceaccount:{namespace}:nobody" in result.stderr
    # The same request as the admin succeeds: the 403 is RBAC, not a broken request.
    assert cluster.kubectl("get", "secrets", "-n", namespace).returncode == 0


async def test_webhook_calls_fail_fast_and_never_leave_loopback(
    kube: Kube, namespace: str,
) -> None:
    await kube.create(f"/api/v1/namespaces/{namespace}/services", {
        "metadata": {"name": "nowhere"},
        "spec": {"ports": [{"port": 443, "targetPort": 10250}], "selector": {"app": "nowhere"}},
    }, field_manager="eso-test")
    hook_name = unique("loopback-probe")
    webhooks = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
    await kube.create(webhooks, {
        "metadata": {"name": hook_name},
        "webhooks": [{
            "name": "probe.eso.test",
            "clientConfig": {"service": {"namespace": namespace, "name": "nowhere",
                                         "path": "/validate"}},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["configmaps"]}],
            "namespaceSelector": {"matchLabels": {"eso-test": namespace}},
            "failurePolicy": "Fail",
            "sideEffects": "None",
            "admissionReviewVersions": ["v1"],
            "timeoutSeconds": 10,
        }],
    }, field_manager="eso-test")
    try:
        # The webhook configuration takes effect asynchronously: retry until it bites.
        started = time.monotonic()
        error = await _first_webhook_rejection(kube, namespace)
        assert time.monotonic() - started < 10
        assert 'failed calling webhook "probe.eso.test"' in error
        assert "no endpoints available" in error or "unreachable" in error
    finally:
        await kube.delete(f"{webhooks}/{hook_name}")


async def _first_webhook_rejection(kube: Kube, namespace: str) -> str:
    for attempt in range(50):
        try:
            await kube.create(f"/api/v1/namespaces/{namespace}/configmaps",
                              {"metadata": {"name": f"probe-{attempt}"}}, field_manager="eso-test")
        except ApiError as error:
            return error.message
        await asyncio.sleep(0.1)
    raise AssertionError("the webhook never intercepted a request")


def test_control_plane_and_tests_share_a_loopback_only_namespace(cluster: Cluster) -> None:
    if cluster.local is None:
        pytest.skip("the loopback rule concerns the local control plane, not USE_EXISTING_CLUSTER")
    links = subprocess.run(["ip", "-o", "link"], capture_output=True, text=True,
                           check=True).stdout.splitlines()
    assert len(links) == 1
    assert links[0].split(":")[1].strip() == "lo"
    own = os.readlink("/proc/self/ns/net")
    for process, pid in cluster.local.pids.items():
        assert os.readlink(f"/proc/{pid}/ns/net") == own, process
