"""The operator's client under load, against the real API server: many requests at once
share a few connections, and each connection's TLS read buffer is small (its memory is the
benchmark's RSS figure, docs/performance.md)."""

from __future__ import annotations

import asyncio
import asyncio.sslproto
from typing import Any

import aiohttp
import pytest

from manager.client.kube import MAX_CONCURRENT_REQUESTS, TLS_READ_BUFFER, Kube
from tests.conftest import Cluster

REQUESTS = 5 * MAX_CONCURRENT_REQUESTS


async def test_requests_made_at_once_wait_for_a_slot(
        cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pass may ask for dozens of objects at once (an apply stage, the watches' first
    listings); no more than MAX_CONCURRENT_REQUESTS are in flight, so no more connections
    open, and every one is answered."""
    in_flight, peak = 0, 0
    original = aiohttp.ClientSession._request

    async def counting(self: aiohttp.ClientSession, *args: Any,
                       **kwargs: Any) -> aiohttp.ClientResponse:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        try:
            response = await original(self, *args, **kwargs)
            await response.read()  # the slot is held until the body is in
            return response
        finally:
            in_flight -= 1

    monkeypatch.setattr(aiohttp.ClientSession, "_request", counting)
    kube = Kube.connect(cluster.kubeconfig)
    try:
        answers = await asyncio.gather(*(kube.get("/api/v1/namespaces/default")
                                         for _ in range(REQUESTS)))
    finally:
        await kube.close()
    assert all(a is not None and a["metadata"]["name"] == "default" for a in answers)
    assert 1 < peak <= MAX_CONCURRENT_REQUESTS, peak


def test_tls_connections_read_into_a_small_buffer() -> None:
    """asyncio's default is 256 KiB per connection, resident while it lives."""
    assert asyncio.sslproto.SSLProtocol.max_size == TLS_READ_BUFFER <= 64 * 1024
