"""The pydantic models agree with the CRDs, case by case, without a cluster.

The API suite (tests/api/*.yaml) records what the real API server stores and rejects; these
tests hold the models to the same data:
- every object the server stored parses, and dumps back to exactly what was stored;
- parsing the object as sent gives the same result as parsing it as stored (the models'
  defaults are the CRD's defaults, applied at the same places);
- every structural rejection (bounds, enums, required fields) outside the core/v1 types is
  also a model validation error, located at the field the server names.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from manager.api import (
    ControllerConfig,
    ExternalSecretsConfig,
    ExternalSecretsConfigSpec,
    ExternalSecretsManager,
    MetaCondition,
)
from manager.api.crd import crds
from tests.api.cases import Case, error_path, load_cases

MODELS: dict[str, type[BaseModel]] = {
    "ExternalSecretsConfig": ExternalSecretsConfig,
    "ExternalSecretsManager": ExternalSecretsManager,
}
CASES = load_cases()
ACCEPTED = [c for c in CASES if c.expected is not None]
# Error texts of the OpenAPI (non-CEL) validation the models mirror with pydantic constraints.
STRUCTURAL_ERRORS = ("Too long", "Too many", "should be at least", "Unsupported value",
                     "Required value", "greater than or equal", "less than or equal")
# Inside these core/v1 fields Python holds plain dicts; only the API server validates them.
INSIDE_CORE_FIELDS = (".resources.", ".affinity.", ".tolerations[", ".overrideEnv[",
                      ".topologySpreadConstraints[")


def _structural_outside_core(case: Case) -> bool:
    error = case.expected_error
    if error is None or not any(e in error for e in STRUCTURAL_ERRORS):
        return False
    path = error_path(error)
    assert path is not None  # the loader refuses an expected error without its path
    return not any(f in path for f in INSIDE_CORE_FIELDS)


_PATH_PART = re.compile(r"\.?([^.\[\]]+)|\[([^\]]+)\]")


def _loc(path: str) -> tuple[str | int, ...]:
    """The server's field path as a pydantic error location:
    `spec.a[0].b[key]` -> ("spec", "a", 0, "b", "key")."""
    parts: list[str | int] = []
    for match in _PATH_PART.finditer(path):
        name, index = match.groups()
        parts.append(name if index is None else int(index) if index.isdigit() else index)
    return tuple(parts)


STRUCTURALLY_REJECTED = [c for c in CASES if _structural_outside_core(c)]


def _dump(model: BaseModel) -> dict[str, Any]:
    return model.model_dump(by_alias=True, exclude_none=True)


def _sent(case: Case) -> dict[str, Any]:
    """The object as the case sends it, minus status (the status subresource drops it)."""
    body = case.updated if case.updated is not None else case.initial
    return {k: v for k, v in body.items() if k != "status"}


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.id for c in ACCEPTED])
def test_stored_objects_parse_and_dump_back_unchanged(case: Case) -> None:
    assert case.expected is not None
    parsed = MODELS[case.kind].model_validate(case.expected)
    assert _dump(parsed) == case.expected


@functools.cache
def _schema(kind: str) -> dict[str, Any]:
    document = crds()[f"operator.openshift.io_{kind.lower()}s.yaml"]
    schema: dict[str, Any] = document["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _prune(value: Any, schema: dict[str, Any]) -> Any:
    """Drop what the API server prunes: fields the structural schema does not declare."""
    if isinstance(value, dict) and "properties" in schema:
        return {k: _prune(v, schema["properties"][k]) for k, v in value.items()
                if k in schema["properties"]}
    if isinstance(value, dict) and isinstance(schema.get("additionalProperties"), dict):
        return {k: _prune(v, schema["additionalProperties"]) for k, v in value.items()}
    if isinstance(value, list) and "items" in schema:
        return [_prune(v, schema["items"]) for v in value]
    return value


@pytest.mark.parametrize("case", ACCEPTED, ids=[c.id for c in ACCEPTED])
def test_model_defaults_equal_the_server_defaults(case: Case) -> None:
    # The models forbid unknown fields but hold core/v1 types as plain dicts, so give them
    # what the server keeps after pruning; the generated schema decides what that is.
    sent = _prune(_sent(case), _schema(case.kind))
    assert _dump(MODELS[case.kind].model_validate(sent)) == case.expected


@pytest.mark.parametrize("case", STRUCTURALLY_REJECTED, ids=[c.id for c in STRUCTURALLY_REJECTED])
def test_structural_rejections_are_model_errors_too(case: Case) -> None:
    assert case.expected_error is not None
    path = error_path(case.expected_error)
    assert path is not None
    with pytest.raises(ValidationError) as caught:
        MODELS[case.kind].model_validate(_sent(case))
    assert [e["loc"] for e in caught.value.errors()] == [_loc(path)]


def test_server_paths_become_pydantic_locations() -> None:
    assert _loc("spec.appConfig.logLevel") == ("spec", "appConfig", "logLevel")
    assert _loc("spec.features[0].name") == ("spec", "features", 0, "name")
    assert _loc("spec.appConfig.nodeSelector[kubernetes.io/os]") == (
        "spec", "appConfig", "nodeSelector", "kubernetes.io/os")


def test_the_parity_checks_cover_enough_cases() -> None:
    assert len(ACCEPTED) >= 60
    assert len(STRUCTURALLY_REJECTED) >= 30


def test_json_names_are_the_seed_names() -> None:
    spec = ExternalSecretsConfigSpec.model_validate(
        {"appConfig": {"bitwardenSecretManagerProvider": {"secretRef": {"name": "tls"}},
                       "proxy": {"httpsProxy": "http://p:1", "noProxy": "a"}}})
    assert spec.app_config is not None
    assert spec.app_config.bitwarden_secret_manager_provider is not None
    assert spec.app_config.proxy is not None
    assert spec.app_config.proxy.https_proxy == "http://p:1"
    status = ExternalSecretsConfig.model_validate(
        {"status": {"bitwardenSDKServerImage": "img", "externalSecretsImage": "es"}}).status
    assert status is not None
    assert status.bitwarden_sdk_server_image == "img"
    assert _dump(status) == {"bitwardenSDKServerImage": "img", "externalSecretsImage": "es"}


def test_models_accept_python_names_and_are_frozen() -> None:
    config = ControllerConfig(namespace="ns", labels={"a": "b"})
    assert _dump(config) == {"namespace": "ns", "labels": {"a": "b"}}
    with pytest.raises(ValidationError) as caught:
        config.namespace = "other"  # type: ignore[misc]
    assert [e["loc"] for e in caught.value.errors()] == [("namespace",)]


def test_condition_follows_metav1_condition() -> None:
    good = {"type": "Ready", "status": "True", "reason": "Ready", "message": "",
            "lastTransitionTime": "2025-01-01T00:00:00Z", "observedGeneration": 3}
    assert _dump(MetaCondition.model_validate(good)) == good
    for bad in ({"status": "Yes"}, {"reason": ""}, {"reason": "not a reason"},
                {"type": "-bad"}, {"observedGeneration": -1}):
        with pytest.raises(ValidationError) as caught:
            MetaCondition.model_validate({**good, **bad})
        assert [e["loc"] for e in caught.value.errors()] == [tuple(bad)]
