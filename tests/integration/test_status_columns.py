"""What `kubectl get` shows, and the status behind it: the versions and namespace in effect,
the failed object and request, and the ExternalSecretsManager's count of Ready controllers."""

from __future__ import annotations

import re
from typing import Any

import pytest

from manager.client.kube import ApiError, Kube
from tests.conftest import Cluster
from tests.integration.conftest import (
    CONDITION_MESSAGE_LIMIT,
    ESM_PATH,
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    esm_conditions,
    esm_entries,
    eventually,
    wait_condition,
)


def table(cluster: Cluster, *args: str) -> dict[str, str]:
    """The one row of `kubectl get ...`, column name -> value, cut at the header's columns."""
    header, row = cluster.kubectl("get", *args).stdout.splitlines()[:2]
    starts = [match.start() for match in re.finditer(r"\S+", header)]
    ends = [*starts[1:], None]
    return {header[s:e].strip(): row[s:e].strip() for s, e in zip(starts, ends, strict=True)}


async def test_columns_and_status_say_what_is_in_effect_and_what_failed(
        *, kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    namespace = SCENARIO_NAMESPACES["columns"]
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": namespace}})
    await wait_condition(esc, "Ready", "True", timeout=60)
    status: dict[str, Any] = (await esc.get())["status"]
    assert status["operandNamespace"] == namespace
    assert status["externalSecretsVersion"].startswith("v")
    assert "failure" not in status

    columns = table(cluster, "esc")
    assert list(columns) == ["NAME", "READY", "REASON", "VERSION", "NAMESPACE", "MESSAGE", "AGE"]
    assert (columns["READY"], columns["REASON"], columns["VERSION"], columns["NAMESPACE"]) == (
        "True", "Reconciled", status["externalSecretsVersion"], namespace)
    wide = table(cluster, "esc", "-o", "wide")
    assert list(wide)[-3:] == ["AGE", "FAILURE", "IMAGE"]
    assert wide["IMAGE"] == status["externalSecretsImage"]
    assert wide["FAILURE"] == ""

    esm_columns = table(cluster, "esm")
    assert list(esm_columns) == ["NAME", "READY", "AGE"]
    assert esm_columns["READY"] == "3/3"
    for entry in esm_entries(await kube.request("GET", ESM_PATH)).values():
        for condition in entry["conditions"]:
            assert condition["reason"], entry
            assert condition["lastTransitionTime"], entry

    # A request that fails (a fault the real API server cannot produce on demand, injected
    # into the operator's connection): the status names the object, the request and the
    # answer; the wide view shows the object.
    webhook = f"/apis/apps/v1/namespaces/{namespace}/deployments/external-secrets-webhook"
    operator.log.fault = lambda method, url: method == "PATCH" and url.endswith(webhook)
    await esc.patch_spec({"controllerConfig": {"labels": {"columns": "fault"}}})
    await wait_condition(esc, "Progressing", "True", reason="APIError")
    failure = (await esc.get())["status"]["failure"]
    assert failure["object"] == f"Deployment {namespace}/external-secrets-webhook"
    assert failure["request"] == f"PATCH {webhook}"
    assert "injected by the test" in failure["response"]
    assert failure["inspect"].startswith("kubectl logs -n external-secrets-operator")
    assert table(cluster, "esc", "-o", "wide")["FAILURE"] == failure["object"]
    operator.log.fault = None
    await wait_condition(esc, "Ready", "True", timeout=90)
    assert "failure" not in (await esc.get())["status"]

    # Degraded: the object at fault and where to look; the ESM counts one controller less.
    await esc.patch_spec({"appConfig": {"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": "bitwarden-tls"}}}})
    await wait_condition(esc, "Degraded", "True", reason="BitwardenSecretNotFound")
    failure = (await esc.get())["status"]["failure"]
    assert failure.pop("message").startswith("spec.appConfig.bitwardenSecretManagerProvider")
    assert failure == {"object": f"Secret {namespace}/bitwarden-tls",
                       "inspect": f"kubectl get secrets -n {namespace}"}
    columns = table(cluster, "esc")
    assert (columns["READY"], columns["REASON"]) == ("False", "BitwardenSecretNotFound")

    async def counted() -> None:
        assert table(cluster, "esm")["READY"] == "2/3"

    await eventually(counted)


POLICY = "/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/eso-it-failure"
BINDING = ("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/"
           "eso-it-failure")


def refusing_policy(namespace: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A ValidatingAdmissionPolicy (and its binding) that refuses the webhook Deployment in
    `namespace`: a real rejection by the real API server."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "eso-it-failure"},
        "spec": {"failurePolicy": "Fail",
                 "matchConstraints": {"resourceRules": [{
                     "apiGroups": ["apps"], "apiVersions": ["v1"],
                     "operations": ["CREATE", "UPDATE"], "resources": ["deployments"]}]},
                 "validations": [{
                     "expression": f"object.metadata.namespace != '{namespace}' || "
                                   "object.metadata.name != 'external-secrets-webhook'",
                     "message": "refused by the test's admission policy"}]}}
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding", "metadata": {"name": "eso-it-failure"},
        "spec": {"policyName": "eso-it-failure", "validationActions": ["Deny"]}}
    return policy, binding


async def test_each_failure_replaces_the_one_before_field_by_field(
        *, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    """A rejected request, then a missing ConfigMap, then recovery: status.failure names
    only the current failure at each step (the server merges nested status objects field by
    field, so a field the second failure lacks must be removed, not kept from the first)."""
    namespace = SCENARIO_NAMESPACES["failure"]
    webhook = f"/apis/apps/v1/namespaces/{namespace}/deployments/external-secrets-webhook"
    policy, binding = refusing_policy(namespace)
    await kube.apply(POLICY, policy, field_manager="integration-tests")
    await kube.apply(BINDING, binding, field_manager="integration-tests")
    try:
        async def refused() -> None:  # the policy is in force once the server refuses
            probe = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {
                "name": "external-secrets-webhook", "namespace": namespace},
                "spec": {"selector": {"matchLabels": {"app": "probe"}}, "template": {
                    "metadata": {"labels": {"app": "probe"}},
                    "spec": {"containers": [{"name": "probe", "image": "probe"}]}}}}
            answer: Exception | None = None
            try:
                await kube.request("POST", f"/apis/apps/v1/namespaces/{namespace}/deployments",
                                   body=probe, query={"dryRun": "All"})
            except ApiError as error:
                answer = error
            assert answer is not None, "the admission policy is not in force yet"
            assert "refused by the test's admission policy" in str(answer)

        await eventually(refused)
        await start_operator()
        await esc.create({"controllerConfig": {"namespace": namespace}})
        await wait_condition(esc, "Degraded", "True", reason="ApplyRejected", timeout=60)
        failure = (await esc.get())["status"]["failure"]
        assert set(failure) == {"object", "request", "response", "inspect", "message"}
        assert failure["object"] == f"Deployment {namespace}/external-secrets-webhook"
        assert failure["request"] == f"PATCH {webhook}"
        assert failure["response"].startswith("422 ")
        assert "refused by the test's admission policy" in failure["response"]

        # A missing ConfigMap holds back only the controller's Deployment: the webhook's is
        # still applied and still refused, until the policy goes.
        await esc.patch_spec({"appConfig": {"trustedCABundle": {
            "configMapName": "eso-it-missing-ca", "key": "ca-bundle.crt"}}})
    finally:
        await kube.delete(BINDING)
        await kube.delete(POLICY)
    await wait_condition(esc, "Degraded", "True", reason="TrustedCABundleNotFound", timeout=90)
    failure = (await esc.get())["status"]["failure"]
    assert "eso-it-missing-ca" in failure.pop("message")
    assert failure == {"object": f"ConfigMap {namespace}/eso-it-missing-ca",
                       "inspect": f"kubectl get configmaps -n {namespace}"}

    await esc.patch_spec({"appConfig": {"trustedCABundle": None}})
    await wait_condition(esc, "Ready", "True", timeout=90)
    assert "failure" not in (await esc.get())["status"]


async def test_the_status_line_fits_and_status_awaited_lists_what_is_awaited(
        *, kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An external-secrets image the cluster cannot run: every Deployment of the operand
    waits for its pod and, without the cert-controller, both webhook configurations wait
    for a caBundle. The conditions (and the ESM's entry that mirrors them) stay one short
    line naming the first object and the count; status.awaited lists every object with its
    cause; once the image runs, the ESC is Ready and status.awaited is gone."""
    namespace = SCENARIO_NAMESPACES["status-line"]
    monkeypatch.setenv("RELATED_IMAGE_EXTERNAL_SECRETS",
                       "registry.invalid/no-such-external-secrets:v0.0.1")
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": namespace}})

    async def all_awaited() -> dict[str, Any]:
        status: dict[str, Any] = (await esc.get()).get("status") or {}
        awaited = {item["object"]: item["message"] for item in status.get("awaited") or []}
        for name in ("external-secrets", "external-secrets-webhook",
                     "external-secrets-cert-controller"):
            assert "NoLocalBinary" in awaited.get(f"Deployment {namespace}/{name}", ""), status
        for name in ("externalsecret-validate", "secretstore-validate"):
            assert "no caBundle yet" in awaited.get(
                f"ValidatingWebhookConfiguration {name}", ""), status
        return status

    status = await eventually(all_awaited, 60)
    count = len(status["awaited"])
    first = status["awaited"][0]["object"]
    # Upgradeable carries the upgrade gate's whole message, beside these; the ESM's entry
    # mirrors these three.
    conditions = {c["type"]: c for c in status["conditions"] if c["type"] != "Upgradeable"}
    for condition in conditions.values():
        assert len(condition["message"]) <= CONDITION_MESSAGE_LIMIT, condition
    for kind in ("Ready", "Progressing"):
        message = conditions[kind]["message"]
        assert message.startswith(f"Waiting for {count} objects: {first}"), message
        assert message.endswith(f" and {count - 1} more; see status.awaited"), message
    assert conditions["Ready"]["reason"] == "WaitingForOperand"
    assert "failure" not in status
    columns = table(cluster, "esc")
    assert columns["MESSAGE"] == conditions["Ready"]["message"]
    entry = await esm_conditions(kube, "external-secrets-controller")
    assert {kind: c["message"] for kind, c in entry.items()} == {
        kind: c["message"] for kind, c in conditions.items()}

    await operator.stop()
    monkeypatch.delenv("RELATED_IMAGE_EXTERNAL_SECRETS")
    await start_operator()
    await wait_condition(esc, "Ready", "True", timeout=90)
    status = (await esc.get())["status"]
    assert "awaited" not in status
    for condition in status["conditions"]:
        if condition["type"] != "Upgradeable":
            assert len(condition["message"]) <= CONDITION_MESSAGE_LIMIT, condition
