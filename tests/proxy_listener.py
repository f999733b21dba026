"""A stand-in for a forward proxy that only counts: every TCP connection is accepted, counted
and closed without an answer (a client that used it would see its request fail).

For tests that check which traffic does *not* go through a configured proxy.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass


@dataclass
class CountingListener:
    host: str
    port: int
    connections: int = 0

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def _accepted(self, _: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        writer.close()


@asynccontextmanager
async def counting_listener(host: str = "127.0.0.1") -> AsyncIterator[CountingListener]:
    """A listener on a free port of `host`, closed on exit."""
    listener = CountingListener(host, 0)
    server = await asyncio.start_server(listener._accepted, host, 0)
    listener.port = server.sockets[0].getsockname()[1]
    try:
        yield listener
    finally:
        server.close()
        await server.wait_closed()
