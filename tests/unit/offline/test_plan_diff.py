"""plan: the difference between a live object and the server's dry run, field by field."""

from __future__ import annotations

from manager.apply.convergence import APPLIED_HASH_ANNOTATION
from manager.offline.plan import _describe, changed_fields


def described(before: object, after: object, *, secret: bool = False) -> list[str]:
    return [_describe(change) for change in changed_fields(before, after, secret=secret)]


def test_leaves_are_named_by_path_with_old_and_new_values() -> None:
    before = {"spec": {"replicas": 1, "template": {"spec": {"containers": [
        {"name": "c", "args": ["--loglevel=info"]}]}}}}
    after = {"spec": {"replicas": 2, "template": {"spec": {"containers": [
        {"name": "c", "args": ["--loglevel=debug"]}]}}}}
    assert described(before, after) == [
        "spec.replicas: 1 -> 2",
        "spec.template.spec.containers[0].args[0]: '--loglevel=info' -> '--loglevel=debug'"]


def test_added_maps_list_their_fields_and_odd_keys_are_bracketed() -> None:
    assert described({"metadata": {}}, {"metadata": {"labels": {
        "team": "a", "example.com/tier": "b"}}}) == [
        "metadata.labels[example.com/tier]: added 'b'", "metadata.labels.team: added 'a'"]
    assert described({"spec": {"proxy": {"a": 1}}}, {"spec": {}}) == ["spec.proxy.a: removed"]


def test_lists_of_another_length_change_whole() -> None:
    assert described({"env": [1]}, {"env": [1, 2]}) == ["env: [1] -> [1, 2]"]


def test_server_bookkeeping_is_not_a_change_and_secret_values_are_not_shown() -> None:
    before = {"metadata": {"resourceVersion": "1", "annotations": {APPLIED_HASH_ANNOTATION: "a"},
                           "managedFields": []}, "status": {"x": 1}, "data": {"k": "czE="}}
    after = {"metadata": {"resourceVersion": "2", "annotations": {APPLIED_HASH_ANNOTATION: "b"},
                          "managedFields": [{}]}, "status": {"x": 2}, "data": {"k": "czI="}}
    assert described(before, after, secret=True) == ["data.k: changed (value not shown)"]
    assert described(before, after) == ["data.k: 'czE=' -> 'czI='"]
