"""The operator never takes over an object it did not create, unless told to adopt it.

A Helm release of external-secrets left a ClusterRole and a ValidatingWebhookConfiguration
under the names the operator renders, and the administrator created the operand namespace.
Until `adoptExistingObjects: "true"` nothing of them changes (same resourceVersion) and the
pass writes nothing at all; after it, the two objects are adopted (one Event each) and
managed like the operator's own. The namespace is used as it is throughout.
"""

from __future__ import annotations

from typing import Any

from manager.client.kube import Kube
from manager.names import FIELD_MANAGER
from tests.integration.conftest import (
    EscHandle,
    StartOperator,
    UserObjects,
    esc_events,
    eventually,
    wait_condition,
)

NAMESPACE = "eso-it-adopt"
CLUSTER_ROLE = "/apis/rbac.authorization.k8s.io/v1/clusterroles/external-secrets-controller"
WEBHOOK = ("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/"
           "externalsecret-validate")
HELM_METADATA = {
    "labels": {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": "eso"},
    "annotations": {"meta.helm.sh/release-name": "external-secrets",
                    "meta.helm.sh/release-namespace": "helm-eso"},
}


def helm_objects() -> list[tuple[str, dict[str, Any]]]:
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "external-secrets-controller", **HELM_METADATA},
            "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}]}
    webhook = {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "externalsecret-validate", **HELM_METADATA},
        "webhooks": [{
            "name": "validate.externalsecret.external-secrets.io",
            "rules": [{"apiGroups": ["external-secrets.io"], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["externalsecrets"]}],
            "clientConfig": {"service": {"name": "external-secrets-webhook",
                                         "namespace": "helm-eso", "path": "/validate"}},
            "admissionReviewVersions": ["v1"], "sideEffects": "None",
            # Ignore: nothing serves it here, and user objects must stay deletable.
            "failurePolicy": "Ignore"}]}
    return [(CLUSTER_ROLE, role), (WEBHOOK, webhook)]


async def create_helm_release_leftovers(kube: Kube) -> dict[str, str]:
    """Helm's objects (created by Helm's field manager with a plain create), replacing the
    operator's from earlier scenarios; their resourceVersions."""
    versions = {}
    for path, body in helm_objects():
        await kube.delete(path)
        await eventually(lambda path=path: _absent(kube, path))
        collection = path.rpartition("/")[0]
        created = await kube.create(collection, body, field_manager="helm")
        versions[path] = created["metadata"]["resourceVersion"]
    return versions


async def _absent(kube: Kube, path: str) -> None:
    assert await kube.get(path) is None


async def adopted_events(kube: Kube, uid: str) -> list[str]:
    return sorted(e["note"] for e in await esc_events(kube, uid) if e["reason"] == "Adopted")


async def test_foreign_objects_stay_untouched_until_adopted(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    namespace_path = f"/api/v1/namespaces/{NAMESPACE}"
    created = await kube.create("/api/v1/namespaces", {
        "metadata": {"name": NAMESPACE, "labels": {"team": "platform"}}},
        field_manager="administrator")
    namespace_version = created["metadata"]["resourceVersion"]
    versions = await create_helm_release_leftovers(kube)
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})

    degraded = await wait_condition(esc, "Degraded", "True", reason="ObjectNotOwned")
    message = await esc.failure_message()  # the conditions carry its first line
    assert degraded["message"].startswith(message[:60])
    for name in ("ClusterRole external-secrets-controller",
                 "ValidatingWebhookConfiguration externalsecret-validate"):
        assert f"{name} exists and is managed by Helm release helm-eso/external-secrets" \
            in message, message
    assert "helm uninstall" in message
    assert 'spec.controllerConfig.adoptExistingObjects: "true"' in message
    await operator.wait_idle()
    for path, version in versions.items():
        assert (await kube.request("GET", path))["metadata"]["resourceVersion"] == version
    # The pass wrote nothing but the operator's own status (and the ESM it creates) and a
    # Warning; retries repeat it as one Event (its series), not as more Events.
    deployments = await kube.list(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments")
    assert deployments["items"] == []
    operand_writes = [(method, url) for method, url in operator.log.writes()
                      if "/apis/operator.openshift.io/" not in url
                      and "/apis/events.k8s.io/" not in url]
    assert operand_writes == [], operand_writes
    uid = (await esc.get())["metadata"]["uid"]
    warnings = [e for e in await esc_events(kube, uid) if e["type"] == "Warning"]
    assert [e["reason"] for e in warnings] == ["ObjectNotOwned"], warnings

    # The administrator opts in: both are adopted, one Event each, and managed from then on.
    await esc.patch_spec({"controllerConfig": {"adoptExistingObjects": "true"}})
    await wait_condition(esc, "Ready", "True")
    role = await kube.request("GET", CLUSTER_ROLE)
    assert any(e["manager"] == FIELD_MANAGER and e["operation"] == "Apply"
               for e in role["metadata"]["managedFields"])
    assert role["metadata"]["labels"]["app.kubernetes.io/managed-by"] == \
        "external-secrets-operator"
    assert {"secrets"} < {r for rule in role["rules"] for r in rule["resources"]}
    webhook = await kube.request("GET", WEBHOOK)
    service = webhook["webhooks"][0]["clientConfig"]["service"]
    assert service["namespace"] == NAMESPACE
    assert webhook["webhooks"][0]["failurePolicy"] == "Fail"
    assert await adopted_events(kube, uid) == [
        "adopted ClusterRole external-secrets-controller (it was managed by Helm release "
        "helm-eso/external-secrets (field managers helm))",
        "adopted ValidatingWebhookConfiguration externalsecret-validate (it was managed by "
        "Helm release helm-eso/external-secrets (field managers helm))"]

    # Managed: a hand edit is repaired, and no second adoption is recorded.
    await kube.request("PUT", CLUSTER_ROLE, body={**role, "rules": []})

    async def repaired() -> None:
        live = await kube.request("GET", CLUSTER_ROLE)
        assert live["rules"] == role["rules"]

    await eventually(repaired)
    await operator.wait_idle()
    assert len(await adopted_events(kube, uid)) == 2
    # The namespace the administrator created was used as it is.
    namespace = await kube.request("GET", namespace_path)
    assert namespace["metadata"]["resourceVersion"] == namespace_version
    assert namespace["metadata"]["labels"] == {"team": "platform",
                                               "kubernetes.io/metadata.name": NAMESPACE}
    await user_objects.assert_untouched(kube)
