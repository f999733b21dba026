"""The operand controller's lease timings: the values the Deployment renders keep one leader
at a time, and an unsafe combination is refused where the values are chosen."""

from __future__ import annotations

import pytest

from manager.config import OperatorEnvironment, effective_config
from manager.render import render_operand
from manager.render.leader_election import (
    CONTROLLER_LEASE,
    CONTROLLER_LEASE_ID,
    LeaseTimings,
)


def controller_args() -> list[str]:
    config = effective_config(None, None, OperatorEnvironment.from_environ({}))
    [deployment] = [o for o in render_operand(config).objects()
                    if o["kind"] == "Deployment" and o["metadata"]["name"] == "external-secrets"]
    [container] = deployment["spec"]["template"]["spec"]["containers"]
    return list(container["args"])


def test_the_controller_renders_its_lease_and_timings() -> None:
    args = controller_args()
    assert "--enable-leader-election=true" in args
    lease = CONTROLLER_LEASE
    assert {f"--leader-election-id={CONTROLLER_LEASE_ID}",
            f"--leader-election-lease-duration={lease.lease_duration}s",
            f"--leader-election-renew-deadline={lease.renew_deadline}s",
            f"--leader-election-retry-period={lease.retry_period}s"} <= set(args)


def test_the_shipped_timings_take_over_within_seconds_and_never_beside_a_leader() -> None:
    lease = CONTROLLER_LEASE
    # The leader has stopped (retry + deadline after its last renewal) before a candidate
    # may take the Lease; a roll costs the lease duration, not controller-runtime's 15 s.
    assert lease.retry_period + lease.renew_deadline < lease.lease_duration <= 6
    # A hiccup of a few failed renewals does not cost a leader its Lease.
    assert lease.renew_deadline >= 3 * lease.retry_period


@pytest.mark.parametrize(("duration", "deadline", "retry", "problem"), [
    (15, 10, 9, "1.2 x the retry period"),    # client-go would refuse it at start
    (4, 3, 1, "outlast the leader's last renewal"),  # a candidate could take over too soon
    (3, 3, 1, "outlast the leader's last renewal"),
    (5, 3, 0, "1.2 x the retry period"),
])
def test_an_unsafe_combination_is_refused(duration: int, deadline: int, retry: int,
                                          problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        LeaseTimings(duration, deadline, retry)
