"""The sync sampler's watch loop against a scripted client: where each watch resumes, and
what a relist after 410 Gone reports. (tests/integration/test_samplers.py runs it against
the real API server; 410 cannot be had there on demand.)"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest

from manager.kube import ApiError, Kube, WatchEvent
from tests.samplers import SyncSampler

GONE = ApiError(410, "Expired", "too old resource version", "WATCH", "/api/v1/...")
NAME = "the synced Secret ns/synced"


def secret(value: str | None, version: str, uid: str = "a") -> dict[str, Any]:
    data = {} if value is None else {"k": base64.b64encode(value.encode()).decode()}
    return {"metadata": {"name": "synced", "uid": uid, "resourceVersion": version},
            "data": data}


def event(kind: str, obj: dict[str, Any]) -> WatchEvent:
    return WatchEvent(kind, obj)


def bookmark(version: str) -> WatchEvent:
    return WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": version}})


class ScriptedKube:
    """Answers each list with the next listing (a Secret or None, and the listing's version)
    and each watch with the next stream: its events then its end, or an error. With the
    streams used up, a watch stays open and quiet."""

    def __init__(self, listings: list[tuple[dict[str, Any] | None, str]],
                 streams: list[list[WatchEvent] | ApiError]):
        self.listings = listings
        self.streams = streams
        self.watched_from: list[str] = []

    async def list(self, path: str, *, field_selector: str | None = None) -> dict[str, Any]:
        assert (path, field_selector) == ("/api/v1/namespaces/ns/secrets", "metadata.name=synced")
        found, version = self.listings.pop(0)
        return {"metadata": {"resourceVersion": version}, "items": [found] if found else []}

    async def watch(self, path: str, *, resource_version: str, field_selector: str | None,
                    timeout_seconds: int) -> AsyncIterator[WatchEvent]:
        assert (path, field_selector) == ("/api/v1/namespaces/ns/secrets", "metadata.name=synced")
        assert timeout_seconds == 300
        self.watched_from.append(resource_version)
        if not self.streams:
            await asyncio.Event().wait()
        stream = self.streams.pop(0)
        if isinstance(stream, ApiError):
            raise stream
        for item in stream:
            yield item


async def sample(kube: ScriptedKube, *, expect_value: str | None = None) -> SyncSampler:
    """Start a sampler, let it play the script, stop it."""
    sampler = SyncSampler(cast(Kube, kube), "ns", "synced", "k", max_outage=5.0)
    await sampler.start()
    for _ in range(100):
        if not kube.streams:
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    await sampler.stop(expect_value=expect_value, timeout=1.0)
    return sampler


async def test_an_ended_stream_is_watched_again_from_the_last_version_a_bookmark_too() -> None:
    kube = ScriptedKube([(secret("v0", "10"), "10")], [
        [event("MODIFIED", secret("v1", "11")), bookmark("15")],
        [bookmark("16"), event("MODIFIED", secret("v2", "17"))],
    ])
    sampler = await sample(kube, expect_value="v2")
    assert kube.watched_from == ["10", "15", "17"]
    assert (sampler.harm, sampler.values) == ([], ["v0", "v1", "v2"])
    assert (sampler.versions, sampler.bookmarks, sampler.rewatches) == (2, 2, 2)


async def test_410_gone_relists_and_resumes_from_the_listing() -> None:
    kube = ScriptedKube([(secret("v0", "10"), "10"), (secret("v1", "30"), "31")],
                        [GONE, [event("MODIFIED", secret("v2", "32"))]])
    sampler = await sample(kube, expect_value="v2")
    assert kube.watched_from == ["10", "31", "32"]
    assert (sampler.harm, sampler.values, sampler.relists) == ([], ["v0", "v1", "v2"], 1)


@pytest.mark.parametrize(("relisted", "harm"), [
    (None, f"{NAME} was deleted (missing when relisted after 410 Gone)"),
    (secret("v1", "30", uid="b"), f"{NAME} was deleted and re-created (relisted after 410 Gone)"),
    (secret("", "30"), f"{NAME} was emptied (relisted after 410 Gone: no 'k')"),
    (secret(None, "30"), f"{NAME} was emptied (relisted after 410 Gone: no 'k')"),
])
async def test_a_relist_reports_what_the_missed_events_left_behind(
        relisted: dict[str, Any] | None, harm: str) -> None:
    kube = ScriptedKube([(secret("v0", "10"), "10"), (relisted, "31")], [GONE])
    sampler = await sample(kube)
    assert sampler.harm == [harm]
    assert kube.watched_from == ["10", "31"]


async def test_a_transient_error_is_retried_from_the_last_version() -> None:
    broken = ApiError(0, "ClientPayloadError", "stream broken", "WATCH", "/api/v1/...")
    kube = ScriptedKube([(secret("v0", "10"), "10")],
                        [[event("MODIFIED", secret("v1", "11"))], broken,
                         [event("MODIFIED", secret("v2", "12"))]])
    sampler = await sample(kube, expect_value="v2")
    assert kube.watched_from == ["10", "11", "11", "12"]
    assert (sampler.harm, sampler.retries) == ([], 1)


async def test_an_error_that_is_not_transient_ends_the_watch_and_fails_the_verdict() -> None:
    forbidden = ApiError(403, "Forbidden", "no", "WATCH", "/api/v1/...")
    kube = ScriptedKube([(secret("v0", "10"), "10")], [forbidden])
    with pytest.raises(AssertionError, match=r"before the sampler was stopped.*Forbidden"):
        await sample(kube)


async def test_deletion_emptying_and_recreation_in_the_stream() -> None:
    kube = ScriptedKube([(secret("v0", "10"), "10")], [[
        event("MODIFIED", secret(None, "11")),
        event("DELETED", secret(None, "12")),
        event("ADDED", secret("back", "13", uid="b")),
    ]])
    sampler = await sample(kube, expect_value="back")
    assert sampler.harm == [f"{NAME} was emptied (MODIFIED: no 'k')", f"{NAME} was deleted"]
    assert sampler.values == ["v0", "back"]
