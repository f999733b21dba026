"""The operand controller's leader election: which Lease it takes, and how soon a new process
may take it over. The one place for both: the controller's Deployment renders them as flags
(manifests/operand/controller/deployment.yaml.j2), its Role names the Lease, and
tests/disruption bounds the sync gaps by them.

Why these timings (external-secrets v2.9.0, controller-runtime v0.24, client-go v0.36):

- The operand does not give its Lease up when it stops (cmd/controller/root.go sets no
  `LeaderElectionReleaseOnCancel`), so after every roll, drain or crash of the controller the
  new process waits until the old Lease expires: `lease_duration` after it last saw the Lease
  renewed (or after its own start, for a crashed leader), polling every `retry_period` to 2.2
  times that, then starts its caches. controller-runtime's defaults (15 s / 10 s / 2 s) cost
  16 to 21 s without syncing per roll (docs/resilience.md); these cost about 5 s plus start.
- One leader at a time: the leader retries a failed renewal every `retry_period` until
  `renew_deadline`, then stops leading and its process exits ("leader election lost"); so it
  stops at most `retry_period + renew_deadline` after its last renewal, and no candidate can
  take over sooner than `lease_duration` after that renewal. `lease_duration` exceeds the
  sum (client-go only requires it to exceed `renew_deadline`, and `renew_deadline` to exceed
  1.2 x `retry_period`); a renewal still in flight at the deadline is cancelled, and one the
  server applies late only delays the candidates.
- API-server hiccups: the API server may fail or not answer the leader for 3 to 4 s (three
  or four attempts) without any effect. A longer outage, such as a restart of a cluster's only
  API server, costs a controller restart; nothing syncs during the outage anyway, and the
  restarted process syncs about `lease_duration` after the API server is back.
- Load: one Lease write per second by the leader, one read per second by a waiting process.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

CONTROLLER_LEASE_ID: Final = "external-secrets-controller"
"""`--leader-election-id`: v2.9.0's default and v1.3.2's fixed name, rendered so that both
releases' controllers contend for one Lease while an upgrade rolls one into the other."""

JITTER_FACTOR: Final = 1.2  # client-go's leaderelection.JitterFactor


@dataclass(frozen=True)
class LeaseTimings:
    """Whole seconds: the Lease records `leaseDurationSeconds`, and a candidate waits that."""

    lease_duration: int
    renew_deadline: int
    retry_period: int

    def __post_init__(self) -> None:
        if not self.renew_deadline > JITTER_FACTOR * self.retry_period > 0:
            raise ValueError("the renew deadline must exceed 1.2 x the retry period")
        if not self.lease_duration > self.renew_deadline + self.retry_period:
            raise ValueError("the lease must outlast the leader's last renewal attempt")

    def flags(self) -> dict[str, str]:
        """The flag values (Go durations) by the templates' names."""
        return {"lease_duration": f"{self.lease_duration}s",
                "renew_deadline": f"{self.renew_deadline}s",
                "retry_period": f"{self.retry_period}s"}


CONTROLLER_LEASE: Final = LeaseTimings(lease_duration=5, renew_deadline=3, retry_period=1)
