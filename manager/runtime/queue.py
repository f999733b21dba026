"""One coalescing queue: every trigger lands here, one worker drains it.

A request only marks "a pass is wanted" and remembers why; a burst of ten events before
the worker wakes up yields one pass. Requests that arrive during a pass yield exactly one
more pass after it. A request after a quiet spell starts a pass within `debounce` (20 ms:
enough to gather the events one `kubectl apply` causes), but passes never start closer than
`min_interval` apart, so a writer fighting the operator cannot make it spin. Delayed
requests (retry with backoff) keep only the earliest due time, and any pass that starts
makes a pending delayed request obsolete: the pass will decide again whether it needs a
retry.
"""

from __future__ import annotations

import asyncio

DEBOUNCE_SECONDS = 0.02
MIN_PASS_INTERVAL_SECONDS = 0.2  # at most five passes a second


class ReconcileQueue:
    def __init__(self, debounce: float = DEBOUNCE_SECONDS,
                 min_interval: float = MIN_PASS_INTERVAL_SECONDS):
        self._debounce = debounce
        self._min_interval = min_interval
        self._last_start = float("-inf")
        self._wanted = asyncio.Event()
        self._reasons: set[str] = set()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_due = 0.0

    def request(self, reason: str) -> None:
        """Ask for a pass as soon as possible."""
        self._reasons.add(reason)
        self._wanted.set()

    def request_after(self, delay: float, reason: str) -> None:
        """Ask for a pass in `delay` seconds, unless an earlier one is already due."""
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        if self._timer is not None and self._timer_due <= due:
            return
        self._cancel_timer()
        self._timer_due = due
        self._timer = loop.call_at(due, self.request, reason)

    async def next_batch(self) -> frozenset[str]:
        """Wait until a pass is wanted; the reasons gathered for it."""
        await self._wanted.wait()
        loop = asyncio.get_running_loop()
        # Let the rest of a burst arrive, and keep passes apart.
        await asyncio.sleep(max(self._debounce,
                                self._last_start + self._min_interval - loop.time()))
        self._last_start = loop.time()
        self._wanted.clear()
        self._cancel_timer()
        reasons, self._reasons = frozenset(self._reasons), set()
        return reasons

    @property
    def pending(self) -> bool:
        return self._wanted.is_set()

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
