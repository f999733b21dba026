"""How long a pass that did not settle waits before it is retried. Pure.

Exponential per kind of outcome: from 1 s to 60 s for transient errors, from 10 s to 5 min
while the spec or a dependency needs a fix (the dependency watches usually end that wait
much earlier). A pass that waits for the operand to roll out (Progressing) is not retried
at all: the watches end that wait (runtime.py); its entry, from 2 s to 30 s, applies only
when such a pass also had a side task fail (PassReport.needs_retry). Only retries advance it
(passes that events trigger do not), and it starts over when the kind of outcome changes or
a pass settles.
"""

from __future__ import annotations

from dataclasses import dataclass

from manager.reporting.status import OutcomeKind

TRANSIENT = (1.0, 60.0)
BY_KIND = {OutcomeKind.DEGRADED: (10.0, 300.0), OutcomeKind.PROGRESSING: (2.0, 30.0)}
RETRY_REASON = "retry"
"""The queue reason of a retry: a pass triggered by it advances the backoff."""


@dataclass(frozen=True)
class Backoff:
    kind: OutcomeKind | None = None
    """The kind of outcome being retried; None: the last pass settled."""
    failures: int = 0
    """Retries of that kind so far (at least 1 once a retry is scheduled)."""

    def after(self, kind: OutcomeKind, retrying: bool) -> tuple[Backoff, float]:
        """The state and the delay of the next retry, after a pass that ended as `kind`;
        `retrying`: that pass was itself a retry."""
        failures = self.failures if kind is self.kind else 0
        if retrying or failures == 0:
            failures += 1
        first, cap = BY_KIND.get(kind, TRANSIENT)
        return Backoff(kind, failures), min(cap, first * 2 ** min(failures - 1, 16))
