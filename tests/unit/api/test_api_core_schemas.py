"""Conversion of Kubernetes OpenAPI v3 components into structural CRD schemas."""

from __future__ import annotations

import re
from typing import Any

import pytest

from manager import versions
from manager.api import core_schemas

REF = "#/components/schemas/"


def _doc(schemas: dict[str, Any]) -> dict[str, Any]:
    return {"openapi": "3.0.0", "components": {"schemas": schemas}}


def _docs(core: dict[str, Any], networking: dict[str, Any] | None = None,
          ) -> dict[str, dict[str, Any]]:
    return {core_schemas.CORE_V1: _doc(core),
            core_schemas.NETWORKING_V1: _doc(NETWORKING if networking is None else networking)}


COMPONENTS: dict[str, Any] = {
    "io.k8s.api.core.v1.Toleration": {
        "description": "type description", "type": "object",
        "properties": {
            "operator": {"type": "string", "enum": ["Equal", "Exists"], "default": "Equal"},
            "seconds": {"type": "integer", "format": "int64"},
        },
    },
    "io.k8s.api.core.v1.ResourceRequirements": {
        "type": "object",
        "properties": {
            "limits": {"type": "object", "additionalProperties": {
                "$ref": REF + "io.k8s.apimachinery.pkg.api.resource.Quantity"}},
            "claims": {"type": "array", "x-kubernetes-list-type": "map",
                       "x-kubernetes-list-map-keys": ["name"],
                       "x-kubernetes-patch-strategy": "merge",
                       "items": {"default": {}, "allOf": [{"$ref": REF + "Claim"}]}},
        },
    },
    "Claim": {"type": "object", "required": ["name"],
              "properties": {"name": {"type": "string", "default": ""}}},
    "io.k8s.apimachinery.pkg.api.resource.Quantity": {
        "oneOf": [{"type": "string"}, {"type": "number"}]},
    "io.k8s.api.core.v1.Affinity": {
        "type": "object",
        "properties": {"nodeAffinity": {"description": "field description",
                                        "allOf": [{"$ref": REF + "Node"}]}},
    },
    "Node": {"description": "type description", "type": "object",
             "x-kubernetes-map-type": "atomic", "properties": {"x": {"type": "string"}}},
    "io.k8s.api.core.v1.EnvVar": {"type": "object", "required": ["name"],
                                  "properties": {"name": {"type": "string"}}},
    "io.k8s.api.core.v1.TopologySpreadConstraint": {
        "type": "object", "required": ["maxSkew"],
        "properties": {"maxSkew": {"type": "integer", "format": "int32"}}},
}


NETWORKING: dict[str, Any] = {
    "io.k8s.api.networking.v1.NetworkPolicyEgressRule": {
        "type": "object",
        "properties": {"ports": {"type": "array", "x-kubernetes-list-type": "atomic",
                                 "items": {"$ref": REF + "Port"}}},
    },
    "Port": {"type": "object", "properties": {
        "port": {"$ref": REF + "io.k8s.apimachinery.pkg.util.intstr.IntOrString"}}},
    "io.k8s.apimachinery.pkg.util.intstr.IntOrString": {"type": "string",
                                                         "format": "int-or-string"},
}


def test_extract_resolves_references_and_drops_what_crds_forbid() -> None:
    snapshot = core_schemas.extract(_docs(COMPONENTS), "v9.9.9")
    assert snapshot["kubernetesVersion"] == "v9.9.9"
    assert snapshot["sources"] == ["/openapi/v3/api/v1", "/openapi/v3/apis/networking.k8s.io/v1"]
    schemas = snapshot["schemas"]
    assert set(schemas) == {"Affinity", "EnvVar", "ResourceRequirements", "Toleration",
                            "TopologySpreadConstraint", "NetworkPolicyEgressRule"}
    port = schemas["NetworkPolicyEgressRule"]["properties"]["ports"]["items"]["properties"]["port"]
    assert port == core_schemas.int_or_string_schema(None)
    assert schemas["Toleration"]["properties"]["operator"] == {
        "type": "string", "enum": ["Equal", "Exists"]}  # default dropped
    claims = schemas["ResourceRequirements"]["properties"]["claims"]
    assert "x-kubernetes-patch-strategy" not in claims
    assert claims["x-kubernetes-list-type"] == "map"
    assert claims["items"] == {"type": "object", "required": ["name"],
                               "properties": {"name": {"type": "string"}}}
    quantity = schemas["ResourceRequirements"]["properties"]["limits"]["additionalProperties"]
    assert quantity == core_schemas.int_or_string_schema(core_schemas.QUANTITY_PATTERN)
    node = schemas["Affinity"]["properties"]["nodeAffinity"]
    assert node["description"] == "field description"  # the field's, not the type's
    assert node["x-kubernetes-map-type"] == "atomic"


def test_recursive_schemas_are_refused() -> None:
    looping = {**COMPONENTS, "Node": {"type": "object", "properties": {
        "again": {"$ref": REF + "Node"}}}}
    with pytest.raises(core_schemas.CoreSchemaError, match="recursive"):
        core_schemas.extract(_docs(looping), "v0")


def test_missing_components_are_reported() -> None:
    with pytest.raises(core_schemas.CoreSchemaError, match="no schema"):
        core_schemas.extract(_docs({}), "v0")
    with pytest.raises(core_schemas.CoreSchemaError, match="no schema"):
        core_schemas.extract(_docs(COMPONENTS, {}), "v0")
    with pytest.raises(core_schemas.CoreSchemaError, match="not an OpenAPI v3 document"):
        core_schemas.extract({core_schemas.CORE_V1: {"swagger": "2.0"}}, "v0")


def test_committed_snapshot_comes_from_the_pinned_kubernetes_version() -> None:
    snapshot = core_schemas.load_snapshot()
    assert snapshot["kubernetesVersion"] == versions.KUBE_VERSION
    assert set(snapshot["schemas"]) == set(core_schemas.CORE_TYPES)


def test_quantity_pattern_accepts_kubernetes_quantities() -> None:
    pattern = re.compile(core_schemas.QUANTITY_PATTERN)
    for good in ("1", "100m", "1.5", "64Mi", "1e9", "2Gi", "+1", ".5"):
        assert pattern.match(good), good
    for bad in ("1 GB", "lots", "1.2.3", "Mi", "10xx"):
        assert not pattern.match(bad), bad
