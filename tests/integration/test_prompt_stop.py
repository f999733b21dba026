"""SIGTERM at any moment of start-up stops the operator promptly, and a leader releases the
Lease it took (manager/runtime/operator.py, module docstring: stopping).

Each run is `python -m manager run --leader-elect` against the real API server, as the
operator's ServiceAccount (the shipped RBAC), with the short timings of
test_leader_election.py. It gets SIGTERM right after a line of its log (the first pass; the
Lease gained; the runtime's start, when its watches start: where a stop used to hang), or
at a delay after its spawn, from 0 s (the interpreter has not even loaded the operator) to a
little past the first pass, spread over the start-up time measured by the first runs. Every
run must exit within STOP_BOUND seconds with status 0, or by the signal itself only before
the operator logged anything (until `serve()` has installed its handlers the default action
ends the process, which holds nothing yet); a run that gained the Lease must have released
it, and no run may leave the Lease held by itself.

A watch waiting in `Watcher._pause` (asyncio.wait_for) loses a cancellation that comes just
as its wait ends (Python 3.11, CPython gh-86296): the last test makes that happen on purpose
and shows that the stop cancels such a task again.
"""

from __future__ import annotations

import asyncio
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import pytest

from manager.apply.discovery import Discovery
from manager.client.kube import Kube
from manager.client.watch_spec import WatchSpec
from manager.runtime.operator import StopRequest, _cancel_again_while_stopping
from manager.runtime.watches import Watcher
from tests.e2e.operator_process import assert_log_clean
from tests.integration.test_leader_election import LEASE_PATH, Candidate
from tests.resilience.conftest import (  # noqa: F401 (fixtures)
    control_plane,
    operator_kubeconfig,
)

# Bounds on time: run after the busiest neighbours (hack/run-tests.py).
pytestmark = pytest.mark.timing

STOP_BOUND = 2.0
"""Seconds from SIGTERM to the process's exit (docs/operations.md: within 2 s)."""
FIRST_PASS = "action=pass number=1 "
MARKERS = (
    *([FIRST_PASS] * 3),
    *(["action=leader result=gained"] * 2),
    *(["action=start "] * 4),
)
"""SIGTERM as soon as the log shows one of these lines (read every 5 ms). The runs after
the first pass measure the start-up: the slowest of them, from spawn to that line, is T."""
DELAY_STEPS = 13
"""Then runs at delays from 0 to 1.5 T after the spawn, in equal steps."""


@dataclass
class Run:
    when: str
    code: int | None
    seconds: float
    started: float
    """Seconds from the spawn to the SIGTERM."""
    log: str

    @property
    def reached(self) -> str:
        """How far start-up got, by the log."""
        for marker, name in ((FIRST_PASS, "pass"), ("action=start ", "runtime"),
                             ("result=gained", "leader"), ("result=waiting", "campaign"),
                             (" manager.", "serve")):
            if marker in self.log:
                return name
        return "nothing"

    @property
    def identity(self) -> str | None:
        return next((word.split("=", 1)[1] for word in self.log.split()
                     if word.startswith("identity=")), None)


async def run_once(kubeconfig: Path, log_path: Path, *, delay: float | None = None,
                   marker: str | None = None) -> Run:
    candidate = Candidate(log_path.stem, kubeconfig, log_path).start()
    process = candidate.process
    assert process is not None
    spawned = time.monotonic()
    if marker is None:
        assert delay is not None
        await asyncio.sleep(delay)
        when = f"{delay:.2f} s"
    else:
        while marker not in candidate.log():
            assert process.poll() is None, f"exited before {marker!r}:\n{candidate.log()}"
            assert time.monotonic() - spawned < 60, f"no {marker!r}:\n{candidate.log()[-2000:]}"
            await asyncio.sleep(0.005)
        when = f"after {marker.split()[-1]}"
    signalled = time.monotonic()
    process.send_signal(signal.SIGTERM)
    while process.poll() is None and time.monotonic() - signalled < STOP_BOUND + 10:
        await asyncio.sleep(0.01)
    seconds = time.monotonic() - signalled
    if process.poll() is None:
        process.kill()
        await asyncio.to_thread(process.wait, 10)
    return Run(when, process.returncode, seconds, signalled - spawned, candidate.log())


async def check(run: Run, where: str, kube: Kube) -> list[str]:
    """What is wrong with `run`; a Lease it left held is deleted (the next run need not
    wait for it to expire)."""
    problems = []
    if run.seconds > STOP_BOUND or run.code is None:
        problems.append(f"{where}: still running {run.seconds:.1f} s after SIGTERM")
    elif run.code != 0 and not (run.code == -signal.SIGTERM and run.reached == "nothing"):
        problems.append(f"{where}: exit status {run.code}")
    if "result=gained" in run.log and "result=released" not in run.log:
        problems.append(f"{where}: gained the Lease, never released it")
    lease = await kube.get(LEASE_PATH)
    if lease is not None and run.identity is not None \
            and lease["spec"].get("holderIdentity") == run.identity:
        problems.append(f"{where}: the Lease is still held by it")
        await kube.delete(LEASE_PATH)
    try:
        assert_log_clean(run.log, where)
    except AssertionError as error:
        problems.append(str(error))
    if problems:
        problems.append(f"{where}: its log:\n{run.log[-3000:]}")
    return problems


async def test_sigterm_at_any_moment_of_start_up_stops_it_promptly_and_frees_the_lease(
        kube: Kube, operator_kubeconfig: Path,  # noqa: F811 (fixture)
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    await kube.delete(LEASE_PATH)
    runs: list[Run] = []
    problems: list[str] = []
    try:
        plan: list[dict[str, Any]] = [{"marker": marker} for marker in MARKERS]
        while plan:
            how = plan.pop(0)
            number = len(runs)
            run = await run_once(operator_kubeconfig, tmp_path / f"run-{number:02d}.log",
                                 **how)
            runs.append(run)
            problems += await check(run, f"run {number} (SIGTERM {run.when}, start-up reached "
                                    f"{run.reached})", kube)
            if number == len(MARKERS) - 1:  # T, to spread the delays over
                start_up = max(r.started for r in runs if r.when == "after number=1")
                plan += [{"delay": round(1.5 * start_up * step / (DELAY_STEPS - 1), 2)}
                         for step in range(DELAY_STEPS)]
    finally:
        await kube.delete(LEASE_PATH)
        with capsys.disabled():
            print(f"\n[prompt stop] {len(runs)} runs: SIGTERM at, seconds after the spawn, "
                  "exit after (s), status, start-up reached, tasks cancelled again")
            for run in runs:
                again = run.log.count("result=cancel-again")
                print(f"  {run.when:>22}  {run.started:5.2f}  {run.seconds:5.2f}  "
                      f"{run.code!s:>4}  {run.reached:8}  {again}")
            if runs:
                slowest = max(runs, key=lambda r: r.seconds)
                print(f"  slowest {slowest.seconds:.2f} s ({slowest.when}); bound "
                      f"{STOP_BOUND:g} s; {len(problems)} problem(s)")
    assert not problems, "\n\n".join(problems)


class NothingServed:
    """Discovery of a cluster that serves none of the watched kinds: every watch waits in
    Watcher._pause for its kind to appear."""

    async def resolve(self, *_: str) -> None:
        return None

    def invalidate(self, *_: str) -> None:
        pass

    def absence_vouched(self, *_: str) -> bool:  # no CRD watch vouches: it rechecks
        return False

    def crd_unwatched(self, *_: object) -> None:
        pass


def test_the_stop_cancels_again_a_watch_that_lost_its_cancellation(
        capsys: pytest.CaptureFixture[str]) -> None:
    """No cluster: a watch whose wait ends (a CRD came: rediscover) in the very moment it is
    cancelled goes on running on Python 3.11; the stop's second cancellation ends it."""
    async def scenario() -> tuple[bool, bool]:
        watcher = Watcher(cast(Kube, None), cast(Discovery, NothingServed()),
                          lambda *_: None)
        watcher.set_specs(frozenset({WatchSpec("example.com/v1", "Widget")}))
        await asyncio.sleep(0.05)  # waiting for its kind
        (watch,) = [task for task in asyncio.all_tasks() if task.get_name().startswith("watch ")]
        watcher.rediscover()  # its wait ends ...
        await asyncio.sleep(0)  # ... (asyncio.wait_for's inner task is done) ...
        watch.cancel()  # ... and the stop comes before the watch resumes
        await asyncio.sleep(0.3)
        lost = not watch.done()
        stop = StopRequest()
        stop.requested.set()
        again = asyncio.create_task(_cancel_again_while_stopping(stop, ()))
        try:
            await asyncio.wait({watch}, timeout=1.0)
        finally:
            again.cancel()
        return lost, watch.done()

    lost, ended = asyncio.run(scenario())
    with capsys.disabled():
        print(f"\n[prompt stop] the watch's first cancellation was "
              f"{'lost' if lost else 'delivered'}; after the stop it "
              f"{'ended' if ended else 'still runs'}")
    assert ended, f"the watch still runs after the stop (its cancellation lost: {lost})"
