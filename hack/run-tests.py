"""Run the whole test suite, as `make test` and CI do: three lanes side by side, each pytest
process in a network namespace of its own (only `lo`; the unit tests need none), then the
timing run alone.

- `unit` (no cluster: a broken build shows within a minute), then `cluster`: the session's
  simulated cluster with the api, integration and disruption suites;
- OLM's tools and the images built (outside the namespace: builds reach the package
  indexes), then `olm`: the OLM and image suites, which start clusters of their own and
  mostly wait on OLM's intervals and on podman; then `cluster-2`, integration files moved
  from `cluster` so that the lanes end together (`MOVED`);
- `side`: the suites that start operators and stacks of their own (resilience, e2e, the
  upgrade from the previous release), from the start;
- once all three have ended, `timing`: every test marked `timing` (bounds on refused
  admissions, sync gaps, takeovers), alone on the cores. Beside the lanes, even at nice -10
  and with the sampler's thread real-time, they failed (2026-11-28: samplers starved by up
  to 0.78 s during an API server restart; 9 of 451 admissions refused in a CA switch with a
  replacing injector at load average 10). Only tests marked `timing` may open an admission
  sampler (tests/samplers.py).

Each run prints its lines with its name in front, a timestamp at each start and end and its
slowest tests; the closing line adds up every run (from their JUnit reports). The exit
status is non-zero if any run failed. PYTEST_ARGS (split like a shell would) goes to every
run; `--only NAME` runs one of them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shlex
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [str(ROOT / ".venv" / "bin" / "pytest")]
# A namespace of its own for every run, even inside one already (two runs must not share
# ports, pod routes or registries).
FRESH_NETNS = [str(ROOT / "hack" / "netns-run.sh"), "--fresh"]
CLUSTER_SUITES = ["tests/api", "tests/integration", "tests/disruption"]
OLM_SUITES = ["tests/olm", "tests/images"]
# Suites that start their own operators and stacks (processes, faults, hostile input, the
# operand end to end, the upgrade from the previous release): a lane of their own from the
# start, beside the cluster suites and OLM's waits (measured: docs/development.md, "Tests").
SIDE_SUITES = ["tests/resilience", "tests/e2e", "tests/upgrade"]
ALL_SUITES = [*CLUSTER_SUITES, *OLM_SUITES, *SIDE_SUITES]
# Integration files that start operators and stacks of their own, moved from the cluster
# lane to the side lane (measured 2026-11-28: cluster 1468 s, side 808 s before the move).
BALANCED = ["tests/integration/test_gitops.py", "tests/integration/test_gitops_policies.py",
            "tests/integration/test_convert.py", "tests/integration/test_console_dashboard.py",
            "tests/integration/test_console_quickstart.py",
            "tests/integration/test_olm_v1_installer.py"]
# Integration files moved from the cluster lane to the end of the OLM lane (cluster 1230 s,
# OLM 792 s, side about 1055 s in the run before; these took about 305 s of it).
MOVED = ["tests/integration/test_controller_toggles.py", "tests/integration/test_waiting.py",
         "tests/integration/test_knobs.py"]


@dataclass(frozen=True)
class Run:
    name: str
    paths: list[str]
    marker: str = ""
    netns: bool = True
    before: tuple[str, ...] = ()
    """A command run first, outside the network namespace (builds reach the package
    indexes); its failure fails the run."""


# OLM's tools and the images, built while the cluster suites already run (cold: minutes).
OLM_PREREQS = ("make", "--no-print-directory", "prereqs-olm", "test-images-built")


# The lanes run side by side, the runs of a lane one after another; then ALONE, one by one.
LANES: list[list[Run]] = [
    [Run("unit", ["tests/unit"], netns=False),
     Run("cluster", [*CLUSTER_SUITES, *(f"--ignore={path}" for path in [*BALANCED, *MOVED])],
         "not timing")],
    [Run("olm", OLM_SUITES, "not timing", before=OLM_PREREQS),
     Run("cluster-2", MOVED, "not timing")],
    [Run("side", [*BALANCED, *SIDE_SUITES], "not timing")],
]
ALONE: list[Run] = [Run("timing", ALL_SUITES, "timing")]


@dataclass
class Outcome:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    returncode: int = 0
    seconds: dict[str, float] = field(default_factory=dict)
    """Time spent per suite (tests/<suite>), fixtures included: what balances the lanes."""
    failures: list[str] = field(default_factory=list)
    """Each failed or erred test with the first line of its message: the last lines of a CI
    log are often all a reader gets."""

    def add(self, other: Outcome) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.returncode = self.returncode or other.returncode
        self.failures += other.failures
        for suite, seconds in other.seconds.items():
            self.seconds[suite] = self.seconds.get(suite, 0.0) + seconds

    def __str__(self) -> str:
        suites = ", ".join(f"{suite} {seconds:.0f} s" for suite, seconds in
                           sorted(self.seconds.items(), key=lambda item: -item[1]))
        return (f"{self.passed} passed, {self.failed} failed, {self.skipped} skipped"
                + (f" ({suites})" if suites else ""))


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def command(run: Run, report: Path, extra: list[str]) -> list[str]:
    args = [*PYTEST, *run.paths, f"--junitxml={report}", "--durations=10",
            "--durations-min=5", *extra]
    if run.marker:
        args += ["-m", run.marker]
    return [*FRESH_NETNS, *args] if run.netns else args


def counted(report: Path, returncode: int) -> Outcome:
    """The run's figures from its JUnit report (none: it did not get that far)."""
    if not report.exists():
        return Outcome(failed=1, returncode=returncode or 1)
    outcome = Outcome(returncode=returncode)
    root = ET.parse(report).getroot()  # noqa: S314 (written by our own pytest)
    for testsuite in root.iter("testsuite"):
        tests, skipped = int(testsuite.get("tests", 0)), int(testsuite.get("skipped", 0))
        failed = int(testsuite.get("failures", 0)) + int(testsuite.get("errors", 0))
        outcome.passed += tests - skipped - failed
        outcome.failed += failed
        outcome.skipped += skipped
    for case in root.iter("testcase"):  # classname: tests.<suite>.test_module[.Class]
        parts = case.get("classname", "").split(".")
        suite = parts[1] if len(parts) > 2 else "?"
        outcome.seconds[suite] = outcome.seconds.get(suite, 0.0) + float(case.get("time", 0))
        for problem in [*case.iter("failure"), *case.iter("error")]:
            message = (problem.get("message") or problem.text or "").strip().splitlines()
            outcome.failures.append(f"{case.get('classname')}::{case.get('name')}: "
                                    f"{problem.tag}: {message[0][:300] if message else '?'}")
    # pytest's 5 is "no tests collected": a marker that selects nothing is no failure.
    if returncode == 5 and outcome.failed == 0:
        outcome.returncode = 0
    return outcome


async def relay(run: Run, args: list[str], prefix: bool) -> int:
    """Run `args`, its output line by line under the run's name; its exit status."""
    process = await asyncio.create_subprocess_exec(
        *args, cwd=ROOT, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert process.stdout is not None
    label = f"[{run.name}] " if prefix else ""
    async for line in process.stdout:
        sys.stdout.write(label + line.decode(errors="replace"))
        sys.stdout.flush()
    return await process.wait()


async def execute(run: Run, reports: Path, extra: list[str], prefix: bool) -> Outcome:
    report = reports / f"{run.name}.xml"
    started = time.monotonic()
    if run.before and await relay(run, list(run.before), prefix) != 0:
        print(f"== {now()} {run.name}: `{' '.join(run.before)}` failed", flush=True)
        return Outcome(failed=1, returncode=1)
    print(f"== {now()} {run.name} starts: pytest {' '.join(run.paths)}"
          + (f" -m '{run.marker}'" if run.marker else ""), flush=True)
    returncode = await relay(run, command(run, report, extra), prefix)
    outcome = counted(report, returncode)
    print(f"== {now()} {run.name} ends after {time.monotonic() - started:.0f} s, exit "
          f"{returncode}: {outcome}", flush=True)
    return outcome


async def lane(runs: list[Run], reports: Path, extra: list[str], prefix: bool) -> Outcome:
    outcome = Outcome()
    for run in runs:
        outcome.add(await execute(run, reports, extra, prefix))
    return outcome


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=[r.name for runs in [*LANES, ALONE] for r in runs])
    options = parser.parse_args()
    extra = shlex.split(os.environ.get("PYTEST_ARGS", ""))
    lanes = [[r for r in runs if options.only in (None, r.name)] for runs in LANES]
    lanes = [runs for runs in lanes if runs]
    alone = [r for r in ALONE if options.only in (None, r.name)]
    total = Outcome()
    started = time.monotonic()
    print(f"== {now()} lanes: " + " | ".join(" then ".join(r.name for r in runs)
                                             for runs in lanes)
          + "".join(f"; then alone: {r.name}" for r in alone), flush=True)
    with tempfile.TemporaryDirectory(prefix="eso-tests-") as directory:
        for outcome in await asyncio.gather(*(lane(runs, Path(directory), extra,
                                                   prefix=len(lanes) > 1) for runs in lanes)):
            total.add(outcome)
        total.add(await lane(alone, Path(directory), extra, prefix=len(lanes) > 1))
    print(f"== {now()} all lanes in {time.monotonic() - started:.0f} s")
    print(f"== per suite: {total}")
    for failure in total.failures:
        print(f"== FAILED {failure}")
    print(f"total: {total.passed} passed, {total.failed} failed, {total.skipped} skipped")
    return total.returncode


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
