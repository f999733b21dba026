"""convergence: does applying a desired object need a write?

The `managedFields` below have the shapes kube-apiserver v1.34 records (sampled from the
local control plane): a Deployment and a Service applied with our field manager, then edited
by `kubectl patch` / `kubectl label`, a ConfigMap with a finalizer (a set), a
ValidatingWebhookConfiguration whose caBundle another manager injects.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from manager.apply.convergence import (
    APPLIED_HASH_ANNOTATION,
    applied_by,
    content_hash,
    is_converged,
    owns_all,
    prepare_for_apply,
)
from manager.client.kube import JsonObject
from manager.names import FIELD_MANAGER

# --- building blocks ------------------------------------------------------------------------


def key(**fields: Any) -> str:
    """A FieldsV1 associative-list key, as the server writes it (sorted, compact JSON)."""
    return "k:" + json.dumps(fields, sort_keys=True, separators=(",", ":"))


def entry(fields: JsonObject, manager: str = FIELD_MANAGER, operation: str = "Apply",
          subresource: str | None = None, api_version: str = "apps/v1") -> JsonObject:
    managed: JsonObject = {"apiVersion": api_version, "fieldsType": "FieldsV1",
                           "fieldsV1": fields, "manager": manager, "operation": operation,
                           "time": "2026-01-01T00:00:00Z"}
    if subresource is not None:
        managed["subresource"] = subresource
    return managed


def deployment() -> JsonObject:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "external-secrets", "namespace": "external-secrets",
                     "labels": {"app": "external-secrets"}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "external-secrets"}},
            "template": {
                "metadata": {"labels": {"app": "external-secrets"}},
                "spec": {
                    "containers": [{
                        "name": "external-secrets",
                        "image": "registry.example/external-secrets:v1",
                        "args": ["--concurrent=1", "--metrics-addr=:8080"],
                        "ports": [{"containerPort": 8080, "name": "metrics"}],
                        "resources": {"requests": {"cpu": "0.1", "memory": "32Mi"}},
                        "env": [{"name": "HTTP_PROXY", "value": "http://proxy:3128"}],
                    }],
                    "tolerations": [{"key": "node-role", "operator": "Exists"}],
                    "volumes": [{"name": "tmp", "emptyDir": {}}],
                },
            },
        },
    }


CONTAINER = key(name="external-secrets")
METRICS_PORT = key(containerPort=8080, protocol="TCP")  # protocol: defaulted by the server


def deployment_fields() -> JsonObject:
    """What the server records for our Apply of `deployment()`."""
    return {
        "f:metadata": {
            "f:annotations": {f"f:{APPLIED_HASH_ANNOTATION}": {}},
            "f:labels": {"f:app": {}},
        },
        "f:spec": {
            "f:replicas": {},
            "f:selector": {},  # a LabelSelector is atomic
            "f:template": {
                "f:metadata": {"f:labels": {"f:app": {}}},
                "f:spec": {
                    "f:containers": {
                        CONTAINER: {
                            ".": {},
                            "f:args": {},
                            "f:env": {key(name="HTTP_PROXY"): {".": {}, "f:name": {},
                                                                 "f:value": {}}},
                            "f:image": {},
                            "f:name": {},
                            "f:ports": {METRICS_PORT: {".": {}, "f:containerPort": {},
                                                       "f:name": {}}},
                            "f:resources": {"f:requests": {"f:cpu": {}, "f:memory": {}}},
                        },
                    },
                    "f:tolerations": {},  # atomic list
                    "f:volumes": {key(name="tmp"): {".": {}, "f:emptyDir": {}, "f:name": {}}},
                },
            },
        },
    }


def live_from(body: JsonObject, fields: JsonObject, *others: JsonObject) -> JsonObject:
    """`body` as the server stores it after our apply: server metadata, defaults,
    normalised quantities, a status owned by another manager."""
    live = copy.deepcopy(body)
    live["metadata"].update({"uid": "6b1f0c9e", "resourceVersion": "42", "generation": 1,
                             "managedFields": [entry(fields), *others]})
    if live["kind"] == "Deployment":
        pod = live["spec"]["template"]["spec"]
        pod["containers"][0]["resources"]["requests"]["cpu"] = "100m"
        pod["containers"][0]["ports"][0]["protocol"] = "TCP"
        pod["containers"][0]["terminationMessagePath"] = "/dev/termination-log"
        pod["restartPolicy"] = "Always"
        live["spec"]["revisionHistoryLimit"] = 10
        live["status"] = {"replicas": 1, "observedGeneration": 1}
        live["metadata"]["managedFields"].append(entry(
            {"f:status": {"f:replicas": {}, "f:observedGeneration": {}}},
            manager="kube-controller-manager", operation="Update", subresource="status"))
    return live


def without(fields: JsonObject, *path: str) -> JsonObject:
    """A copy of `fields` with the node at `path` removed (someone took it over).

    Like the server, it drops the parents left without children: FieldsV1 never holds an
    empty node other than a leaf (`{}` means "this path itself is owned")."""
    trimmed = copy.deepcopy(fields)
    parents = [trimmed]
    for step in path[:-1]:
        parents.append(parents[-1][step])
    del parents[-1][path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        if not parents[depth]:
            del parents[depth - 1][path[depth - 1]]
    return trimmed


POD_SPEC = ("f:spec", "f:template", "f:spec")


@pytest.fixture
def body() -> JsonObject:
    return prepare_for_apply(deployment())


# --- is_converged: the decision -------------------------------------------------------------


def test_a_missing_object_needs_an_apply(body: JsonObject) -> None:
    assert not is_converged(body, None, FIELD_MANAGER)


def test_an_object_just_applied_needs_nothing(body: JsonObject) -> None:
    assert is_converged(body, live_from(body, deployment_fields()), FIELD_MANAGER)


def test_values_the_server_normalised_do_not_count_as_drift(body: JsonObject) -> None:
    live = live_from(body, deployment_fields())
    container = live["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["requests"]["cpu"] == "100m"  # we applied "0.1"
    assert "protocol" not in body["spec"]["template"]["spec"]["containers"][0]["ports"][0]
    assert is_converged(body, live, FIELD_MANAGER)


def test_a_changed_desired_object_needs_an_apply(body: JsonObject) -> None:
    live = live_from(body, deployment_fields())
    changed = deployment()
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "registry.example/es:v2"
    # The same fields are owned, only a value differs: the hash is what tells.
    assert not is_converged(prepare_for_apply(changed), live, FIELD_MANAGER)


def test_a_desired_field_removed_needs_an_apply(body: JsonObject) -> None:
    live = live_from(body, deployment_fields())
    changed = deployment()
    del changed["spec"]["template"]["spec"]["containers"][0]["env"]
    assert not is_converged(prepare_for_apply(changed), live, FIELD_MANAGER)


def test_a_removed_hash_annotation_needs_an_apply(body: JsonObject) -> None:
    live = live_from(body, deployment_fields())
    del live["metadata"]["annotations"]
    assert not is_converged(body, live, FIELD_MANAGER)


def test_a_field_another_manager_took_over_is_drift(body: JsonObject) -> None:
    # `kubectl patch --type=merge -p '{"spec":{"replicas":3}}'`: the server moves
    # f:spec.f:replicas from our Apply entry to kubectl-patch's Update entry.
    fields = without(deployment_fields(), "f:spec", "f:replicas")
    live = live_from(body, fields, entry({"f:spec": {"f:replicas": {}}},
                                         manager="kubectl-patch", operation="Update"))
    live["spec"]["replicas"] = 3
    assert not is_converged(body, live, FIELD_MANAGER)


def test_an_overwritten_label_is_drift() -> None:
    # `kubectl label --overwrite`: our entry loses f:labels entirely.
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "external-secrets-webhook", "namespace": "es",
                            "labels": {"app": "webhook"}},
               "spec": {"selector": {"app": "webhook"},
                        "ports": [{"name": "https", "port": 443, "targetPort": 10250}]}}
    body = prepare_for_apply(service)
    fields = {
        "f:metadata": {"f:annotations": {f"f:{APPLIED_HASH_ANNOTATION}": {}},
                       "f:labels": {"f:app": {}}},
        "f:spec": {"f:ports": {key(port=443, protocol="TCP"): {
            ".": {}, "f:name": {}, "f:port": {}, "f:targetPort": {}}},
                   "f:selector": {}},
    }
    assert is_converged(body, live_from(body, fields), FIELD_MANAGER)
    relabelled = live_from(body, without(fields, "f:metadata", "f:labels"),
                           entry({"f:metadata": {"f:labels": {"f:app": {}}}},
                                 manager="kubectl-label", operation="Update"))
    assert not is_converged(body, relabelled, FIELD_MANAGER)


@pytest.mark.parametrize("path", [
    (*POD_SPEC, "f:containers", CONTAINER, "f:image"),
    (*POD_SPEC, "f:containers", CONTAINER, "f:ports", METRICS_PORT),
    (*POD_SPEC, "f:containers", CONTAINER, "f:env", key(name="HTTP_PROXY"), "f:value"),
    (*POD_SPEC, "f:containers", CONTAINER, "f:resources", "f:requests", "f:cpu"),
    (*POD_SPEC, "f:volumes", key(name="tmp")),
    (*POD_SPEC, "f:tolerations"),
    ("f:spec", "f:selector"),
    ("f:metadata", "f:annotations", f"f:{APPLIED_HASH_ANNOTATION}"),
], ids="/".join)
def test_any_applied_field_lost_deep_inside_is_drift(body: JsonObject,
                                                     path: tuple[str, ...]) -> None:
    live = live_from(body, without(deployment_fields(), *path))
    assert not is_converged(body, live, FIELD_MANAGER)


def test_fields_only_others_own_never_count() -> None:
    # The cert-controller injects caBundle into our webhooks; a status belongs to others.
    webhook = {"apiVersion": "admissionregistration.k8s.io/v1",
               "kind": "ValidatingWebhookConfiguration",
               "metadata": {"name": "secretstore-validate"},
               "webhooks": [{"name": "validate.secretstore.external-secrets.io",
                             "clientConfig": {"service": {"name": "external-secrets-webhook",
                                                          "namespace": "es",
                                                          "path": "/validate"}},
                             "sideEffects": "None"}]}
    body = prepare_for_apply(webhook)
    item = key(name="validate.secretstore.external-secrets.io")
    ours = {"f:metadata": {"f:annotations": {f"f:{APPLIED_HASH_ANNOTATION}": {}}},
            "f:webhooks": {item: {".": {}, "f:clientConfig": {"f:service": {
                "f:name": {}, "f:namespace": {}, "f:path": {}}},
                "f:name": {}, "f:sideEffects": {}}}}
    injected = entry({"f:webhooks": {item: {"f:clientConfig": {"f:caBundle": {}}}}},
                     manager="cert-controller", operation="Update",
                     api_version="admissionregistration.k8s.io/v1")
    live = live_from(body, ours, injected)
    live["webhooks"][0]["clientConfig"]["caBundle"] = "LS0tLS1CRUdJTi=="
    assert is_converged(body, live, FIELD_MANAGER)


def test_only_our_own_apply_entry_counts(body: JsonObject) -> None:
    fields = deployment_fields()
    live = live_from(body, fields)
    live["metadata"]["managedFields"][0]["manager"] = "someone-else"
    assert not is_converged(body, live, FIELD_MANAGER)
    # Our manager's Update entries (a create, a status patch) are not what we applied.
    live["metadata"]["managedFields"] = [
        entry(fields, operation="Update"),
        entry(fields, subresource="status"),
    ]
    assert not is_converged(body, live, FIELD_MANAGER)


def test_a_converged_object_is_recognised_whatever_the_entry_order(body: JsonObject) -> None:
    live = live_from(body, deployment_fields())
    live["metadata"]["managedFields"].reverse()
    assert is_converged(body, live, FIELD_MANAGER)


# --- applied_by -----------------------------------------------------------------------------


def test_applied_by_picks_the_main_resource_apply_entry() -> None:
    main = {"f:spec": {"f:replicas": {}}}
    live = {"metadata": {"managedFields": [
        entry({"f:status": {}}, subresource="status"),
        entry({"f:spec": {"f:paused": {}}}, operation="Update"),
        entry({"f:spec": {"f:x": {}}}, manager="other"),
        entry(main),
    ]}}
    assert applied_by(live, FIELD_MANAGER) == main
    assert applied_by(live, "nobody") is None
    assert applied_by({"metadata": {}}, FIELD_MANAGER) is None


# --- owns_all: the FieldsV1 walk ------------------------------------------------------------


def test_a_leaf_owns_its_whole_value() -> None:
    assert owns_all({}, {"matchLabels": {"a": "b"}})  # atomic struct
    assert owns_all({}, [{"key": "k"}, {"key": "j"}])  # atomic list
    assert owns_all({}, "scalar")
    assert owns_all({"f:emptyDir": {}}, {"emptyDir": {}})


def test_a_scalar_under_a_node_with_children_is_not_owned() -> None:
    assert not owns_all({"f:a": {}}, "scalar")


def test_a_map_needs_every_key_owned() -> None:
    fields = {".": {}, "f:a": {}, "f:b": {}}
    assert owns_all(fields, {"a": "1", "b": "2"})
    assert owns_all(fields, {"a": "1"})  # fields we no longer apply do not matter here
    assert not owns_all(fields, {"a": "1", "c": "3"})


def test_associative_list_items_are_matched_by_their_keys() -> None:
    fields = {key(name="a"): {".": {}, "f:name": {}, "f:value": {}},
              key(name="b"): {".": {}, "f:name": {}}}
    assert owns_all(fields, [{"name": "b"}, {"name": "a", "value": "x"}])
    assert not owns_all(fields, [{"name": "b", "value": "y"}])  # b's value is not ours
    assert not owns_all(fields, [{"name": "c"}])
    assert not owns_all(fields, [{"name": "a"}, {"name": "c"}])  # every item, not any
    assert not owns_all(fields, ["a"])  # not an item of an associative list


def test_a_key_field_the_server_defaulted_matches_but_an_explicit_other_value_does_not() -> None:
    fields = {key(port=443, protocol="TCP"): {".": {}, "f:port": {}, "f:protocol": {}}}
    assert owns_all(fields, [{"port": 443}])
    assert owns_all(fields, [{"port": 443, "protocol": "TCP"}])
    assert not owns_all(fields, [{"port": 443, "protocol": "UDP"}])
    assert not owns_all(fields, [{"port": 8443}])


def test_a_set_of_scalars_needs_every_member_owned() -> None:
    fields = {'v:"a.io/x"': {}, 'v:"b.io/y"': {}}
    assert owns_all(fields, ["b.io/y", "a.io/x"])
    assert not owns_all(fields, ["a.io/x", "c.io/z"])
    assert owns_all({"v:8080": {}}, [8080])


def test_set_members_match_the_servers_json_escaping() -> None:
    # kube-apiserver keeps non-ASCII text as is and escapes <, > and & (structured-merge-diff).
    fields = {'v:"é"': {}, 'v:"a\\u003cb\\u0026c"': {}}
    assert owns_all(fields, ["é", "a<b&c"])
    assert not owns_all(fields, ["e"])


def test_set_members_keep_their_json_type() -> None:
    assert not owns_all({"v:true": {}}, [1])
    assert not owns_all({'v:"8080"': {}}, [8080])
    assert owns_all({"v:true": {}}, [True])


def test_a_granular_list_needs_every_index_owned() -> None:
    fields = {"i:0": {}, "i:1": {"f:a": {}}}
    assert owns_all(fields, ["x", {"a": 1}])
    assert not owns_all(fields, ["x", {"b": 1}])
    assert not owns_all(fields, ["x", {"a": 1}, "z"])


def test_list_children_of_an_unknown_kind_mean_apply() -> None:
    assert not owns_all({".": {}}, ["a"])


def test_finalizers_are_a_set_in_a_real_object() -> None:
    config_map = {"apiVersion": "v1", "kind": "ConfigMap",
                  "metadata": {"name": "c", "namespace": "es", "finalizers": ["a.io/x"]},
                  "data": {"a": "1", "b": "2"}}
    body = prepare_for_apply(config_map)
    fields = {"f:data": {"f:a": {}, "f:b": {}},
              "f:metadata": {"f:annotations": {f"f:{APPLIED_HASH_ANNOTATION}": {}},
                             "f:finalizers": {'v:"a.io/x"': {}}}}
    assert is_converged(body, live_from(body, fields), FIELD_MANAGER)
    lost = without(fields, "f:metadata", "f:finalizers", 'v:"a.io/x"')
    assert not is_converged(body, live_from(body, lost), FIELD_MANAGER)


# --- prepare_for_apply and the hash ---------------------------------------------------------


def test_the_apply_body_has_no_status_no_nulls_and_a_hash() -> None:
    desired = deployment()
    desired["status"] = {"replicas": 5}
    desired["spec"]["paused"] = None
    desired["metadata"]["annotations"] = {"note": "kept", "dropped": None}
    desired["spec"]["template"]["spec"]["containers"][0]["args"].append(None)
    original = copy.deepcopy(desired)
    body = prepare_for_apply(desired)
    assert desired == original  # the input is not modified
    assert "status" not in body
    assert "paused" not in body["spec"]
    assert body["spec"]["template"]["spec"]["containers"][0]["args"] == [
        "--concurrent=1", "--metrics-addr=:8080"]
    annotations = body["metadata"]["annotations"]
    assert set(annotations) == {"note", APPLIED_HASH_ANNOTATION}
    assert len(annotations[APPLIED_HASH_ANNOTATION]) == 32
    int(annotations[APPLIED_HASH_ANNOTATION], 16)  # hexadecimal


def test_the_hash_is_that_of_the_body_without_the_hash() -> None:
    body = prepare_for_apply(deployment())
    unstamped = copy.deepcopy(body)
    del unstamped["metadata"]["annotations"]
    assert body["metadata"]["annotations"][APPLIED_HASH_ANNOTATION] == content_hash(unstamped)

    annotated = deployment()
    annotated["metadata"]["annotations"] = {"note": "kept"}
    body = prepare_for_apply(annotated)
    unstamped = copy.deepcopy(body)
    del unstamped["metadata"]["annotations"][APPLIED_HASH_ANNOTATION]
    assert body["metadata"]["annotations"][APPLIED_HASH_ANNOTATION] == content_hash(unstamped)


def test_preparing_is_idempotent_and_ignores_a_stale_hash() -> None:
    body = prepare_for_apply(deployment())
    assert prepare_for_apply(body) == body
    stale = deployment()
    stale["metadata"]["annotations"] = {APPLIED_HASH_ANNOTATION: "0" * 32}
    assert prepare_for_apply(stale) == body


def test_the_hash_ignores_key_order_status_and_nulls() -> None:
    reference = prepare_for_apply(deployment())
    reordered = json.loads(json.dumps(deployment(), sort_keys=True))
    reordered["metadata"] = dict(reversed(list(reordered["metadata"].items())))
    with_noise = deployment()
    with_noise["status"] = {"replicas": 3}
    with_noise["spec"]["strategy"] = None
    for variant in (reordered, with_noise):
        assert prepare_for_apply(variant) == reference


@pytest.mark.parametrize("change", [
    lambda d: d["metadata"]["labels"].update(tier="x"),
    lambda d: d["metadata"].update(annotations={"note": "x"}),
    lambda d: d["spec"].update(replicas=2),
    lambda d: d["spec"]["template"]["spec"]["containers"][0]["args"].reverse(),
    lambda d: d["spec"]["template"]["spec"].pop("tolerations"),
    lambda d: d["metadata"].update(namespace="elsewhere"),
], ids=["label", "annotation", "value", "list-order", "removed-field", "namespace"])
def test_the_hash_changes_with_any_desired_change(change: Any) -> None:
    changed = deployment()
    change(changed)
    assert (prepare_for_apply(changed)["metadata"]["annotations"][APPLIED_HASH_ANNOTATION]
            != prepare_for_apply(deployment())["metadata"]["annotations"][
                APPLIED_HASH_ANNOTATION])
