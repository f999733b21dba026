"""The samplers against scripted clients. The sync sampler's watch loop: where each watch
resumes, and what a relist after 410 Gone reports (tests/integration/test_samplers.py runs it
against the real API server; 410 cannot be had there on demand). The admission sampler: the
arithmetic of its figures (the longest gap, the largest interval between attempts, the
attempts check) and whether it could see. A scripted client is the right tool for it: a real
API server refuses when its webhook is down, not on a timetable, so refusals at chosen times,
slow answers and requests that miss the webhook cannot be had from it on demand;
tests/disruption runs the sampler against the real one."""

from __future__ import annotations

import asyncio
import base64
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, cast

import pytest

from manager.client.kube import ApiError, Kube, WatchEvent
from tests.samplers import (
    MAX_IN_FLIGHT,
    MAX_START_INTERVAL,
    PROBE_EVERY,
    REFUSED_STORE,
    TIMED_TEST,
    AdmissionFigures,
    AdmissionSampler,
    SyncSampler,
    first_on_the_cores,
)

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


# --- the admission sampler: its arithmetic with explicit times, then the sampler itself -------

WEBHOOK_DENIAL = ('admission webhook "validate.secretstore.external-secrets.io" denied the '
                  "request: at least one value must be set")


def opened(rate: float = 10.0) -> AdmissionFigures:
    figures = AdmissionFigures()
    figures.open(100.0, rate)
    return figures


def test_the_longest_gap_runs_from_the_first_refusal_to_the_next_admission() -> None:
    figures = opened()
    for moment, refused in ((100.1, False), (100.2, True), (100.3, True), (100.7, False),
                            (101.0, True), (101.2, False)):
        figures.started(moment - 0.05)
        if refused:
            figures.refused_with(moment, "500 no endpoints")
        else:
            figures.admitted(moment)
    figures.close(101.3)
    assert figures.longest_gap == pytest.approx(0.5)  # 100.2 to 100.7; then 0.2
    assert (figures.attempts, figures.refused) == (6, 3)
    assert figures.answers == {"500 no endpoints": 3}
    assert figures.last_admitted == 101.2


def test_a_gap_still_open_at_the_close_ends_there() -> None:
    figures = opened()
    figures.started(100.0)
    figures.refused_with(100.1, "0 no answer")
    figures.close(102.1)
    assert figures.longest_gap == pytest.approx(2.0)
    assert figures.last_admitted is None


def test_the_largest_interval_counts_the_window_s_ends_too() -> None:
    figures = opened()
    for moment in (100.1, 100.2, 100.6, 100.7):
        figures.started(moment)
    assert figures.largest_interval == pytest.approx(0.4)
    figures.close(101.2)  # nothing started in the last 0.5 s
    assert figures.largest_interval == pytest.approx(0.5)
    assert figures.window == pytest.approx(1.2)
    late = opened()
    late.started(100.35)  # the first attempt 0.35 s after the opening
    assert late.largest_interval == pytest.approx(0.35)


CALL = ('500 Internal error occurred: failed calling webhook "validate.secretstore.'
        'external-secrets.io": failed to call webhook: Post <url>: ')


def one_refusal(tail: str) -> AdmissionFigures:
    """A window with one refusal answered `CALL + tail`, admitted again 50 ms later."""
    figures = opened()
    figures.refused_with(100.1, CALL + tail)
    figures.admitted(100.15)
    figures.close(101.0)
    return figures


@pytest.mark.parametrize("tail", [
    "EOF", "use of closed network connection", "http: server closed idle connection",
    "read tcp 10.244.0.4:51720->10.244.0.4:10250: read: connection reset by peer"])
def test_single_keepalive_races_are_the_only_refusals_allowed(tail: str) -> None:
    figures = one_refusal(tail)
    assert figures.keepalive_races() == 1
    figures.assert_refused_only_by_keepalive_races()


@pytest.mark.parametrize("tail", [
    'no endpoints available for service "external-secrets-webhook"',
    "dial tcp 10.244.0.4:10250: connect: connection refused",
    "tls: failed to verify certificate: x509: certificate signed by unknown authority"])
def test_a_refusal_other_than_the_keepalive_race_fails(tail: str) -> None:
    figures = one_refusal(tail)
    assert figures.keepalive_races() == 0
    with pytest.raises(AssertionError, match="admissions refused"):
        figures.assert_refused_only_by_keepalive_races()


def test_keepalive_races_that_join_into_a_stretch_fail() -> None:
    figures = opened()
    for moment in (100.1, 100.2, 100.3, 100.4):  # 0.4 s of refusals is an outage, not a race
        figures.refused_with(moment, CALL + "EOF")
    figures.admitted(100.5)
    figures.close(101.0)
    with pytest.raises(AssertionError, match=r"stretch of refusals of 0\.40 s"):
        figures.assert_refused_only_by_keepalive_races()


def evenly(attempts: int, window: float, rate: float) -> AdmissionFigures:
    figures = opened(rate)
    for n in range(attempts):
        moment = 100.0 + (n + 1) * window / (attempts + 1)
        figures.started(moment)
        figures.admitted(moment + 0.01)
    figures.close(100.0 + window)
    return figures


def test_too_few_attempts_for_the_rate_cannot_testify() -> None:
    # 10 s at 20 attempts a second promise 200: half of them is the least that counts.
    evenly(100, 10.0, 20.0).assert_could_see()
    starved = evenly(99, 10.0, 20.0)
    assert starved.largest_interval <= MAX_START_INTERVAL  # only the count is short
    with pytest.raises(AssertionError,
                       match=r"99 attempts answered in 10.0 s, fewer than 50% of the 200"):
        starved.assert_could_see()


def test_a_pause_longer_than_the_maximum_interval_cannot_testify() -> None:
    figures = opened(rate=8.0)  # 4 attempts in 0.55 s are enough for the count
    for moment in (100.05, 100.1, 100.45, 100.5):
        figures.started(moment)
        figures.admitted(moment + 0.01)
    figures.close(100.55)
    assert figures.blind_spots() == [f"0.35 s without an attempt (at most {MAX_START_INTERVAL} s)"]
    with pytest.raises(AssertionError, match="could not see"):
        figures.assert_could_see()


class ScriptedAdmissions:
    """Answers the sampler's dry-run creates: `refusing(seconds since the first request)` says
    whether the webhook is unreachable then (every request refused), `delay` how long each
    answer takes. Otherwise the store that only the webhook refuses is refused as the webhook
    would, unless `webhook` is False (requests that do not reach it), and others admitted."""

    def __init__(self, refusing: Callable[[float], bool] = lambda _: False, *,
                 delay: float = 0.0, webhook: bool = True):
        self.refusing = refusing
        self.delay = delay
        self.webhook = webhook
        self.sent: list[float] = []

    async def request(self, method: str, path: str, *, body: dict[str, Any],
                      query: dict[str, str], timeout: float) -> dict[str, Any]:
        assert (method, query, timeout) == ("POST", {"dryRun": "All"}, 10)
        assert path == "/apis/external-secrets.io/v1/namespaces/ns/secretstores"
        now = time.monotonic()
        self.sent.append(now)
        await asyncio.sleep(self.delay)
        if self.refusing(now - self.sent[0]):
            raise ApiError(500, "InternalError", 'failed calling webhook "x": no endpoints',
                           "POST", path)
        if body == REFUSED_STORE and self.webhook:
            raise ApiError(400, "BadRequest", WEBHOOK_DENIAL, "POST", path)
        return body


async def sampled(kube: ScriptedAdmissions, seconds: float, *, interval: float = 0.06,
                  concurrency: int = 3) -> AdmissionSampler:
    async with AdmissionSampler(cast(Kube, kube), "ns", interval,
                                concurrency=concurrency) as sampler:
        await asyncio.sleep(seconds)
    return sampler


def median_spacing(kube: ScriptedAdmissions) -> float:
    """The median time between two attempts the client received."""
    spacing = sorted(b - a for a, b in zip(kube.sent, kube.sent[1:], strict=False))
    return spacing[len(spacing) // 2]


def policy() -> int:
    return os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK


def test_only_the_sampling_thread_runs_first_and_only_while_the_window_is_open() -> None:
    child = [sys.executable, "-c", "import os; print(os.sched_getscheduler(0))"]
    with first_on_the_cores() as raised:
        assert raised == (os.geteuid() == 0)  # CI runs as root: there it must take effect
        assert policy() == (os.SCHED_RR if raised else os.SCHED_OTHER)
        started = subprocess.run(child, capture_output=True, text=True, check=True)
    assert int(started.stdout) == os.SCHED_OTHER  # what the sampler starts gets no help
    assert policy() == os.SCHED_OTHER


async def test_a_sampler_outside_a_timing_test_refuses_to_open(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(TIMED_TEST, "marked", False)
    kube = ScriptedAdmissions(lambda _: False)
    with pytest.raises(AssertionError, match="marked `timing`"):
        await sampled(kube, 0.1)
    assert kube.sent == []


async def test_staggered_tasks_sample_finer_than_one_and_time_the_refusals() -> None:
    kube = ScriptedAdmissions(lambda since: 0.3 <= since < 0.6)
    figures = (await sampled(kube, 1.0)).figures
    # Three tasks every 60 ms: an attempt every 20 ms, well under one task's 60.
    assert figures.rate == pytest.approx(50.0)
    assert 0.75 * 50 <= figures.attempts <= 50 + 3
    assert figures.largest_interval < MAX_START_INTERVAL
    assert median_spacing(kube) < 0.04  # the tasks stayed staggered (robust to jitter)
    assert 10 <= figures.refused <= 20  # 0.3 s of refusals at 50 a second
    assert figures.longest_gap == pytest.approx(0.3, abs=0.06)


async def test_attempts_start_on_schedule_while_earlier_ones_wait_for_answers() -> None:
    # Each answer takes 0.25 s, twelve times the 20 ms between attempts (as kube-apiserver
    # answers while it starts): the attempts still start every 20 ms.
    kube = ScriptedAdmissions(delay=0.25)
    figures = (await sampled(kube, 1.0)).figures
    assert median_spacing(kube) < 0.03
    assert figures.largest_interval < MAX_START_INTERVAL
    assert figures.attempts >= 0.5 * 50  # those answered by the close: about 0.75 s of them


async def test_answers_slower_than_the_attempts_in_flight_allow_fail_the_window() -> None:
    # 64 attempts in flight at most: with answers taking 2 s, starts stop after 64 x 20 ms
    # until the first answer (about 0.7 s; less on a loaded machine, where the 64 starts
    # themselves take longer, but always more than the 0.3 s the window allows).
    kube = ScriptedAdmissions(delay=2.0)
    with pytest.raises(AssertionError, match=r"could not see: \d+ attempts answered .*; "
                                             r"0\.(3[1-9]|[4-9]\d) s without an attempt"):
        await sampled(kube, 2.2)
    attempts = kube.sent[2:]  # after the two requests that opened the window
    assert attempts[MAX_IN_FLIGHT] - attempts[MAX_IN_FLIGHT - 1] > 0.3  # until an answer


async def blocked(seconds: float) -> None:
    """A sampling window in which the test blocks the event loop for `seconds`."""
    async with AdmissionSampler(cast(Kube, ScriptedAdmissions()), "ns", 0.06, concurrency=3):
        await asyncio.sleep(0.2)
        time.sleep(seconds)  # the blocking call under test
        await asyncio.sleep(0.2)


async def test_a_blocked_event_loop_fails_the_window() -> None:
    """What a synchronous call in the test (a TLS handshake, a subprocess) does to the sampler:
    no attempt starts while it blocks."""
    await blocked(0.1)
    with pytest.raises(AssertionError, match=r"0\.[4-9]\d s without an attempt"):
        await blocked(0.4)


async def test_requests_that_do_not_reach_the_webhook_cannot_open_a_window() -> None:
    with pytest.raises(AssertionError, match="do not reach it"):
        await sampled(ScriptedAdmissions(webhook=False), 0.1)


async def test_every_tenth_attempt_is_a_probe_the_webhook_must_refuse() -> None:
    figures = (await sampled(ScriptedAdmissions(), 1.0)).figures
    assert figures.refused == 0
    assert figures.checked == pytest.approx(figures.attempts / PROBE_EVERY, abs=1)
    assert figures.last_checked is not None


async def test_a_probe_admitted_in_the_window_fails_it() -> None:
    """The webhook stops being called halfway (a configuration that no longer matches, or
    failurePolicy Ignore with the webhook down): writes pass, and so do the probes."""
    kube = ScriptedAdmissions()

    async def ignored_halfway() -> None:
        async with AdmissionSampler(cast(Kube, kube), "ns", 0.06, concurrency=3):
            await asyncio.sleep(0.5)
            kube.webhook = False
            await asyncio.sleep(0.5)

    with pytest.raises(AssertionError, match=r"\d+ probes that only the webhook refuses were "
                                             "admitted"):
        await ignored_halfway()


async def test_an_attempt_that_fails_otherwise_than_with_an_answer_fails_the_window() -> None:
    """A bug in an attempt (not a refusal) is raised at the close, not lost in its task."""
    kube = ScriptedAdmissions()

    async def broken(*_: object, **__: object) -> dict[str, Any]:
        raise KeyError("a bug")

    async def window() -> None:
        async with AdmissionSampler(cast(Kube, kube), "ns", 0.06, concurrency=3):
            kube.request = broken  # type: ignore[method-assign]
            await asyncio.sleep(0.1)

    with pytest.raises(KeyError, match="a bug"):
        await window()
