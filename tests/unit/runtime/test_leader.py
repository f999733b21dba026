"""The pure part of leader election (manager.runtime.leader): what a candidate decides from the
Lease it read, and what it writes; and when a leader whose renewals fail gives up, on an event
loop whose clock jumps to the next timer instead of waiting for it. The I/O is tested on a
real API server (tests/integration/test_leader_election.py)."""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from typing import Any, TypeVar

import pytest

from manager import cli
from manager.client.kube import ApiError, JsonObject, Kube
from manager.config import OperatorEnvironment
from manager.runtime.leader import (
    Attempt,
    Decision,
    LeaderElector,
    LeaseRecord,
    LeaseTiming,
    candidate_identity,
    decide,
    micro_time,
    next_record,
    released,
)
from manager.runtime.operator import LeaderElectionError, OperatorOptions, _elector

ME = "operator-a_1234abcd"
OTHER = "operator-b_5678ef01"
TIMING = LeaseTiming(4, 3, 1)


def held_by(holder: str, duration: int = 4) -> LeaseRecord:
    return LeaseRecord(holder, duration, "t0", "t1", 2)


def test_no_lease_is_created() -> None:
    assert decide(None, ME, observed_at=0, now=100) is Decision.CREATE


def test_our_own_lease_is_renewed() -> None:
    assert decide(held_by(ME), ME, observed_at=0, now=1000) is Decision.RENEW


def test_a_valid_lease_of_another_is_left_alone() -> None:
    assert decide(held_by(OTHER), ME, observed_at=10, now=13.9) is Decision.WAIT


def test_a_lease_not_renewed_for_its_duration_is_taken() -> None:
    """Measured from when this candidate saw the record change, on its own clock."""
    assert decide(held_by(OTHER), ME, observed_at=10, now=14) is Decision.TAKE


def test_a_released_lease_is_taken_at_once() -> None:
    free = released(held_by(OTHER), "t2")
    assert free.holder == ""
    assert free.duration_seconds == 1
    assert decide(free, ME, observed_at=10, now=10) is Decision.TAKE


def test_renewal_keeps_the_acquire_time_and_the_transitions() -> None:
    renewed = next_record(held_by(ME), Decision.RENEW, ME, TIMING, "t9")
    assert renewed == LeaseRecord(ME, 4, "t0", "t9", 2)


def test_a_takeover_counts_a_transition() -> None:
    taken = next_record(held_by(OTHER), Decision.TAKE, ME, TIMING, "t9")
    assert taken == LeaseRecord(ME, 4, "t9", "t9", 3)
    created = next_record(None, Decision.CREATE, ME, TIMING, "t9")
    assert created == LeaseRecord(ME, 4, "t9", "t9", 0)


def test_the_record_round_trips_through_a_lease() -> None:
    record = LeaseRecord(ME, 137, micro_time(), micro_time(), 5)
    assert LeaseRecord.from_lease({"spec": record.spec()}) == record
    assert LeaseRecord.from_lease({}) == LeaseRecord()


def test_micro_time_has_microseconds_and_utc() -> None:
    stamp = micro_time()
    assert stamp.endswith("Z")
    assert len(stamp.split(".")[1]) == 7  # six digits and the Z


@pytest.mark.parametrize(("lease", "renew", "retry"), [(4, 4, 1), (4, 3, 3), (4, 3, 0)])
def test_timings_must_nest(lease: float, renew: float, retry: float) -> None:
    """The leader must give up (renew deadline) before a candidate may take over (lease
    duration), and try more than once before it gives up."""
    with pytest.raises(ValueError, match="lease duration > renew deadline > retry period"):
        LeaseTiming(lease, renew, retry)


def test_defaults_are_openshifts() -> None:
    assert LeaseTiming() == LeaseTiming(137, 107, 26)


def test_identity_is_the_pod_name_and_a_random_suffix() -> None:
    first = candidate_identity({"POD_NAME": "operator-7d9f"})
    second = candidate_identity({"POD_NAME": "operator-7d9f"})
    assert first.startswith("operator-7d9f_")
    assert first != second


def test_run_refuses_timings_that_do_not_nest(capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["run", "--leader-elect", "--leader-elect-renew-deadline=200"])
    assert code == 2
    assert "lease duration > renew deadline > retry period" in capsys.readouterr().err


def test_leader_election_needs_a_namespace() -> None:
    """Outside a pod, without POD_NAMESPACE or --leader-elect-namespace, there is no place
    for the Lease: `run` says so (exit status 2) instead of guessing one."""
    options = OperatorOptions(leader_election=LeaseTiming())
    kube = Kube.__new__(Kube)  # never used: the check comes first
    with pytest.raises(LeaderElectionError, match="POD_NAMESPACE or --leader-elect-namespace"):
        _elector(options, OperatorEnvironment.from_environ({}), kube, "me")
    elector = _elector(OperatorOptions(leader_election=LeaseTiming(),
                                       leader_election_namespace="operators"),
                       OperatorEnvironment.from_environ({}), kube, "me")
    assert elector is not None
    assert elector.path.endswith("/namespaces/operators/leases/external-secrets-operator-leader")
    assert _elector(OperatorOptions(), OperatorEnvironment.from_environ({}), kube, "me") is None


# --- when a leader gives up, on a virtual clock -------------------------------------------

T = TypeVar("T")
OPENSHIFT = LeaseTiming()  # 137 / 107 / 26 s


class _Skipping(selectors.DefaultSelector):  # type: ignore[misc,valid-type]
    """Never blocks: waiting `timeout` seconds for I/O moves the virtual clock on by it."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        events: list[tuple[Any, int]] = super().select(0)
        if not events:
            if timeout is None:
                raise RuntimeError("deadlock: nothing scheduled and no I/O to wait for")
            self.now += max(0.0, timeout)
        return events


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """Timers fire in order, at once: minutes of leader election run in milliseconds, and
    `time()` (the elector's clock too) says when each step happened."""

    def __init__(self) -> None:
        self._skipping = _Skipping()
        super().__init__(self._skipping)

    def time(self) -> float:
        return self._skipping.now


def run_virtual(make: Any) -> tuple[Any, VirtualTimeLoop]:
    """Run `make(loop)` (a coroutine) on a fresh virtual-time loop."""
    loop = VirtualTimeLoop()
    try:
        result = loop.run_until_complete(make(loop))
    finally:
        loop.close()
    return result, loop


class FakeLeaseApi:
    """The API server as the elector sees it, one Lease: it answers at once, fails at once
    (`failing`: a refused connection), or never answers (`hanging`). `requests` holds when
    each request came (virtual seconds), its method and path."""

    def __init__(self, loop: VirtualTimeLoop) -> None:
        self.loop = loop
        self.lease: JsonObject | None = None
        self.version = 0
        self.failing = False
        self.hanging = False
        self.requests: list[tuple[float, str, str]] = []

    async def _answer(self, method: str, path: str, result: Coroutine[Any, Any, T]) -> T:
        self.requests.append((self.loop.time(), method, path))
        if self.hanging:
            result.close()
            await asyncio.Event().wait()
        if self.failing:
            result.close()
            raise ApiError(0, "ClientConnectorError", "connection refused", method, path)
        return await result

    async def get(self, path: str, **_: Any) -> JsonObject | None:
        async def read() -> JsonObject | None:  # the Lease; no operator Deployment here
            return self.lease if "/leases/" in path else None
        return await self._answer("GET", path, read())

    async def create(self, path: str, body: JsonObject, **_: Any) -> JsonObject:
        return await self._answer("POST", path, self._store(body))

    async def request(self, method: str, path: str, **options: Any) -> JsonObject:
        return await self._answer(method, path, self._store(options["body"]))

    async def _store(self, body: JsonObject) -> JsonObject:
        self.version += 1
        self.lease = {**body, "metadata": {**body["metadata"],
                                           "resourceVersion": str(self.version)}}
        return self.lease


def elector_on(api: FakeLeaseApi, timing: LeaseTiming = OPENSHIFT) -> LeaderElector:
    return LeaderElector(api, "operators", ME, timing,  # type: ignore[arg-type]
                         clock=api.loop.time)


def test_a_leader_whose_renewals_fail_gives_up_at_the_renew_deadline_itself() -> None:
    """Renewals at 26, 52, 78 and 104 s fail; the next retry tick (130 s) is past the
    deadline (107 s), when another candidate may soon take over: it gives up at 107 s."""
    async def scenario(loop: VirtualTimeLoop) -> tuple[FakeLeaseApi, LeaderElector, float]:
        api = FakeLeaseApi(loop)
        elector = elector_on(api)
        await elector.acquire()
        api.failing = True
        await elector.hold()
        return api, elector, loop.time()

    (api, elector, lost_at), _ = run_virtual(scenario)
    assert lost_at == pytest.approx(OPENSHIFT.renew_deadline)
    assert not elector.leading
    failed = [at for at, method, _ in api.requests if method == "GET" and at > 0]
    assert failed == pytest.approx([26, 52, 78, 104])


def test_a_renewal_that_never_answers_is_given_up_at_the_deadline() -> None:
    async def scenario(loop: VirtualTimeLoop) -> float:
        api = FakeLeaseApi(loop)
        elector = elector_on(api)
        await elector.acquire()
        api.hanging = True  # the renewal at 26 s waits for an answer that never comes
        await elector.hold()
        return loop.time()

    lost_at, _ = run_virtual(scenario)
    assert lost_at == pytest.approx(OPENSHIFT.renew_deadline)


def test_the_deadline_counts_from_the_last_successful_renewal() -> None:
    """Renewed at 26 and 52 s, then the API server goes away: lost at 52 + 107 s."""
    async def scenario(loop: VirtualTimeLoop) -> float:
        api = FakeLeaseApi(loop)
        elector = elector_on(api)
        await elector.acquire()
        holding = asyncio.ensure_future(elector.hold())
        await asyncio.sleep(60)
        api.failing = True
        await holding
        return loop.time()

    lost_at, _ = run_virtual(scenario)
    assert lost_at == pytest.approx(2 * OPENSHIFT.retry_period + OPENSHIFT.renew_deadline)


def test_the_deadline_counts_from_the_acquisition_not_from_the_start_of_holding() -> None:
    """The runtime starts between acquiring and holding; if that took long, the deadline
    still counts from the write that took the Lease (what the other candidates saw)."""
    async def scenario(loop: VirtualTimeLoop) -> float:
        api = FakeLeaseApi(loop)
        elector = elector_on(api)
        await elector.acquire()
        api.failing = True
        await asyncio.sleep(100)  # a slow start
        await elector.hold()
        return loop.time()

    lost_at, _ = run_virtual(scenario)
    assert lost_at == pytest.approx(OPENSHIFT.renew_deadline)


def test_a_leader_that_finds_another_holder_stops_at_that_renewal() -> None:
    async def scenario(loop: VirtualTimeLoop) -> tuple[float, Attempt]:
        api = FakeLeaseApi(loop)
        elector = elector_on(api)
        await elector.acquire()
        assert api.lease is not None
        api.lease = {**api.lease, "spec": {**api.lease["spec"], "holderIdentity": OTHER}}
        await elector.hold()
        return loop.time(), await elector.attempt()

    (lost_at, attempt), _ = run_virtual(scenario)
    assert lost_at == pytest.approx(OPENSHIFT.retry_period)
    assert attempt is Attempt.TAKEN
