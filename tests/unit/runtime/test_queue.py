"""ReconcileQueue: bursts coalesce, requests during a pass yield exactly one more pass,
delayed requests keep the earliest due time and are made obsolete by any pass.

Timing: the assertions are about which batches come out and with which reasons, never about
how fast. Waits that must time out use generous margins around short delays.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools

from manager.runtime.queue import DEBOUNCE_SECONDS, ReconcileQueue

# Longer than any delayed request below: enough for a timer that should fire to fire.
SETTLE = 0.5


async def test_a_burst_yields_one_batch_with_every_reason() -> None:
    queue = ReconcileQueue(debounce=0)
    for number in range(10):
        queue.request(f"event {number}")
    queue.request("event 3")  # a repeated reason is kept once
    batch = await queue.next_batch()
    assert batch == frozenset(f"event {number}" for number in range(10))
    assert not queue.pending


async def test_requests_during_the_debounce_join_the_batch() -> None:
    queue = ReconcileQueue(debounce=SETTLE)
    queue.request("first")
    batch = asyncio.create_task(queue.next_batch())
    for _ in range(3):  # the worker is now waiting out the debounce
        await asyncio.sleep(0)
    assert not batch.done()
    queue.request("second")
    assert await batch == {"first", "second"}
    assert not queue.pending


async def test_requests_during_a_pass_yield_exactly_one_more_batch() -> None:
    queue = ReconcileQueue(debounce=0)
    queue.request("start")
    assert await queue.next_batch() == {"start"}
    # ... a pass runs; meanwhile three triggers arrive.
    for reason in ("a", "b", "c"):
        queue.request(reason)
    assert queue.pending
    assert await queue.next_batch() == {"a", "b", "c"}
    assert not queue.pending


async def test_a_worker_loop_coalesces_requests_made_while_it_works() -> None:
    queue = ReconcileQueue(debounce=0)
    batches: list[frozenset[str]] = []
    in_pass = asyncio.Event()
    finish_pass = asyncio.Event()

    async def worker() -> None:
        while True:
            batches.append(await queue.next_batch())
            in_pass.set()
            await finish_pass.wait()
            finish_pass.clear()

    task = asyncio.create_task(worker())
    try:
        queue.request("start")
        await in_pass.wait()
        in_pass.clear()
        for number in range(5):
            queue.request(f"during {number}")
        finish_pass.set()
        await in_pass.wait()  # the second pass has started
        in_pass.clear()
        finish_pass.set()
        await asyncio.sleep(SETTLE)  # time for a spurious third pass to show up
        assert batches == [{"start"}, {f"during {number}" for number in range(5)}]
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_a_delayed_request_comes_after_its_delay() -> None:
    queue = ReconcileQueue(debounce=0)
    loop = asyncio.get_running_loop()
    started = loop.time()
    queue.request_after(0.2, "retry")
    assert not queue.pending
    assert await queue.next_batch() == {"retry"}
    assert loop.time() - started >= 0.19  # never early (the event loop's clock)


async def test_the_earliest_delayed_request_wins() -> None:
    queue = ReconcileQueue(debounce=0)
    queue.request_after(0.05, "soon")
    queue.request_after(SETTLE * 4, "later")  # ignored: one is already due earlier
    assert await asyncio.wait_for(queue.next_batch(), SETTLE * 2) == {"soon"}


async def test_an_earlier_delayed_request_replaces_a_later_one() -> None:
    queue = ReconcileQueue(debounce=0)
    queue.request_after(0.3, "later")
    queue.request_after(0.05, "soon")
    assert await queue.next_batch() == {"soon"}
    await asyncio.sleep(SETTLE)  # past the replaced request's due time
    assert not queue.pending


async def test_any_pass_makes_a_pending_delayed_request_obsolete() -> None:
    queue = ReconcileQueue(debounce=0)
    queue.request_after(0.2, "retry")
    queue.request("event")
    assert await queue.next_batch() == {"event"}
    await asyncio.sleep(SETTLE)
    assert not queue.pending


async def test_a_delayed_request_can_be_scheduled_again_after_it_fired() -> None:
    queue = ReconcileQueue(debounce=0)
    queue.request_after(0.05, "retry 1")
    assert await queue.next_batch() == {"retry 1"}
    queue.request_after(0.05, "retry 2")
    assert await asyncio.wait_for(queue.next_batch(), SETTLE * 4) == {"retry 2"}


async def test_a_delayed_request_firing_during_the_debounce_joins_the_batch() -> None:
    queue = ReconcileQueue(debounce=SETTLE)
    queue.request_after(0.05, "retry")
    queue.request("event")
    assert await queue.next_batch() == {"event", "retry"}
    assert not queue.pending


async def test_the_default_debounce_still_coalesces() -> None:
    queue = ReconcileQueue()
    assert DEBOUNCE_SECONDS > 0
    queue.request("a")
    batch = asyncio.create_task(queue.next_batch())
    await asyncio.sleep(0)
    queue.request("b")
    assert await batch == {"a", "b"}


async def test_passes_start_at_most_five_a_second_however_eager_the_requests() -> None:
    queue = ReconcileQueue(debounce=0.0, min_interval=0.2)
    loop = asyncio.get_running_loop()
    starts = []
    for _ in range(4):
        queue.request("fight")
        await queue.next_batch()
        starts.append(loop.time())
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert min(gaps) >= 0.19, gaps


async def test_after_a_quiet_spell_a_request_is_served_at_once() -> None:
    queue = ReconcileQueue(debounce=0.02, min_interval=0.2)
    queue.request("first")
    await queue.next_batch()
    await asyncio.sleep(0.3)  # longer than the minimum interval: no extra wait
    loop = asyncio.get_running_loop()
    asked = loop.time()
    queue.request("repair")
    await queue.next_batch()
    assert loop.time() - asked < 0.1
