"""Install from `spec: {}`: every expected object, the standard labels, honest status, Events,
and nothing written to the ExternalSecretsConfig but its status."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from manager.api.models import ExternalSecretsConfigSpec
from manager.client.kube import Kube
from manager.config import OperatorEnvironment, effective_config
from manager.names import FIELD_MANAGER
from manager.render import render_operand
from manager.reporting.status import CONTROLLER_NAMES
from manager.runtime.operator import load_crds
from tests.integration.conftest import (
    ESM_PATH,
    SCENARIO_NAMESPACES,
    EscHandle,
    OperatorThread,
    StartOperator,
    UserObjects,
    esc_events,
    esm_entries,
    eventually,
    managed_objects,
    wait_condition,
)


def expected_objects(spec: dict[str, Any]) -> set[tuple[str, str, str]]:
    """What the operator applies for `spec`. The Namespace only where the operator creates
    it: the scenario namespaces exist beforehand (the `user_objects` fixture), and a
    namespace the operator did not create is used as it is, without its labels."""
    config = effective_config(ExternalSecretsConfigSpec.model_validate(spec), None,
                              OperatorEnvironment.from_environ(os.environ))
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"])
            for o in render_operand(config).objects()
            if not (o["kind"] == "Namespace"
                    and o["metadata"]["name"] in SCENARIO_NAMESPACES.values())}


def assert_standard_labels(obj: dict[str, Any], version: str) -> None:
    labels = obj["metadata"].get("labels") or {}
    where = f"{obj['kind']} {obj['metadata']['name']}"
    assert labels.get("app") == "external-secrets", where
    assert labels.get("app.kubernetes.io/name"), where
    assert labels.get("app.kubernetes.io/instance") == "external-secrets", where
    assert labels.get("app.kubernetes.io/managed-by") == "external-secrets-operator", where
    assert labels.get("app.kubernetes.io/part-of") == "external-secrets-operator", where
    if obj["kind"] != "Deployment" or obj["metadata"]["name"] != "bitwarden-sdk-server":
        assert labels.get("app.kubernetes.io/version") == version, where


async def install(start_operator: StartOperator, esc: EscHandle, spec: dict[str, Any],
                  **options: Any) -> OperatorThread:
    operator = await start_operator(**options)
    await esc.create(spec)
    await wait_condition(esc, "Ready", "True")
    return operator


async def related_object_path(kube: Kube, entry: dict[str, str]) -> str:
    """The API path of a status.relatedObjects entry, at its group's preferred version as
    the server's discovery tells it (as `oc adm inspect` resolves it)."""
    group = entry["group"]
    if group:
        discovered = await kube.request("GET", f"/apis/{group}")
        base = f"/apis/{discovered['preferredVersion']['groupVersion']}"
    else:
        base = "/api/v1"
    where = f"/namespaces/{entry['namespace']}" if entry.get("namespace") else ""
    return f"{base}{where}/{entry['resource']}/{entry['name']}"


async def assert_related_objects_exist(kube: Kube, related: list[dict[str, str]]) -> None:
    """Every entry names one object that the API server has (GET), in a sorted list."""
    assert related
    keys = [(e["group"], e["resource"], e.get("namespace", ""), e["name"]) for e in related]
    assert keys == sorted(keys)
    for entry in related:
        found = await kube.get(await related_object_path(kube, entry))
        assert found is not None, entry
        assert found["metadata"]["name"] == entry["name"]
        assert found["metadata"].get("namespace", "") == entry.get("namespace", ""), entry


async def test_install_from_empty_spec(kube: Kube, esc: EscHandle, start_operator: StartOperator,
                                       user_objects: UserObjects, crd_dir: Path) -> None:
    namespace = SCENARIO_NAMESPACES["install"]
    operator = await install(start_operator, esc, {})

    expected = expected_objects({})
    assert {k for k in expected if k[0] == "Deployment"} == {
        ("Deployment", namespace, "external-secrets"),
        ("Deployment", namespace, "external-secrets-webhook"),
        ("Deployment", namespace, "external-secrets-cert-controller"),
    }
    found = await managed_objects(kube, namespace)
    assert expected <= set(found), sorted(expected - set(found))
    version = OperatorEnvironment.from_environ(os.environ).operand_version
    for key in expected:
        assert_standard_labels(found[key], version)
        assert any(entry.get("manager") == FIELD_MANAGER and entry.get("operation") == "Apply"
                   for entry in found[key]["metadata"]["managedFields"]), key

    resource = await esc.get()
    generation = resource["metadata"]["generation"]
    conditions = {c["type"]: c for c in resource["status"]["conditions"]}
    assert set(conditions) == {"Ready", "Degraded", "Progressing", "Upgradeable"}
    assert conditions["Degraded"]["status"] == "False"
    # Without OLM too (no OPERATOR_CONDITION_NAME here), the upgrade gate's decision.
    assert (conditions["Upgradeable"]["status"], conditions["Upgradeable"]["reason"]) == (
        "True", "AsExpected")
    assert conditions["Progressing"]["status"] == "False"
    assert all(c["observedGeneration"] == generation for c in conditions.values())
    assert namespace in conditions["Ready"]["message"]
    assert resource["status"]["externalSecretsImage"] == \
        OperatorEnvironment.from_environ(os.environ).external_secrets_image
    assert "bitwardenSDKServerImage" not in resource["status"]
    # What `oc adm inspect esc/cluster` follows: every entry exists, the operand's objects
    # and every operand CRD the bundle ships (the same release's CRDs as installed here).
    related = resource["status"]["relatedObjects"]
    await assert_related_objects_exist(kube, related)
    listed = {(e["resource"], e.get("namespace", ""), e["name"]) for e in related}
    assert {("deployments", ns, name) for kind, ns, name in expected
            if kind == "Deployment"} <= listed
    assert ("namespaces", "", namespace) in listed
    assert {("validatingwebhookconfigurations", "", name) for kind, _, name in expected
            if kind == "ValidatingWebhookConfiguration"} <= listed
    assert {name for resource_, _, name in listed if resource_ == "customresourcedefinitions"
            } == {crd["metadata"]["name"] for crd in load_crds(crd_dir / "external-secrets")}
    # The operator writes nothing to the ESC but its status: no finalizer, no kopf annotations.
    assert not resource["metadata"].get("finalizers")
    assert not [k for k in resource["metadata"].get("annotations") or {} if "kopf" in k]

    esm = await kube.request("GET", ESM_PATH)
    assert esm["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "external-secrets-operator"
    statuses = esm_entries(esm)
    assert set(statuses) == set(CONTROLLER_NAMES)
    controller = {c["type"]: c for c in statuses["external-secrets-controller"]["conditions"]}
    assert controller["Ready"]["status"] == "True"
    assert statuses["external-secrets-controller"]["observedGeneration"] == generation
    assert esm["status"]["lastTransitionTime"]
    assert not esm["metadata"].get("finalizers")

    # One Event for the whole install (the per-object detail is in the log), no Warning.
    events = await esc_events(kube, resource["metadata"]["uid"])
    assert [(e["type"], e["reason"], e["note"]) for e in events] == [
        ("Normal", "Applied", f"applied {len(expected)} objects ({len(expected)} created): "
                              "installed")]

    await user_objects.assert_untouched(kube)
    assert_nothing_read_back(operator)


def assert_nothing_read_back(operator: OperatorThread) -> None:
    """No pass reads an object it has just applied: the apply's response is the whole object
    (a Secret applied without data, the webhook's before its certificate, holds none)."""
    passes = operator.log.pass_reasons()
    assert passes, "no pass ended"
    for number in passes:
        applied: set[str] = set()
        for method, url in operator.log.requests_of_pass(number):
            path = urlsplit(url).path
            if method == "PATCH":
                applied.add(path)
            assert not (method == "GET" and path in applied), f"pass {number} read back {path}"

async def test_esm_is_created_at_start_up_when_missing(kube: Kube, operator_crds: None,
                                                       start_operator: StartOperator) -> None:
    await kube.delete(ESM_PATH)
    assert await kube.get(ESM_PATH) is None
    await start_operator()

    async def created() -> dict[str, Any]:
        esm = await kube.get(ESM_PATH)
        assert esm is not None
        return esm

    esm = await eventually(created)
    assert esm["spec"] == {}
    labels = esm["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "cluster"
    assert labels["app.kubernetes.io/instance"] == "cluster"
    assert labels["app.kubernetes.io/part-of"] == "external-secrets-operator"
