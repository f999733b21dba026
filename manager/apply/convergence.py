"""Decide, without writing, whether server-side applying a desired object would change anything.

Server-side apply of an unchanged object is a no-op on the server, but it is still a write
request (admission, an etcd read-compare, an audit entry), and the operator must send none
when nothing changed. Two facts about the live object answer the question exactly:

1. **Our last applied configuration is the desired one.** Every applied object carries the
   annotation `APPLIED_HASH_ANNOTATION`: a hash of the object as we apply it. A different
   hash means the desired object changed since (a value, a label, a field added or
   removed), so apply. Comparing hashes instead of values sidesteps server normalisation
   (quantities, defaults inside lists) that would make a value comparison flap.
2. **We still own every field we applied.** The server records, in `metadata.managedFields`,
   which fields each manager set. Anyone who changes or removes one of our fields with a
   normal update (kubectl edit/patch, another controller) takes that field's ownership
   away from our manager; a forced apply by another manager does the same. So if our
   `Apply` entry still covers every field of the desired object, nobody has changed them
   since we applied; if a field is missing from it, there is drift, so apply.

A deleted object is simply absent: apply re-creates it. Fields that others own and we do not
(status, caBundle injected by the cert-controller, data of the webhook Secret) never count.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from manager.client.kube import JsonObject

APPLIED_HASH_ANNOTATION = "operator.openshift.io/applied-hash"

# Top-level fields that identify an object; the server never records them as owned.
_IDENTITY_FIELDS = frozenset({"apiVersion", "kind"})
_IDENTITY_METADATA = frozenset({"name", "namespace"})


def _without_nulls(value: Any) -> Any:
    """Drop null values: in an apply configuration they mean "not mine", not "empty"."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value if item is not None]
    return value


def content_hash(obj: JsonObject) -> str:
    canonical = json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def prepare_for_apply(desired: JsonObject) -> JsonObject:
    """The apply configuration we send: no nulls, no status, stamped with its own hash."""
    body = _without_nulls({k: v for k, v in desired.items() if k != "status"})
    metadata = dict(body.get("metadata") or {})
    annotations = {k: v for k, v in (metadata.get("annotations") or {}).items()
                   if k != APPLIED_HASH_ANNOTATION}
    metadata.pop("annotations", None)
    unstamped = {**body, "metadata": {**metadata, **({"annotations": annotations}
                                                     if annotations else {})}}
    annotations[APPLIED_HASH_ANNOTATION] = content_hash(unstamped)
    return {**body, "metadata": {**metadata, "annotations": annotations}}


def applied_by(live: JsonObject, field_manager: str) -> JsonObject | None:
    """The fields `field_manager` owns through server-side apply (fieldsV1), if any."""
    for entry in live.get("metadata", {}).get("managedFields") or []:
        if (entry.get("manager") == field_manager and entry.get("operation") == "Apply"
                and not entry.get("subresource")):
            fields: JsonObject = entry.get("fieldsV1") or {}
            return fields
    return None


def owns_all(fields: JsonObject, value: Any) -> bool:
    """True if the fieldsV1 node `fields` covers every field set in `value`."""
    if not fields:
        # A leaf: the path itself is owned, so its whole value is (an atomic map, list or
        # struct such as a label selector, or a scalar).
        return True
    if isinstance(value, dict):
        for key, child in value.items():
            node = fields.get(f"f:{key}")
            if node is None or not owns_all(node, child):
                return False
        return True
    if isinstance(value, list):
        return _owns_list(fields, value)
    return False  # a scalar under a node with children: not what we applied


def _owns_list(fields: JsonObject, items: list[Any]) -> bool:
    keyed = {k: v for k, v in fields.items() if k.startswith("k:")}
    if keyed:  # an associative list: each item is owned under its key fields
        return all(_owns_keyed_item(keyed, item) for item in items)
    if any(k.startswith("v:") for k in fields):  # a set of scalars
        # Compare decoded members: the server's JSON escaping differs from Python's (it
        # leaves non-ASCII alone and escapes <, >, &). The type is part of the identity,
        # because in Python True == 1.
        owned = {_typed(json.loads(k[2:])) for k in fields if k.startswith("v:")}
        return all(_typed(item) in owned for item in items)
    if any(k.startswith("i:") for k in fields):  # granular by index
        return all(f"i:{index}" in fields and owns_all(fields[f"i:{index}"], item)
                   for index, item in enumerate(items))
    return False  # children of an unknown kind: apply rather than guess


def _typed(value: Any) -> tuple[str, str]:
    return type(value).__name__, json.dumps(value, sort_keys=True)


def _owns_keyed_item(keyed: JsonObject, item: Any) -> bool:
    if not isinstance(item, dict):
        return False
    for key, node in keyed.items():
        key_fields: dict[str, Any] = json.loads(key[2:])
        # A key field the desired item leaves out is one the server defaulted (a port's
        # protocol): it matches whatever the server filled in.
        if all(item.get(name, value) == value for name, value in key_fields.items()):
            return owns_all(node, item)
    return False


def is_converged(body: JsonObject, live: JsonObject | None, field_manager: str) -> bool:
    """Would applying `body` (from prepare_for_apply) leave `live` unchanged?"""
    if live is None:
        return False
    live_meta = live.get("metadata", {})
    wanted = body["metadata"]["annotations"][APPLIED_HASH_ANNOTATION]
    if (live_meta.get("annotations") or {}).get(APPLIED_HASH_ANNOTATION) != wanted:
        return False
    fields = applied_by(live, field_manager)
    if fields is None:
        return False
    content = {k: v for k, v in body.items() if k not in _IDENTITY_FIELDS}
    content["metadata"] = {k: v for k, v in body["metadata"].items()
                           if k not in _IDENTITY_METADATA}
    return owns_all(fields, content)
