"""The CEL rules of the CRDs and the operator's run-time checks agree, value by value.

Both come from manager/api/patterns.py. A throw-away CRD carries one CEL rule per pattern,
built exactly as manager/api/rules.py builds them (`patterns.cel`); every value of the table
is sent through the real API server (server-side dry run) and through `patterns.matches`,
and the two answers must be the same (for durations, the operator's parser,
kube_values.parse_go_duration, gives the same answer too). The table holds values each
pattern must accept and refuse, so a pattern that changed meaning fails the expectations
below as well.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from manager import kube_values
from manager.api import patterns
from manager.client.kube import CRD_COLLECTION, ApiError, Kube

GROUP = "patterns.test.eso.local"
NAME = f"probes.{GROUP}"
PATTERNS = {
    "dnsLabel": patterns.DNS_LABEL,
    "dnsSubdomain": patterns.DNS_SUBDOMAIN,
    "labelKey": patterns.LABEL_KEY,
    "labelValue": patterns.LABEL_VALUE,
    "goDuration": patterns.GO_DURATION,
    "reservedLabelKey": patterns.RESERVED_LABEL_KEY,
}
# (field, value, whether the pattern accepts it)
CASES = [
    ("dnsLabel", "external-secrets", True), ("dnsLabel", "a", True),
    ("dnsLabel", "Upper", False), ("dnsLabel", "-lead", False), ("dnsLabel", "dot.ted", False),
    ("dnsLabel", "", False), ("dnsLabel", "trail-", False),
    ("dnsSubdomain", "example.com", True), ("dnsSubdomain", "a.b-c.d", True),
    ("dnsSubdomain", "a..b", False), ("dnsSubdomain", ".a", False),
    ("dnsSubdomain", "under_score", False),
    ("labelKey", "tier", True), ("labelKey", "example.com/tier", True),
    ("labelKey", "Ex_a.mple", True), ("labelKey", "example.com/", False),
    ("labelKey", "/tier", False), ("labelKey", "a/b/c", False), ("labelKey", "-x", False),
    ("labelValue", "", True), ("labelValue", "v1.2_3-x", True), ("labelValue", "has space", False),
    ("labelValue", "end-", False), ("labelValue", "ünicode", False),
    ("goDuration", "30m", True), ("goDuration", "1h30m", True), ("goDuration", "1.5h", True),
    ("goDuration", "250ms", True), ("goDuration", "10µs", True), ("goDuration", "-5m", False),
    ("goDuration", "5", False), ("goDuration", "5 m", False), ("goDuration", "", False),
    ("goDuration", "1.h", True), ("goDuration", "0s", True), ("goDuration", "0", False),
    ("goDuration", ".5h", False), ("goDuration", "+5m", False), ("goDuration", "1h.5m", False),
    ("reservedLabelKey", "app", True), ("reservedLabelKey", "app.kubernetes.io/name", True),
    ("reservedLabelKey", "external-secrets.io/component", True),
    ("reservedLabelKey", "servicebinding.io/controller", True),
    ("reservedLabelKey", "application", False), ("reservedLabelKey", "appXkubernetes.io/a", False),
    ("reservedLabelKey", "example.com/app", False),
    ("reservedLabelKey", "servicebinding.io/controllers", False),
]


def probe_crd() -> dict[str, object]:
    properties = {field: {"type": "string", "maxLength": 64, "x-kubernetes-validations": [
        {"rule": f"self.matches('{patterns.cel(pattern)}')", "message": f"not a {field}"}]}
        for field, pattern in PATTERNS.items()}
    return {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": NAME},
        "spec": {"group": GROUP, "scope": "Cluster",
                 "names": {"plural": "probes", "singular": "probe", "kind": "Probe"},
                 "versions": [{"name": "v1", "served": True, "storage": True, "schema": {
                     "openAPIV3Schema": {"type": "object", "properties": {"spec": {
                         "type": "object", "properties": properties}}}}}]},
    }


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def probes(kube: Kube) -> AsyncIterator[str]:
    await kube.apply(f"{CRD_COLLECTION}/{NAME}", probe_crd(), field_manager="api-tests")
    collection = f"/apis/{GROUP}/v1/probes"
    deadline = time.monotonic() + 30
    while True:
        try:
            await kube.list(collection)
            break
        except ApiError as error:
            if time.monotonic() > deadline or error.status not in (404, 429):
                raise
        await asyncio.sleep(0.2)
    yield collection
    await kube.delete(f"{CRD_COLLECTION}/{NAME}")


def parses_as_duration(value: str) -> bool:
    try:
        kube_values.parse_go_duration(value)
    except kube_values.InvalidValueError:
        return False
    return True


async def refusal(kube: Kube, collection: str, field: str, value: str) -> ApiError | None:
    """The API server's answer to `value` in `field` (None: accepted)."""
    try:
        await kube.request("POST", collection, query={"dryRun": "All"}, body={
            "apiVersion": f"{GROUP}/v1", "kind": "Probe", "metadata": {"name": "probe"},
            "spec": {field: value}})
    except ApiError as error:
        return error
    return None


@pytest.mark.parametrize(("field", "value", "expected"), CASES,
                         ids=[f"{f}:{v or 'empty'}" for f, v, _ in CASES])
async def test_cel_and_python_agree(kube: Kube, probes: str, field: str, value: str,
                                    expected: bool) -> None:
    in_python = patterns.matches(PATTERNS[field], value)
    assert in_python == expected, f"{field} {value!r}"
    if field == "goDuration":  # the parser the operator reads durations with agrees too
        assert parses_as_duration(value) == expected, value
    refused = await refusal(kube, probes, field, value)
    assert (refused is None) == in_python, refused
    if refused is not None:  # by the pattern's rule, not by something else
        assert refused.status == 422, refused
        assert f"not a {field}" in refused.message, refused
