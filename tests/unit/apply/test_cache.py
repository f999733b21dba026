"""The cache of the operator's own objects (manager.apply.cache)."""

from __future__ import annotations

from manager.apply.cache import ObjectCache
from manager.apply.results import ObjectRef
from manager.client.kube import JsonObject

KIND = ("apps", "Deployment")
REF = ObjectRef("apps/v1", "Deployment", "es", "external-secrets")


def deployment(version: str, name: str = "external-secrets") -> JsonObject:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": "es", "resourceVersion": version}}


def test_nothing_is_known_before_the_watch_listed_the_kind() -> None:
    cache = ObjectCache()
    cache.put(KIND, deployment("5"))  # an event before the listing
    assert not cache.synced(KIND)
    assert cache.objects(KIND) is None
    cache.replace(KIND, [deployment("6")])
    assert cache.synced(KIND)
    assert cache.get(REF) == deployment("6")


def test_an_event_that_trails_our_own_apply_does_not_roll_the_object_back() -> None:
    cache = ObjectCache()
    cache.replace(KIND, [deployment("10")])
    cache.put(KIND, deployment("12"))  # the answer of our apply
    cache.put(KIND, deployment("11"))  # a watch event still on its way
    assert cache.get(REF) == deployment("12")
    cache.put(KIND, deployment("13"))
    assert cache.get(REF) == deployment("13")


def test_removal_and_a_broken_watch() -> None:
    cache = ObjectCache()
    cache.replace(KIND, [deployment("1"), deployment("2", name="webhook")])
    cache.remove(KIND, deployment("1"))
    assert cache.get(REF) is None
    assert [o["metadata"]["name"] for o in cache.objects(KIND) or []] == ["webhook"]
    cache.forget(KIND)  # events may be missed until the next listing
    assert not cache.synced(KIND)
    assert cache.get(REF) is None
    assert cache.objects(KIND) is None


def test_cluster_scoped_objects_are_keyed_without_a_namespace() -> None:
    cache = ObjectCache()
    role = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "external-secrets-controller", "resourceVersion": "3"}}
    cache.replace(("rbac.authorization.k8s.io", "ClusterRole"), [role])
    assert cache.get(ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "",
                               "external-secrets-controller")) == role
