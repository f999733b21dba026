"""The pure part of leader election (manager.leader): what a candidate decides from the Lease
it read, and what it writes. The I/O is tested on a real API server
(tests/integration/test_leader_election.py)."""

from __future__ import annotations

import pytest

from manager import cli
from manager.config import OperatorEnvironment
from manager.kube import Kube
from manager.leader import (
    Decision,
    LeaseRecord,
    LeaseTiming,
    candidate_identity,
    decide,
    micro_time,
    next_record,
    released,
)
from manager.operator import LeaderElectionError, OperatorOptions, _elector

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
