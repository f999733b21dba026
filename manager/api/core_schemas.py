"""Kubernetes schemas (core/v1 ResourceRequirements, Affinity, Toleration; networking/v1
NetworkPolicyEgressRule) for the CRDs.

The CRDs embed the real Kubernetes schemas of these types so the API server validates
them (a misspelt toleration operator or a bad quantity is rejected at admission). They come
from the OpenAPI v3 documents a kube-apiserver serves at `/openapi/v3/api/v1` and
`/openapi/v3/apis/networking.k8s.io/v1`, converted to structural CRD schemas, and are
committed as `core_v1_schemas.json` so that generating the CRDs needs no cluster and always
gives the same bytes.

`refresh_snapshot()` rewrites the snapshot; it needs a control plane (see
`python -m manager generate --refresh-core-schemas`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

SNAPSHOT_PATH = Path(__file__).with_name("core_v1_schemas.json")
CORE_V1 = "/openapi/v3/api/v1"
NETWORKING_V1 = "/openapi/v3/apis/networking.k8s.io/v1"

# The types the API embeds, by the name the models use in `Schema(core_type=...)`: the
# OpenAPI v3 document that serves each, and its name there.
CORE_TYPES: Mapping[str, tuple[str, str]] = {
    "Affinity": (CORE_V1, "io.k8s.api.core.v1.Affinity"),
    "EnvVar": (CORE_V1, "io.k8s.api.core.v1.EnvVar"),
    "ResourceRequirements": (CORE_V1, "io.k8s.api.core.v1.ResourceRequirements"),
    "Toleration": (CORE_V1, "io.k8s.api.core.v1.Toleration"),
    "TopologySpreadConstraint": (CORE_V1, "io.k8s.api.core.v1.TopologySpreadConstraint"),
    "NetworkPolicyEgressRule": (NETWORKING_V1,
                                "io.k8s.api.networking.v1.NetworkPolicyEgressRule"),
}
OPENAPI_PATHS = tuple(sorted({path for path, _ in CORE_TYPES.values()}))

_REF_PREFIX = "#/components/schemas/"
_QUANTITY = "io.k8s.apimachinery.pkg.api.resource.Quantity"
_INT_OR_STRING = "io.k8s.apimachinery.pkg.util.intstr.IntOrString"
# The serialisation grammar of resource.Quantity (as controller-gen renders it), so a
# malformed quantity string is rejected by the schema itself.
QUANTITY_PATTERN = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
# JSONSchemaProps fields we keep; everything else (defaults that do not apply, patch
# strategies, oneOf wrappers, ...) is dropped because a CRD schema forbids or ignores it.
_KEPT_KEYS = frozenset({
    "description", "type", "format", "enum", "properties", "required", "items",
    "additionalProperties", "minimum", "maximum", "minLength", "maxLength", "minItems",
    "maxItems", "minProperties", "maxProperties", "pattern", "nullable",
    "x-kubernetes-list-type", "x-kubernetes-list-map-keys", "x-kubernetes-map-type",
    "x-kubernetes-int-or-string", "x-kubernetes-preserve-unknown-fields",
})


class CoreSchemaError(ValueError):
    """The OpenAPI document or the snapshot does not have the expected shape."""


def int_or_string_schema(pattern: str | None) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "x-kubernetes-int-or-string": True,
    }
    if pattern is not None:
        schema["pattern"] = pattern
    return schema


def structural_schema(name: str, components: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAPI v3 component `name`, with every $ref resolved, as a structural CRD schema."""
    return _convert(_component(name, components), components, (name,))


def _component(name: str, components: Mapping[str, Any]) -> dict[str, Any]:
    try:
        schema: dict[str, Any] = components[name]
    except KeyError:
        raise CoreSchemaError(f"OpenAPI document has no schema {name!r}") from None
    return schema


def _ref_target(node: Mapping[str, Any]) -> str | None:
    """The component a node refers to: directly (`$ref`) or as `allOf: [{$ref}]`."""
    if "$ref" in node:
        return str(node["$ref"]).removeprefix(_REF_PREFIX)
    all_of = node.get("allOf")
    if isinstance(all_of, list) and len(all_of) == 1 and "$ref" in all_of[0]:
        return str(all_of[0]["$ref"]).removeprefix(_REF_PREFIX)
    return None


def _convert(node: Mapping[str, Any], components: Mapping[str, Any],
             stack: tuple[str, ...]) -> dict[str, Any]:
    target = _ref_target(node)
    if target is not None:
        if target in stack:
            raise CoreSchemaError(f"recursive schema {' -> '.join((*stack, target))}")
        resolved = _resolve(target, components, (*stack, target))
        # The referring field's own description is more specific than the type's.
        if "description" in node:
            resolved["description"] = node["description"]
        return resolved
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key not in _KEPT_KEYS:
            continue
        if key == "properties":
            out[key] = {prop: _convert(sub, components, stack) for prop, sub in value.items()}
        elif key in ("items", "additionalProperties") and isinstance(value, Mapping):
            out[key] = _convert(value, components, stack)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _resolve(name: str, components: Mapping[str, Any], stack: tuple[str, ...]) -> dict[str, Any]:
    if name == _QUANTITY:
        return int_or_string_schema(QUANTITY_PATTERN)
    if name == _INT_OR_STRING:
        return int_or_string_schema(None)
    return _convert(_component(name, components), components, stack)


def _components(openapi: Mapping[str, Any] | None) -> Mapping[str, Any]:
    try:
        components: Mapping[str, Any] = (openapi or {})["components"]["schemas"]
    except (KeyError, TypeError):
        raise CoreSchemaError("not an OpenAPI v3 document: no components.schemas") from None
    return components


def extract(documents: Mapping[str, Mapping[str, Any]],
            kubernetes_version: str) -> dict[str, Any]:
    """The snapshot document for the OpenAPI v3 documents of OPENAPI_PATHS, by path."""
    return {
        "kubernetesVersion": kubernetes_version,
        "sources": list(OPENAPI_PATHS),
        "schemas": {alias: structural_schema(name, _components(documents.get(path)))
                    for alias, (path, name) in sorted(CORE_TYPES.items())},
    }


def snapshot_text(snapshot: Mapping[str, Any]) -> str:
    return json.dumps(snapshot, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def load_snapshot(path: Path = SNAPSHOT_PATH) -> dict[str, Any]:
    try:
        snapshot: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise CoreSchemaError(
            f"{path} is missing; run `python -m manager generate --refresh-core-schemas`"
        ) from None
    missing = set(CORE_TYPES) - set(snapshot.get("schemas", {}))
    if missing:
        raise CoreSchemaError(f"{path} lacks {sorted(missing)}; refresh it")
    return snapshot


def core_schema(alias: str, snapshot: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A deep copy of one snapshot schema (callers may annotate it freely)."""
    schemas = (snapshot or load_snapshot())["schemas"]
    if alias not in schemas:
        raise CoreSchemaError(f"unknown core type {alias!r}; known: {sorted(schemas)}")
    return copy.deepcopy(schemas[alias])


def refresh_snapshot(get_json: Callable[[str], dict[str, Any]], kubernetes_version: str,
                     path: Path = SNAPSHOT_PATH) -> Path:
    """Fetch the OpenAPI documents with `get_json` and rewrite the snapshot at `path`."""
    documents = {source: get_json(source) for source in OPENAPI_PATHS}
    path.write_text(snapshot_text(extract(documents, kubernetes_version)))
    return path
