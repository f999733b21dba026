"""Runs every case of tests/api/*.yaml against the real API server.

The generated CRDs are installed once; creates use server-side dry-run (the singleton
name never collides), updates create the object for real, update it and delete it again.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from manager.api.docs import EXAMPLES
from manager.client.kube import ApiError, Kube
from manager.paths import REPO_ROOT
from tests.api.cases import Case, error_path, load_cases, stored_body
from tests.conftest import Cluster

CRD_DIR = REPO_ROOT / "manifests" / "crds"
GROUP, VERSION = "operator.openshift.io", "v1alpha1"
BASE = f"/apis/{GROUP}/{VERSION}"
CASES = load_cases()


@pytest.fixture(scope="session")
def installed_crds(cluster: Cluster) -> list[str]:
    """The generated CRDs, applied and Established."""
    cluster.kubectl("apply", "--server-side", "--force-conflicts",
                    "--field-manager=api-validation-suite", f"--filename={CRD_DIR}")
    names = [f"customresourcedefinition/{p.name.split('_', 1)[1].removesuffix('.yaml')}"
             f".{GROUP}" for p in sorted(CRD_DIR.glob("*.yaml"))]
    cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    return names


@pytest_asyncio.fixture(loop_scope="session")
async def objects(installed_crds: list[str], kube: Kube) -> AsyncIterator[Kube]:
    await _wait_until_served(kube)
    yield kube


async def _wait_until_served(kube: Kube) -> None:
    """Established can precede the REST endpoint (404) and its storage (429) by a moment."""
    for _ in range(100):
        try:
            for plural in ("externalsecretsconfigs", "externalsecretsmanagers"):
                await kube.list(f"{BASE}/{plural}")
        except ApiError as error:
            if error.status not in (404, 429):
                raise
            await asyncio.sleep(0.2)
        else:
            return
    pytest.fail("the custom resources were never served")


async def _create(kube: Kube, case: Case, body: dict[str, Any],
                  dry_run: bool) -> dict[str, Any]:
    query = {"dryRun": "All"} if dry_run else {}
    return await kube.request("POST", f"{BASE}/{case.plural}", query=query,
                              body=case.manifest(body))


async def _delete(kube: Kube, case: Case) -> None:
    path = f"{BASE}/{case.plural}/{case.resource_name}"
    await kube.delete(path)
    for _ in range(50):  # no finalizers: deletion is immediate, but be sure before the next case
        if await kube.get(path) is None:
            return
        await asyncio.sleep(0.1)
    pytest.fail(f"{case.kind}/{case.resource_name} was not deleted")


async def _update(kube: Kube, case: Case) -> dict[str, Any]:
    """Create `initial` for real, replace it with `updated`; the caller deletes it."""
    path = f"{BASE}/{case.plural}/{case.resource_name}"
    if await kube.get(path) is not None:
        pytest.fail(f"{case.kind}/{case.resource_name} exists before the case; "
                    "the API suite needs it absent")
    try:
        created = await _create(kube, case, case.initial, dry_run=False)
    except ApiError as error:
        pytest.fail(f"initial object of an update case was rejected: {error.message}")
    assert case.updated is not None
    body = case.manifest(case.updated)
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    return await kube.request("PUT", path, body=body)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_case(case: Case, objects: Kube) -> None:
    stored: dict[str, Any] | None = None
    rejection: ApiError | None = None
    try:
        if case.operation == "onCreate":
            stored = await _create(objects, case, case.initial, dry_run=True)
        else:
            stored = await _update(objects, case)
    except ApiError as error:
        rejection = error
    finally:
        if case.operation == "onUpdate":
            await _delete(objects, case)
    if rejection is not None:
        message = rejection.message
        assert case.expected_error is not None, f"unexpectedly rejected: {message}"
        assert rejection.status == 422, message
        assert case.expected_error in message
    else:
        assert stored is not None
        assert case.expected_error is None, f"accepted, expected error {case.expected_error!r}"
        assert stored_body(stored) == case.expected


def test_the_suite_is_large_enough() -> None:
    """The issue asks for at least 80 cases covering create and update of both kinds."""
    assert len(CASES) >= 80
    kinds_and_operations = {(c.kind, c.operation) for c in CASES}
    assert len(kinds_and_operations) == 4


def test_every_expected_error_names_its_field_path() -> None:
    """A rejection is matched with the field the server blames, not only its message."""
    rejected = [c for c in CASES if c.expected_error is not None]
    assert rejected
    assert [c.id for c in rejected if error_path(c.expected_error or "") is None] == []


@pytest.mark.parametrize("expected_error", [
    "Unsupported value", "Required value: x", "configMapName: Required value",
    "spec.a.b in body should be at least 1 chars long", "spec.a.b"])
def test_the_loader_refuses_an_expected_error_without_its_field_path(
        expected_error: str, tmp_path: Path) -> None:
    suite = {"kind": "ExternalSecretsConfig",
             "tests": {"onCreate": [{"name": "n", "initial": {},
                                     "expectedError": expected_error}]}}
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    with pytest.raises(ValueError, match="must start with the field path"):
        load_cases(tmp_path)


@pytest.mark.parametrize("expected_error", [
    "spec.a.b: Required value", "spec.a[0].b[kubernetes.io/os]: Invalid value",
    "metadata.name: Invalid value", '<nil>: Invalid value: "object": x'])
def test_the_loader_takes_an_expected_error_with_its_field_path(
        expected_error: str, tmp_path: Path) -> None:
    suite = {"kind": "ExternalSecretsConfig",
             "tests": {"onCreate": [{"name": "n", "initial": {},
                                     "expectedError": expected_error}]}}
    (tmp_path / "suite.yaml").write_text(yaml.safe_dump(suite))
    assert [c.expected_error for c in load_cases(tmp_path)] == [expected_error]


@pytest.mark.parametrize("title", list(EXAMPLES))
async def test_docs_examples_are_accepted(title: str, objects: Kube) -> None:
    body = EXAMPLES[title]
    plural = "externalsecretsconfigs" if body["kind"] == "ExternalSecretsConfig" else (
        "externalsecretsmanagers")
    stored = await objects.request("POST", f"{BASE}/{plural}", query={"dryRun": "All"},
                                   body=body)
    # Only server defaults may be added: everything the example says is stored as written.
    assert _contains(stored["spec"], body["spec"])


def _contains(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            k in actual and _contains(actual[k], v) for k, v in wanted.items())
    return bool(actual == wanted)
