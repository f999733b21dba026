"""manager.runtime.backoff: the delays of the retries of a pass that did not settle."""

from __future__ import annotations

from manager.reporting.status import OutcomeKind
from manager.runtime.backoff import Backoff

DEGRADED, PROGRESSING, RETRYING = (OutcomeKind.DEGRADED, OutcomeKind.PROGRESSING,
                                   OutcomeKind.RETRYING)


def delays(kind: OutcomeKind, retries: int) -> list[float]:
    state, found = Backoff(), []
    for number in range(retries):
        state, delay = state.after(kind, retrying=number > 0)
        found.append(delay)
    return found


def test_each_kind_doubles_from_its_first_delay_up_to_its_cap() -> None:
    assert delays(RETRYING, 8) == [1, 2, 4, 8, 16, 32, 60, 60]
    assert delays(DEGRADED, 7) == [10, 20, 40, 80, 160, 300, 300]
    assert delays(PROGRESSING, 6) == [2, 4, 8, 16, 30, 30]


def test_passes_that_events_trigger_do_not_advance_it() -> None:
    state, first = Backoff().after(DEGRADED, retrying=False)
    state, again = state.after(DEGRADED, retrying=False)  # a watch event, not the retry
    assert (first, again) == (10, 10)
    state, advanced = state.after(DEGRADED, retrying=True)
    assert advanced == 20


def test_it_starts_over_when_the_kind_of_outcome_changes() -> None:
    state = Backoff()
    for _ in range(4):
        state, _delay = state.after(DEGRADED, retrying=True)
    state, delay = state.after(PROGRESSING, retrying=True)
    assert delay == 2
    assert state == Backoff(PROGRESSING, 1)


def test_a_very_long_failure_stays_at_the_cap() -> None:
    state = Backoff()
    for _ in range(1000):
        state, delay = state.after(RETRYING, retrying=True)
    assert delay == 60
