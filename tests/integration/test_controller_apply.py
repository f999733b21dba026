"""The apply layer on the real API server: a second pass over every rendered object sends no
write, drift and desired changes do, and pruning deletes only what the operator applied."""

from __future__ import annotations

import os
from typing import Any

from manager.api.models import ExternalSecretsConfigSpec
from manager.apply import Action, Applier, Discovery, ObjectRef, Pruner
from manager.apply.cache import ObjectCache
from manager.client.kube import Kube
from manager.config import OperatorEnvironment, effective_config
from manager.names import MANAGED_BY_LABEL, OPERATOR_NAME
from manager.render import render_operand
from tests.integration.conftest import SCENARIO_NAMESPACES, UserObjects

NAMESPACE = SCENARIO_NAMESPACES["apply"]


def rendered(spec: dict[str, Any]) -> tuple[Any, ...]:
    config = effective_config(ExternalSecretsConfigSpec.model_validate(spec), None,
                              OperatorEnvironment.from_environ(os.environ))
    return render_operand(config).objects()


async def test_second_apply_of_every_rendered_object_writes_nothing(
        kube: Kube, user_objects: UserObjects) -> None:
    spec = {"controllerConfig": {"namespace": NAMESPACE, "labels": {"team": "a"}},
            "appConfig": {"bitwardenSecretManagerProvider": {"enabled": "true",
                                                             "secretRef": {"name": "tls"}},
                          "proxy": {"httpProxy": "http://proxy.example:3128",
                                    "noProxy": ".cluster.local"},
                          "resources": {"limits": {"cpu": "0.5", "memory": "1Gi"}},
                          "tolerations": [{"key": "k", "operator": "Exists"}],
                          "nodeSelector": {"disk": "ssd"}}}
    objects = rendered(spec)
    applier = Applier(kube, Discovery(kube), ObjectCache())
    first = await applier.apply_all(objects)
    # (The namespace existed: the Applier adopts it; the reconciler would not write it.)
    assert all(r.action in (Action.CREATED, Action.UPDATED, Action.ADOPTED) for r in first)
    second = await applier.apply_all(objects)
    assert [r for r in second if r.action is not Action.UNCHANGED] == []

    # A changed desired object (a label removed from the spec) is applied again...
    changed = rendered({**spec, "controllerConfig": {"namespace": NAMESPACE}})
    third = await applier.apply_all(changed)
    assert all(r.action is Action.UPDATED for r in third)
    labels = (await kube.request(
        "GET", f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/external-secrets"
    ))["metadata"]["labels"]
    assert "team" not in labels  # ... and the field we stopped applying is gone
    await user_objects.assert_untouched(kube)


async def test_pruning_deletes_only_objects_the_operator_applied(
        kube: Kube, user_objects: UserObjects) -> None:
    discovery = Discovery(kube)
    cache = ObjectCache()  # never synced: every read goes to the server
    applier, pruner = Applier(kube, discovery, cache), Pruner(kube, discovery, cache)
    labels = {MANAGED_BY_LABEL: OPERATOR_NAME}
    ours = {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "applied-by-operator", "namespace": NAMESPACE,
                         "labels": labels}}
    await applier.apply(ours)
    # Same label, but created by someone else: not ours to delete.
    await kube.create(f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                      {"metadata": {"name": "copied-our-label", "labels": labels}},
                      field_manager="someone-else")
    # Applied by us once, but its label was removed since: not selected, not deleted.
    unlabelled = {**ours, "metadata": {**ours["metadata"], "name": "label-removed"}}
    await applier.apply(unlabelled)
    await kube.request("PATCH", f"/api/v1/namespaces/{NAMESPACE}/configmaps/label-removed",
                       content_type="application/merge-patch+json",
                       body={"metadata": {"labels": {MANAGED_BY_LABEL: None}}})

    unwanted = await pruner.find_unwanted([("v1", "ConfigMap"), ("v1", "Namespace")], keep=[])
    names = {obj["metadata"]["name"] for _, obj in unwanted}
    assert "applied-by-operator" in names
    assert "copied-our-label" not in names
    assert "label-removed" not in names
    assert not [obj for _, obj in unwanted if obj["kind"] == "Namespace"]

    kept = await pruner.find_unwanted([("v1", "ConfigMap")], keep=[ObjectRef.of(ours)])
    assert "applied-by-operator" not in {obj["metadata"]["name"] for _, obj in kept}
    for resource, obj in unwanted:
        result = await pruner.delete(resource, obj)
        assert result.action is Action.DELETED
    assert await kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/applied-by-operator") is None
    assert await kube.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/copied-our-label")
    await user_objects.assert_untouched(kube)
