"""Samplers: something a user relies on, watched for the whole of a test, that must never break.

`AdmissionSampler` stands for every team's writes: every ExternalSecret and SecretStore write
goes through the operand's validating webhook (failurePolicy Fail by default), so a webhook
that is down or untrusted refuses them all. It asks the API server every `interval` for a
server-side dry-run create of a SecretStore (the webhook is called, nothing is stored) and
counts the refusals, with their answers, and the longest stretch during which every attempt
was refused.

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
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from manager.kube import ApiError, Kube

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


@dataclass
class AdmissionFigures:
    attempts: int = 0
    refused: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    longest_gap: float = 0.0
    """Seconds from the first refusal of a run of refusals to the next admission."""

    def __str__(self) -> str:
        answers = "; ".join(f"{n}x {text}" for text, n in self.answers.most_common(3))
        return (f"{self.refused} of {self.attempts} admissions refused, longest gap "
                f"{self.longest_gap:.2f} s" + (f" ({answers})" if answers else ""))


class AdmissionSampler:
    """Dry-run SecretStore creates in `namespace` every `interval` seconds, until stopped."""

    def __init__(self, kube: Kube, namespace: str, interval: float = 0.2):
        self.kube = kube
        self.path = f"/apis/external-secrets.io/v1/namespaces/{namespace}/secretstores"
        self.interval = interval
        self.figures = AdmissionFigures()
        self._refused_since: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AdmissionSampler:
        await self.sample()  # admitted before the window opens: a refusal here is no figure
        assert self.figures.refused == 0, f"refused before sampling began: {self.figures}"
        self.figures = AdmissionFigures()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        await stopped(self._task)
        if self._refused_since is not None:  # still refusing at the end: the gap is open
            self._gap_ends(time.monotonic())

    async def sample(self) -> None:
        """One attempt, counted."""
        self.figures.attempts += 1
        try:
            await self.kube.request("POST", self.path, body=STORE, query={"dryRun": "All"},
                                    timeout=10)
        except ApiError as error:
            self.figures.refused += 1
            answer = URL.sub("<url>", error.message)
            self.figures.answers[f"{error.status} {answer[:240]}"] += 1
            if self._refused_since is None:
                self._refused_since = time.monotonic()
            return
        if self._refused_since is not None:
            self._gap_ends(time.monotonic())

    def _gap_ends(self, now: float) -> None:
        assert self._refused_since is not None
        self.figures.longest_gap = max(self.figures.longest_gap, now - self._refused_since)
        self._refused_since = None

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            await self.sample()
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))
