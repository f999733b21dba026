"""Waiting for the cluster to get somewhere: the one polling helper of the tests, the
benchmark and the demo's checks (async and sync flavours of the same rule)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from manager.client.kube import ApiError

_T = TypeVar("_T")


def _retryable(error: Exception) -> bool:
    """An assertion that does not hold yet, or an API error that may pass: a transient one
    (429 while a new CRD's storage initialises, 5xx) or an object not created yet."""
    return not isinstance(error, ApiError) or error.transient or error.not_found


def _timed_out(what: str, timeout: float, error: Exception) -> AssertionError:
    return AssertionError(f"timed out after {timeout}s waiting for {what}: {error}")


async def eventually(check: Callable[[], Awaitable[_T]], timeout: float = 20.0, *,
                     interval: float = 0.2, what: str = "a check to pass") -> _T:
    """Retry `check` until it returns without an AssertionError or a retryable API error;
    its result."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await check()
        except (AssertionError, ApiError) as error:
            if not _retryable(error):
                raise
            if time.monotonic() > deadline:
                raise _timed_out(what, timeout, error) from error
        await asyncio.sleep(interval)


def wait_for(check: Callable[[], _T], what: str, timeout: float = 60.0,
             interval: float = 0.5) -> _T:
    """`eventually` for checks that block (kubectl, oc)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return check()
        except AssertionError as error:
            if time.monotonic() > deadline:
                raise _timed_out(what, timeout, error) from error
        time.sleep(interval)


async def seconds_until(check: Callable[[], Awaitable[bool]], timeout: float = 60.0,
                        interval: float = 0.01) -> float:
    """Seconds until `check()` is true (the benchmark's stopwatch)."""
    started = time.monotonic()
    async def holds() -> None:
        assert await check(), f"{check} does not hold yet"
    await eventually(holds, timeout, interval=interval, what=str(check))
    return time.monotonic() - started
