"""Samplers: something a user relies on, watched for the whole of a test, that must never break.

`AdmissionSampler` stands for every team's writes: every ExternalSecret and SecretStore write
goes through the operand's validating webhook (failurePolicy Fail by default), so a webhook
that is down or untrusted refuses them all. It asks the API server for server-side dry-run
creates of a SecretStore (the webhook is called, nothing is stored) on a fixed schedule, from
one or more staggered streams, and counts the refusals, with their answers, and the longest
stretch during which every attempt was refused. "0 refused" is a figure only if the sampler
could see: it proves at both ends of its window and with every tenth attempt that its
requests reach the webhook (the webhook must refuse a store only it refuses), and fails
unless at least half the attempts its rate promises were answered and it never went longer
than `MAX_START_INTERVAL` without starting one.

`SyncSampler` watches one synced Secret (a Secret that external-secrets writes from its
store) from `start()` to `stop()` and reports every deletion and every version without its
key in `harm`. The upgrade tests use it across an upgrade; disruption tests may use it across
any other event.

The watch is only evidence while it runs, so it does not stop when the stream does:

- BOOKMARK events (kube-apiserver sends one about every minute, and shortly before a watch
  times out) carry only a resourceVersion: they move the resume point and are no harm;
- a stream the server ends (its `timeoutSeconds`) is watched again from the last
  resourceVersion seen, so no event in between is missed;
- 410 Gone (that resourceVersion is no longer in the server's window) relists: the Secret
  must still exist, be the same object (uid) and hold its key, then the watch resumes from
  the listing;
- a transient error (connection lost, 5xx, 429) is retried from the last resourceVersion
  for up to `max_outage` seconds.

Anything else ends the watch, and `stop()` then fails: a sampler that died early cannot
testify that nothing happened. `stop(expect_value=...)` also fails unless the watch saw the
key take that value, which proves it was still following the Secret at the end.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import math
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from manager.client.kube import ApiError, Kube

GONE = 410


async def stopped(task: asyncio.Task[None] | None) -> None:
    """Cancel a sampler's background task and wait until it has ended."""
    assert task is not None, "the sampler was never started"
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


class SyncSampler:
    """A synced Secret `namespace/name` that must never be deleted or lose `key`."""

    def __init__(self, kube: Kube, namespace: str, name: str, key: str, *,
                 watch_timeout: int = 300, max_outage: float = 60.0):
        self.kube = kube
        self.namespace = namespace
        self.name = name
        self.key = key
        self.watch_timeout = watch_timeout
        """The `timeoutSeconds` of each watch request: the server ends the stream then."""
        self.max_outage = max_outage
        self.harm: list[str] = []
        """Each deletion or emptying seen, in order."""
        self.versions = 0
        """Versions of the Secret seen (ADDED, MODIFIED, DELETED events; not bookmarks)."""
        self.values: list[str] = []
        """The key's values seen, in order, each change once (the start's value first)."""
        self.bookmarks = 0
        self.rewatches = 0
        """Streams the server ended that were watched again from the last resourceVersion."""
        self.relists = 0
        """410 Gone answers that made the sampler list the Secret again."""
        self.retries = 0
        """Transient errors after which the watch resumed."""
        self._uid = ""
        self._task: asyncio.Task[None] | None = None
        self._started = self._ended = 0.0

    @property
    def _collection(self) -> str:
        return f"/api/v1/namespaces/{self.namespace}/secrets"

    @property
    def _selector(self) -> str:
        return f"metadata.name={self.name}"

    def __str__(self) -> str:
        return f"the synced Secret {self.namespace}/{self.name}"

    async def start(self, resource_version: str | None = None) -> None:
        """List the Secret (it must exist and hold its key), then watch it from the listing,
        or from `resource_version` if given (an older point: what happened since counts)."""
        secret, version = await self._list()
        assert secret is not None, f"{self} does not exist yet"
        assert self._value(secret), f"{self} has no key {self.key!r} yet"
        self._uid = secret["metadata"]["uid"]
        self._record_value(secret)
        self._started = time.monotonic()
        self._task = asyncio.create_task(self._follow(resource_version or version),
                                         name=f"sampler {self.namespace}/{self.name}")

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    async def stop(self, *, expect_value: str | None = None, timeout: float = 10.0) -> None:
        """Stop watching. Fails if the watch ended before (it saw nothing since), or, with
        `expect_value`, if it did not see the key take that value (within `timeout`: the
        caller may have read it a moment before its event arrived). `harm` is the caller's
        to judge (a test may cause harm on purpose)."""
        task, self._task = self._task, None
        assert task is not None, f"the sampler of {self} was never started"
        deadline = time.monotonic() + timeout
        while (expect_value is not None and expect_value not in self.values
               and not task.done() and time.monotonic() < deadline):
            await asyncio.sleep(0.05)
        if task.done():
            error = task.exception() if not task.cancelled() else None
            raise AssertionError(
                f"the watch of {self} ended {self._ended - self._started:.1f} s after its start "
                f"and {time.monotonic() - self._ended:.1f} s before the sampler was stopped, "
                f"so it saw nothing in between: {error!r} ({self.summary()})") from error
        await stopped(task)
        if expect_value is not None:
            assert expect_value in self.values, (
                f"the watch of {self} never saw {self.key}={expect_value!r} "
                f"({self.summary()}; values {self.values})")

    async def discard(self) -> None:
        """Stop watching without a verdict (a test that failed before `stop()`)."""
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def summary(self) -> str:
        return (f"{self.versions} versions, {self.bookmarks} bookmarks, {self.rewatches} "
                f"re-watches, {self.relists} relists, {self.retries} retries")

    # --- the watch --------------------------------------------------------------------------

    async def _follow(self, version: str) -> None:
        try:
            await self._watch(version)
        finally:
            self._ended = time.monotonic()

    async def _watch(self, version: str) -> None:
        resume: str | None = version  # None: relist first (after 410 Gone)
        outage_since: float | None = None
        while True:
            try:
                if resume is None:
                    resume = await self._relist()
                async for event in self.kube.watch(
                        self._collection, resource_version=resume,
                        field_selector=self._selector, timeout_seconds=self.watch_timeout):
                    outage_since = None
                    resume = str(event.object.get("metadata", {}).get("resourceVersion")
                                 or resume)
                    self._observe(event.type, event.object)
                self.rewatches += 1  # the server ended the stream
                outage_since = None
            except ApiError as error:
                if error.status == GONE:
                    self.relists += 1
                    resume = None
                    continue
                if not error.transient:
                    raise
                now = time.monotonic()
                outage_since = now if outage_since is None else outage_since
                if now - outage_since > self.max_outage:
                    raise
                self.retries += 1
                await asyncio.sleep(0.5)

    def _observe(self, kind: str, secret: dict[str, Any]) -> None:
        if kind == "BOOKMARK":  # a resourceVersion and nothing else
            self.bookmarks += 1
            return
        self.versions += 1
        if kind == "DELETED":
            self.harm.append(f"{self} was deleted")
            return
        uid = secret.get("metadata", {}).get("uid", "")
        if kind == "ADDED" and uid != self._uid:
            self._uid = uid  # re-created: its deletion was reported already
        if not self._value(secret):
            self.harm.append(f"{self} was emptied ({kind}: no {self.key!r})")
            return
        self._record_value(secret)

    async def _relist(self) -> str:
        """After 410 Gone: what the events we missed left behind; the listing's version."""
        secret, version = await self._list()
        if secret is None:
            self.harm.append(f"{self} was deleted (missing when relisted after 410 Gone)")
            return version
        if secret["metadata"]["uid"] != self._uid:
            self.harm.append(f"{self} was deleted and re-created (relisted after 410 Gone)")
            self._uid = secret["metadata"]["uid"]
        if not self._value(secret):
            self.harm.append(f"{self} was emptied (relisted after 410 Gone: no {self.key!r})")
        else:
            self._record_value(secret)
        return version

    async def _list(self) -> tuple[dict[str, Any] | None, str]:
        """The Secret (None if missing) and the listing's resourceVersion."""
        listing = await self.kube.list(self._collection, field_selector=self._selector)
        items = listing.get("items") or []
        return (items[0] if items else None), str(listing["metadata"]["resourceVersion"])

    def _value(self, secret: dict[str, Any]) -> str:
        encoded = (secret.get("data") or {}).get(self.key) or ""
        return base64.b64decode(encoded).decode(errors="replace")

    def _record_value(self, secret: dict[str, Any]) -> None:
        value = self._value(secret)
        if not self.values or self.values[-1] != value:
            self.values.append(value)


URL = re.compile(r'"https?://[^"]*"')  # the webhook's URL in an answer: the same every time
STORE = {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
         "metadata": {"name": "admission-sample"},
         "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}}}
# A store only the webhook refuses (the CRD's schema allows an empty value; the fake
# provider's validation does not): its refusal proves the request reached the webhook.
REFUSED_STORE = {**STORE, "spec": {"provider": {"fake": {"data": [{"key": "k", "value": ""}]}}}}
MAX_START_INTERVAL = 0.3
"""The longest a sampler may go without starting an attempt. A refusal window shorter than
the spacing of attempts can pass unseen; a longer pause means that the sampler was not
sampling (its event loop blocked by a synchronous call, or every task waiting for answers)."""
TIMED_TEST = {"marked": True}
"""Whether the running test is marked `timing` (tests/conftest.py sets it for each test). An
AdmissionSampler opens only in such a test: hack/run-tests.py runs them in a lane of their
own, at a higher priority than the other lanes (one outside it was starved in CI: 0.40 s
without an attempt)."""
MIN_ATTEMPT_SHARE = 0.5
"""The share of the attempts its rate promises over the window that must be answered."""
PROBE_EVERY = 10
"""Every tenth attempt is a probe: the store only the webhook refuses. Its refusal by the
webhook proves, all through the window, that the attempts reach the webhook; a probe the API
server admits means nothing checked it (a configuration that stopped matching, or
`failurePolicy: Ignore` while the webhook is down)."""
WEBHOOK_DENIAL = re.compile(r"admission webhook .* denied the request")
KEEPALIVE_RACE = re.compile(
    r"failed to call webhook: Post <url>: (?:EOF|http: server closed idle connection|"
    r"(?:read tcp \S+: (?:read: )?)?(?:use of closed network connection|"
    r"connection reset by peer))$")
"""A refusal no rendering prevents: kube-apiserver sent the admission over a pooled
keep-alive connection to a webhook process at the moment that process, stopping after its
preStop, closed its idle connections (Go's `Server.Shutdown`). The POST is not retried
(not idempotent). Each costs one request; the stretch of refusals stays within
`KEEPALIVE_RACE_GAP`. docs/resilience.md, "What no rendering prevents"."""
KEEPALIVE_RACE_GAP = 0.25
"""The longest run of refusals (seconds) that single keep-alive races can make: at an attempt
every 33 ms, a few attempts. An endpoint that stayed in the Service, a pod without preStop,
a missing budget cost seconds and answer otherwise ("no endpoints available", "connection
refused")."""
MAX_IN_FLIGHT = 64
"""Attempts waiting for an answer at once, at most. kube-apiserver, while it starts, accepts
connections and answers nothing for 0.6 s, 1.7 s on a loaded machine: at an attempt every
33 ms that is 18 to 51 in flight, more than the operator's client allows (16); `own_client`
makes room for them."""


@dataclass
class AdmissionFigures:
    """Counts and times of one sampling window. The sampler reports each attempt's start and
    answer with `time.monotonic()`; the arithmetic is here, apart from the requests."""

    attempts: int = 0
    """Attempts answered in the window: admitted, refused, or probes (`PROBE_EVERY`)."""
    refused: int = 0
    """Attempts the API server refused without the webhook deciding (it was not reached, or
    did not answer): what a team's write would have suffered."""
    checked: int = 0
    """Probes the webhook itself refused: the webhook decided."""
    unchecked: int = 0
    """Probes the API server admitted: nothing checked them."""
    answers: Counter[str] = field(default_factory=Counter)
    longest_gap: float = 0.0
    """Seconds from the first refusal of a run of refusals to the next admission."""
    largest_interval: float = 0.0
    """The longest time without an attempt starting: between two consecutive starts, from
    the window's opening to the first start, and from the last start to its close."""
    window: float = 0.0
    """Seconds from the window's opening to its close."""
    rate: float = 0.0
    """Attempts per second the sampler aims at (all its tasks together)."""
    last_admitted: float | None = None
    """When (time.monotonic) the last admission was answered."""
    last_checked: float | None = None
    """When (time.monotonic) the webhook last refused a probe."""
    _opened: float | None = field(default=None, repr=False)
    _last_start: float | None = field(default=None, repr=False)
    _refused_since: float | None = field(default=None, repr=False)

    def __str__(self) -> str:
        answers = "; ".join(f"{n}x {text}" for text, n in self.answers.most_common(3))
        return (f"{self.refused} of {self.attempts} admissions refused, longest gap "
                f"{self.longest_gap:.2f} s" + (f" ({answers})" if answers else "")
                + f"; at most {self.largest_interval:.2f} s between attempts"
                + (f" in {self.window:.1f} s" if self.window else " so far")
                + f"; {self.checked} probes refused by the webhook, {self.unchecked} admitted")

    def open(self, now: float, rate: float) -> None:
        self._opened = self._last_start = now
        self.rate = rate

    def started(self, now: float) -> None:
        """An attempt starts (it counts once answered)."""
        assert self._last_start is not None, "the window is not open"
        self.largest_interval = max(self.largest_interval, now - self._last_start)
        self._last_start = now

    def refused_with(self, now: float, answer: str) -> None:
        self.attempts += 1
        self.refused += 1
        self.answers[answer] += 1
        if self._refused_since is None:
            self._refused_since = now

    def admitted(self, now: float) -> None:
        self.attempts += 1
        self.last_admitted = now
        self._gap_ends(now)

    def probe_refused_by_the_webhook(self, now: float) -> None:
        self.attempts += 1
        self.checked += 1
        self.last_checked = now
        self._gap_ends(now)  # the webhook answered: a write would have been decided

    def probe_admitted(self, now: float) -> None:
        self.attempts += 1
        self.unchecked += 1
        self._gap_ends(now)

    def close(self, now: float) -> None:
        """The window closes: a gap still open ends here, and so does the last interval."""
        assert self._opened is not None, "never opened"
        assert self._last_start is not None
        self.window = now - self._opened
        self.largest_interval = max(self.largest_interval, now - self._last_start)
        self._gap_ends(now)

    def _gap_ends(self, now: float) -> None:
        if self._refused_since is not None:
            self.longest_gap = max(self.longest_gap, now - self._refused_since)
            self._refused_since = None

    def blind_spots(self) -> list[str]:
        """Why these figures cannot testify: too few attempts answered, too long without one,
        or probes that nothing checked."""
        expected = self.window * self.rate
        problems = []
        if self.attempts < MIN_ATTEMPT_SHARE * expected:
            problems.append(f"{self.attempts} attempts answered in {self.window:.1f} s, fewer "
                            f"than {MIN_ATTEMPT_SHARE:.0%} of the {expected:.0f} its rate "
                            "promises")
        if self.largest_interval > MAX_START_INTERVAL:
            problems.append(f"{self.largest_interval:.2f} s without an attempt (at most "
                            f"{MAX_START_INTERVAL} s)")
        if self.unchecked:
            problems.append(f"{self.unchecked} probes that only the webhook refuses were "
                            "admitted: the attempts did not reach it")
        return problems

    def keepalive_races(self) -> int:
        """Refusals that were the keep-alive race (`KEEPALIVE_RACE`)."""
        return sum(n for answer, n in self.answers.items() if KEEPALIVE_RACE.search(answer))

    def assert_refused_only_by_keepalive_races(self) -> None:
        """No admission refused, but for the keep-alive race: every refusal answers so, and
        none of them joins others into a stretch longer than `KEEPALIVE_RACE_GAP`."""
        others = {answer: n for answer, n in self.answers.items()
                  if not KEEPALIVE_RACE.search(answer)}
        assert not others, f"admissions refused: {others} ({self})"
        assert self.longest_gap <= KEEPALIVE_RACE_GAP, (
            f"keep-alive races made a stretch of refusals of {self.longest_gap:.2f} s (at most "
            f"{KEEPALIVE_RACE_GAP} s: one request each) ({self})")

    def assert_could_see(self) -> None:
        """Fails unless the sampler sampled densely enough for "N refused" to mean that: a
        sampler that was starved saw nothing, and its 0 is no figure."""
        problems = self.blind_spots()
        assert not problems, f"the admission sampler could not see: {'; '.join(problems)} ({self})"


async def webhook_decides(kube: Kube, path: str) -> None:
    """The webhook answers the sampler's requests: a valid store is admitted, and one that only
    the webhook refuses is refused by it. Without this, a sampler whose requests no longer
    reach the webhook (a configuration that stopped matching, `failurePolicy: Ignore` with
    the webhook gone) would count admissions that nothing checked."""
    await kube.request("POST", path, body=STORE, query={"dryRun": "All"}, timeout=10)
    try:
        await kube.request("POST", path, body=REFUSED_STORE, query={"dryRun": "All"},
                           timeout=10)
    except ApiError as error:
        refusal = error.message
    else:
        raise AssertionError(f"the webhook did not refuse an invalid store at {path}: the "
                             "sampler's requests do not reach it")
    if not WEBHOOK_DENIAL.search(refusal):
        raise AssertionError(f"an invalid store was refused, but not by the webhook: {refusal}")


@contextlib.contextmanager
def first_on_the_cores() -> Iterator[bool]:
    """The calling thread (the sampler's event loop) runs before every ordinary thread of the
    machine while the window is open: real-time round-robin at the lowest real-time priority.
    The instrument must not be starved by the load it is run beside, and on two cores the
    other lanes of the suite, and the stack under test itself, were enough to starve it even
    at nice -10 (0.42 to 0.67 s without an attempt in 4 of 32 timing tests, 2026-11-28). Only
    this thread: the processes and threads it starts are ordinary (SCHED_RESET_ON_FORK), so
    the stack under test gets no help, and the kernel keeps 5 % of each second for the rest
    (`sched_rt_runtime_us`). Without the privilege (not root) the thread stays ordinary and
    yields False; a starved window still fails its test."""
    try:
        os.sched_setscheduler(0, os.SCHED_RR | os.SCHED_RESET_ON_FORK, os.sched_param(1))
    except OSError:
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


class AdmissionSampler:
    """Dry-run SecretStore creates in `namespace` until stopped: `concurrency` staggered
    streams of one attempt every `interval` seconds, so together one attempt every
    interval/concurrency (a short refusal window is hit more often than by one stream).

    The attempts start on that schedule whether or not earlier ones were answered (each is a
    task of its own; at most `MAX_IN_FLIGHT` at once): a sampler that waited for each answer
    would sample least when the server is slowest, as the API server is while it starts,
    and so miss what happens then.

    While the window is open, its event loop's thread runs first on the cores
    (`first_on_the_cores`). The window proves the sampler could see, at both ends and in
    between: it opens and closes with `webhook_decides`, every `PROBE_EVERY`th attempt is a
    probe the webhook must refuse, and on a normal exit `AdmissionFigures.assert_could_see`
    fails when too few attempts were answered, none started for too long, or a probe was
    admitted. Give it a client of its own (`own_client`)."""

    def __init__(self, kube: Kube, namespace: str, interval: float = 0.2, *,
                 concurrency: int = 1):
        self.kube = kube
        self.path = f"/apis/external-secrets.io/v1/namespaces/{namespace}/secretstores"
        self.interval = interval
        self.concurrency = concurrency
        self.figures = AdmissionFigures()
        self._dispatcher: asyncio.Task[None] | None = None
        self._attempts: set[asyncio.Task[None]] = set()
        self._in_flight = asyncio.Semaphore(MAX_IN_FLIGHT)
        self._errors: list[BaseException] = []
        """What ended an attempt other than an answer (a bug, not a refusal)."""
        self._priority = contextlib.ExitStack()

    async def __aenter__(self) -> AdmissionSampler:
        assert TIMED_TEST["marked"], ("an AdmissionSampler runs only in a test marked "
                                      "`timing` (tests/samplers.py, TIMED_TEST)")
        await webhook_decides(self.kube, self.path)  # before the window: a refusal is no figure
        self.figures = AdmissionFigures()
        self._priority.enter_context(first_on_the_cores())
        opened = time.monotonic()
        self.figures.open(opened, self.concurrency / self.interval)
        self._dispatcher = asyncio.create_task(self._dispatch(opened),
                                               name="admission sampler")
        return self

    async def __aexit__(self, failed: type[BaseException] | None, *_: object) -> None:
        running = [self._dispatcher, *self._attempts]
        for task in running:  # no answer is recorded after this: the window closes now
            if task is not None:
                task.cancel()
        self.figures.close(time.monotonic())
        self._priority.close()
        for task in running:
            await stopped(task)
        if self._errors:
            raise self._errors[0]
        if failed is None:
            self.figures.assert_could_see()
            await webhook_decides(self.kube, self.path)

    async def sample(self, probe: bool = False) -> None:
        """One attempt, counted when answered; a probe sends the store only the webhook
        refuses."""
        self.figures.started(time.monotonic())
        try:
            await self.kube.request("POST", self.path, body=REFUSED_STORE if probe else STORE,
                                    query={"dryRun": "All"}, timeout=10)
        except ApiError as error:
            now = time.monotonic()
            if probe and WEBHOOK_DENIAL.search(error.message):
                self.figures.probe_refused_by_the_webhook(now)
                return
            answer = URL.sub("<url>", error.message)
            self.figures.refused_with(now, f"{error.status} {answer[:240]}")
            return
        now = time.monotonic()
        if probe:
            self.figures.probe_admitted(now)
        else:
            self.figures.admitted(now)

    async def _dispatch(self, first: float) -> None:
        """Start an attempt in every slot of the schedule; a slot missed (the event loop was
        busy, or `MAX_IN_FLIGHT` attempts wait for answers) is skipped, not made up for."""
        spacing = self.interval / self.concurrency
        slot = first
        for number in itertools.count(1):
            await asyncio.sleep(max(0.0, slot - time.monotonic()))
            await self._in_flight.acquire()
            attempt = asyncio.create_task(self.sample(probe=number % PROBE_EVERY == 0))
            self._attempts.add(attempt)
            attempt.add_done_callback(self._answered)
            late = time.monotonic() - slot
            slot += spacing * max(1, math.ceil(late / spacing))

    def _answered(self, attempt: asyncio.Task[None]) -> None:
        self._attempts.discard(attempt)
        self._in_flight.release()
        error = None if attempt.cancelled() else attempt.exception()
        if error is not None:
            self._errors.append(error)


class _SamplerClient(Kube):
    def __init__(self, kube: Kube, user_agent: str):
        super().__init__(kube.credentials, user_agent=user_agent)
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)  # the operator's client allows 16


def own_client(kube: Kube, user_agent: str = "admission-sampler") -> Kube:
    """A client for an AdmissionSampler: the credentials of `kube`, a session of its own and
    room for `MAX_IN_FLIGHT` requests, so that the attempts in flight neither wait in the
    client nor hold up the test's own requests (close it after)."""
    return _SamplerClient(kube, user_agent)
