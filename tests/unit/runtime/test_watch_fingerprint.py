"""What a watch counts as a change of an object (runtime/watches.fingerprint)."""

from __future__ import annotations

from typing import Any

import pytest

from manager.client.kube import JsonObject
from manager.client.watch_spec import WatchSpec
from manager.runtime.pass_watches import CHILD_WATCHES
from manager.runtime.watches import _typed, fingerprint


def metadata(**changes: Any) -> JsonObject:
    base: JsonObject = {"name": "external-secrets", "uid": "u1", "resourceVersion": "10",
                        "generation": 2, "labels": {"a": "1", "b": "2"},
                        "annotations": {"x": "y"}}
    return {**base, **changes}


def print_of(meta: JsonObject, status: JsonObject | None = None, **spec: Any) -> object:
    obj = {"metadata": meta, **({"status": status} if status is not None else {})}
    return fingerprint(obj, WatchSpec("apps/v1", "Deployment", **spec))


def test_status_only_churn_of_a_kind_with_generation_is_ignored() -> None:
    assert print_of(metadata()) == print_of(metadata(resourceVersion="11"))


@pytest.mark.parametrize("changes", [
    {"generation": 3},
    {"labels": {"a": "1"}},
    {"annotations": {}},
    {"deletionTimestamp": "2026-01-01T00:00:00Z"},
], ids=["spec", "labels", "annotations", "deletion"])
def test_changes_a_pass_cares_about_are_seen(changes: JsonObject) -> None:
    assert print_of(metadata()) != print_of(metadata(**changes))


def test_label_order_is_not_a_change() -> None:
    assert print_of(metadata()) == print_of(metadata(labels={"b": "2", "a": "1"}))


def test_without_a_generation_any_new_version_is_a_change() -> None:
    config_map = metadata()
    del config_map["generation"]
    assert print_of(config_map) != print_of({**config_map, "resourceVersion": "11"})


def test_any_change_watches_see_status_changes_too() -> None:
    # A CRD becoming Established changes its status only.
    assert print_of(metadata(), any_change=True) != \
        print_of(metadata(resourceVersion="11"), any_change=True)


def rollout(available: int, **extra: Any) -> JsonObject:
    condition = {"type": "Available", "status": "True" if available else "False",
                 "reason": "MinimumReplicasAvailable", "lastUpdateTime": extra.pop("at", "t1"),
                 "message": extra.pop("message", "")}
    return {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
            "availableReplicas": available, "conditions": [condition], **extra}


def test_status_watches_see_a_deployment_becoming_available() -> None:
    assert print_of(metadata(), rollout(0), with_status=True) != \
        print_of(metadata(resourceVersion="11"), rollout(1), with_status=True)


def test_status_watches_ignore_timestamps_and_messages() -> None:
    assert print_of(metadata(), rollout(1), with_status=True) == \
        print_of(metadata(resourceVersion="11"), rollout(1, at="t2", message="now"),
                 with_status=True)


def pod_print(status: JsonObject, **meta: Any) -> object:
    obj = {"metadata": metadata(**meta), "status": status}
    return fingerprint(obj, WatchSpec("v1", "Pod", "es", with_status=True))


def waiting_pod(reason: str, message: str = "", restarts: int = 0, **extra: Any) -> JsonObject:
    return {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": extra.get("at", "t1")},
        {"type": "Ready", "status": "False", "reason": "ContainersNotReady",
         "message": extra.get("ready_message", "containers with unready status: [c]")}],
            "containerStatuses": [{"name": "c", "ready": False, "restartCount": restarts,
                                   "state": {"waiting": {"reason": reason,
                                                         "message": message}}}]}


def test_pod_watches_see_what_the_ready_message_reports_and_nothing_else() -> None:
    base = pod_print(waiting_pod("ContainerCreating"))
    # Kubelet writes that say nothing new (timestamps, the Ready condition's message, a new
    # resourceVersion) are ignored...
    assert base == pod_print(waiting_pod("ContainerCreating", at="t2", ready_message="x"),
                             resourceVersion="11")
    # ...a new waiting reason or message, a restart, a scheduling verdict are not.
    assert base != pod_print(waiting_pod("ErrImagePull"))
    assert base != pod_print(waiting_pod("ContainerCreating", "pulling"))
    assert base != pod_print(waiting_pod("ContainerCreating", restarts=1))
    unschedulable = waiting_pod("ContainerCreating")
    unschedulable["conditions"][0] = {"type": "PodScheduled", "status": "False",
                                      "reason": "Unschedulable", "message": "0/2 nodes"}
    assert base != pod_print(unschedulable)
    running = waiting_pod("x")
    running["containerStatuses"][0]["state"] = {"running": {"startedAt": "t1"}}
    assert base != pod_print(running)
    assert base != pod_print(waiting_pod("ContainerCreating"), deletionTimestamp="t3")


def test_a_ca_bundle_change_counts_through_the_generation_the_server_bumps() -> None:
    # A ValidatingWebhookConfiguration has no status: the API server increments its
    # generation when its webhooks change (tests/integration/test_waiting.py checks it).
    spec = WatchSpec("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration",
                     with_status=True)
    assert fingerprint({"metadata": metadata()}, spec) != \
        fingerprint({"metadata": metadata(generation=3, resourceVersion="11")}, spec)


def test_the_kinds_whose_status_decides_ready_are_watched_whole() -> None:
    watched = {spec.kind for spec in CHILD_WATCHES if spec.with_status}
    assert watched == {"Deployment", "Certificate", "ValidatingWebhookConfiguration"}


STORES = WatchSpec("external-secrets.io/v1", "SecretStore", cached=True, spec_keys="provider")


def secret_store(provider: JsonObject, **meta: Any) -> JsonObject:
    return {"metadata": {"name": "s", "namespace": "apps", "uid": "u", "resourceVersion": "5",
                         "generation": 1, "labels": {"a": "b"}, **meta},
            "spec": {"provider": provider, "refreshInterval": "1h"},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}}


def test_a_spec_keys_watch_counts_only_the_providers_name() -> None:
    fake = secret_store({"fake": {"data": [{"key": "k", "value": "v1"}]}})
    same = secret_store({"fake": {"data": [{"key": "k", "value": "v2"}]}}, generation=2,
                        resourceVersion="9", labels={})
    assert fingerprint(fake, STORES) == fingerprint(same, STORES)
    assert fingerprint(fake, STORES) != fingerprint(secret_store({"alibaba": {}}), STORES)
    assert fingerprint(fake, STORES) != fingerprint(
        secret_store({"fake": {}}, deletionTimestamp="2026-01-01T00:00:00Z"), STORES)
    assert fingerprint(secret_store("garbage"), STORES) == fingerprint(  # type: ignore[arg-type]
        secret_store({}), STORES)


def test_a_spec_keys_watch_caches_names_and_keys_not_values() -> None:
    kept = _typed(secret_store({"fake": {"data": [{"key": "k", "value": "a-secret"}]}}), STORES)
    assert kept == {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
                    "metadata": {"name": "s", "namespace": "apps", "uid": "u",
                                 "resourceVersion": "5"},
                    "spec": {"provider": {"fake": {}}}}
    assert "a-secret" not in repr(kept)
