"""Runs every case of tests/api/*.yaml against the real API server.

The generated CRDs are installed once; creates use server-side dry-run (the singleton
name never collides), updates create the object for real, update it and delete it again.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from kubernetes_asyncio import client
from kubernetes_asyncio.client.exceptions import ApiException

from manager.api.docs import EXAMPLES
from manager.paths import REPO_ROOT
from tests.api.cases import Case, load_cases, stored_body
from tests.conftest import Cluster

CRD_DIR = REPO_ROOT / "manifests" / "crds"
GROUP, VERSION = "operator.openshift.io", "v1alpha1"
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
async def objects(installed_crds: list[str],
                  api_client: client.ApiClient) -> AsyncIterator[client.CustomObjectsApi]:
    api = client.CustomObjectsApi(api_client)
    await _wait_until_served(api)
    yield api


async def _wait_until_served(api: client.CustomObjectsApi) -> None:
    """Established can precede the REST endpoint (404) and its storage (429) by a moment."""
    for _ in range(100):
        try:
            for plural in ("externalsecretsconfigs", "externalsecretsmanagers"):
                await api.list_cluster_custom_object(GROUP, VERSION, plural)
        except ApiException as error:
            if error.status not in (404, 429):
                raise
            await asyncio.sleep(0.2)
        else:
            return
    pytest.fail("the custom resources were never served")


def _message(error: ApiException) -> str:
    try:
        return str(json.loads(error.body or b"{}")["message"])
    except (ValueError, KeyError, TypeError):
        return str(error.body)


async def _create(api: client.CustomObjectsApi, case: Case, body: dict[str, Any],
                  dry_run: bool) -> dict[str, Any]:
    manifest = case.manifest(body)
    created: dict[str, Any]
    if dry_run:
        created = await api.create_cluster_custom_object(GROUP, VERSION, case.plural, manifest,
                                                         dry_run="All")
    else:
        created = await api.create_cluster_custom_object(GROUP, VERSION, case.plural, manifest)
    return created


async def _delete(api: client.CustomObjectsApi, case: Case) -> None:
    try:
        await api.delete_cluster_custom_object(GROUP, VERSION, case.plural, case.resource_name)
    except ApiException as error:
        if error.status != 404:
            raise
    for _ in range(50):  # no finalizers: deletion is immediate, but be sure before the next case
        try:
            await api.get_cluster_custom_object(GROUP, VERSION, case.plural, case.resource_name)
        except ApiException as error:
            if error.status == 404:
                return
            raise
        await asyncio.sleep(0.1)
    pytest.fail(f"{case.kind}/{case.resource_name} was not deleted")


async def _update(api: client.CustomObjectsApi, case: Case) -> dict[str, Any]:
    """Create `initial` for real, replace it with `updated`; the caller deletes it."""
    try:
        await api.get_cluster_custom_object(GROUP, VERSION, case.plural, case.resource_name)
    except ApiException as error:
        if error.status != 404:
            raise
    else:
        pytest.fail(f"{case.kind}/{case.resource_name} exists before the case; "
                    "the API suite needs it absent")
    try:
        created = await _create(api, case, case.initial, dry_run=False)
    except ApiException as error:
        pytest.fail(f"initial object of an update case was rejected: {_message(error)}")
    assert case.updated is not None
    body = case.manifest(case.updated)
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    updated: dict[str, Any] = await api.replace_cluster_custom_object(
        GROUP, VERSION, case.plural, case.resource_name, body)
    return updated


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
async def test_case(case: Case, objects: client.CustomObjectsApi) -> None:
    stored: dict[str, Any] | None = None
    rejection: ApiException | None = None
    try:
        if case.operation == "onCreate":
            stored = await _create(objects, case, case.initial, dry_run=True)
        else:
            stored = await _update(objects, case)
    except ApiException as error:
        rejection = error
    finally:
        if case.operation == "onUpdate":
            await _delete(objects, case)
    if rejection is not None:
        message = _message(rejection)
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


@pytest.mark.parametrize("title", list(EXAMPLES))
async def test_docs_examples_are_accepted(title: str, objects: client.CustomObjectsApi) -> None:
    body = EXAMPLES[title]
    plural = "externalsecretsconfigs" if body["kind"] == "ExternalSecretsConfig" else (
        "externalsecretsmanagers")
    stored = await objects.create_cluster_custom_object(GROUP, VERSION, plural, body,
                                                        dry_run="All")
    # Only server defaults may be added: everything the example says is stored as written.
    assert _contains(stored["spec"], body["spec"])


def _contains(actual: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        return isinstance(actual, dict) and all(
            k in actual and _contains(actual[k], v) for k, v in wanted.items())
    return bool(actual == wanted)
