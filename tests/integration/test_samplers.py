"""The sync sampler (tests/samplers.py) against the real API server: what it reports is harm,
and only harm, for as long as the test runs.

No operand is needed: the test writes the Secret itself, as external-secrets would. Short
watch timeouts make the server end the stream every few seconds, so re-watching runs here
for real; and kube-apiserver sends a BOOKMARK shortly before it ends a watch, so bookmarks
arrive too. 410 Gone cannot be had on demand here (the watch cache serves even
resourceVersion 1 while it holds its initial state), so tests/unit/harness/test_samplers.py covers
the relisting with a fake client.
"""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from dataclasses import replace

import pytest
import pytest_asyncio

from manager.client.kube import Kube
from tests.e2e.operator_process import free_port
from tests.samplers import SyncSampler
from tests.waiting import eventually

NAMESPACE = "eso-it-sampler"
NAME = "sampled"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"
SECRET = f"{SECRETS}/{NAME}"
FIELD_MANAGER = "integration-tests"


def encoded(value: str) -> str:
    return base64.b64encode(value.encode()).decode()


async def create_secret(kube: Kube, value: str) -> None:
    await kube.create(SECRETS, {"apiVersion": "v1", "kind": "Secret",
                                "metadata": {"name": NAME}, "data": {"k": encoded(value)}},
                      field_manager=FIELD_MANAGER)


async def set_data(kube: Kube, data: dict[str, str | None]) -> None:
    """Merge `data` into the Secret's (None removes a key)."""
    await kube.merge_patch(SECRET, {"data": {key: None if value is None else encoded(value)
                                             for key, value in data.items()}},
                           field_manager=FIELD_MANAGER)


async def delete_secret(kube: Kube) -> None:
    await kube.delete(SECRET)

    async def gone() -> None:
        assert await kube.get(SECRET) is None, "the Secret is still there"

    await eventually(gone, 30)


@pytest_asyncio.fixture(loop_scope="session")
async def secret(kube: Kube) -> AsyncIterator[None]:
    """The sampled Secret, `k: v0`, in a namespace of its own; deleted afterwards."""
    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}",
                     {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
                     field_manager=FIELD_MANAGER)
    await delete_secret(kube)
    await create_secret(kube, "v0")
    yield
    await kube.delete(SECRET)


async def test_bookmarks_and_streams_the_server_ends_are_no_harm_and_lose_nothing(
        kube: Kube, secret: None) -> None:
    sampler = SyncSampler(kube, NAMESPACE, NAME, "k", watch_timeout=3)
    await sampler.start()
    try:
        for value in ("v1", "v2", "v3"):  # one change in each of several streams
            await set_data(kube, {"k": value})
            await asyncio.sleep(3.5)

        async def streams_ended_and_bookmarked() -> None:
            assert sampler.rewatches >= 2, sampler.summary()
            assert sampler.bookmarks >= 1, sampler.summary()

        await eventually(streams_ended_and_bookmarked, 20, what="bookmarks and re-watches")
        await sampler.stop(expect_value="v3")
    finally:
        await sampler.discard()
    assert sampler.harm == []
    # Every change was seen exactly once, in order, across the streams.
    assert sampler.values == ["v0", "v1", "v2", "v3"], sampler.summary()
    assert sampler.versions == 3, sampler.summary()


async def test_emptying_and_deletion_are_reported_and_the_watch_goes_on(
        kube: Kube, secret: None) -> None:
    sampler = SyncSampler(kube, NAMESPACE, NAME, "k")
    await sampler.start()
    try:
        await set_data(kube, {"k": ""})
        await set_data(kube, {"k": "v1"})
        await set_data(kube, {"k": None, "other": "x"})
        await delete_secret(kube)
        await create_secret(kube, "back")
        await sampler.stop(expect_value="back")
    finally:
        await sampler.discard()
    secret_name = f"the synced Secret {NAMESPACE}/{NAME}"
    assert sampler.harm == [f"{secret_name} was emptied (MODIFIED: no 'k')",
                            f"{secret_name} was emptied (MODIFIED: no 'k')",
                            f"{secret_name} was deleted"]
    assert sampler.values == ["v0", "v1", "back"], sampler.summary()


async def test_a_watch_that_ended_fails_the_verdict(kube: Kube, secret: None) -> None:
    """A sampler whose watch ended cannot vouch for what followed: stop() fails, although
    `harm` is empty. Here the API server becomes unreachable for the sampler (its client
    is pointed at a closed port) for longer than it waits."""
    sampler = SyncSampler(kube, NAMESPACE, NAME, "k", watch_timeout=1, max_outage=1.0)
    await sampler.start()
    unreachable = Kube(replace(kube.credentials, server=f"https://127.0.0.1:{free_port()}"))
    sampler.kube = unreachable  # from the next (re-)watch on
    try:
        async def ended() -> None:
            assert not sampler.alive, sampler.summary()

        await eventually(ended, 20, what="the sampler's watch to give up")
        with pytest.raises(AssertionError, match="before the sampler was stopped"):
            await sampler.stop()
    finally:
        await sampler.discard()
        await unreachable.close()
    assert sampler.harm == []
    assert sampler.retries >= 1, sampler.summary()
