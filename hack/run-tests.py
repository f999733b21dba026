"""Run the whole test suite in phases, as `make test` and CI do.

1. `unit`: no cluster; a broken build shows here within a minute.
2. `clusters`: two pytest processes side by side, each in a network namespace of its own
   (only `lo`): the session's simulated cluster with the api, integration, resilience, e2e
   and upgrade suites; and the OLM and image suites, which start clusters of their own and
   mostly wait on OLM's intervals and on podman.
3. `timing`: the tests marked `timing` (bounds on refused admissions, sync gaps, takeovers),
   alone on the machine, so that a busy neighbour cannot make them fail or pass by luck.

Each run prints its lines with its name in front, a timestamp per phase and its slowest
tests; the closing line adds up every run (from their JUnit reports). The exit status is
non-zero if any run failed. PYTEST_ARGS (split like a shell would) goes to every run;
`--only NAME` runs one of them.
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
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [str(ROOT / ".venv" / "bin" / "pytest")]
# A namespace of its own for every run, even inside one already (two runs must not share
# ports, pod routes or registries).
FRESH_NETNS = [str(ROOT / "hack" / "netns-run.sh"), "--fresh"]
CLUSTER_SUITES = ["tests/api", "tests/integration", "tests/resilience", "tests/e2e",
                  "tests/upgrade", "tests/disruption"]
OLM_SUITES = ["tests/olm", "tests/images"]


@dataclass(frozen=True)
class Run:
    name: str
    paths: list[str]
    marker: str = ""
    netns: bool = True


PHASES: list[tuple[str, list[Run]]] = [
    ("unit", [Run("unit", ["tests/unit"], netns=False)]),
    ("clusters", [Run("cluster", CLUSTER_SUITES, "not timing"),
                  Run("olm", OLM_SUITES, "not timing")]),
    ("timing", [Run("timing", [*CLUSTER_SUITES, *OLM_SUITES], "timing")]),
]


@dataclass
class Outcome:
    passed: int = 0
    failed: int = 0
    skipped: int = 0
    returncode: int = 0

    def add(self, other: Outcome) -> None:
        self.passed += other.passed
        self.failed += other.failed
        self.skipped += other.skipped
        self.returncode = self.returncode or other.returncode


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
    for suite in ET.parse(report).getroot().iter("testsuite"):  # noqa: S314 (pytest's own)
        tests, skipped = int(suite.get("tests", 0)), int(suite.get("skipped", 0))
        failed = int(suite.get("failures", 0)) + int(suite.get("errors", 0))
        outcome.passed += tests - skipped - failed
        outcome.failed += failed
        outcome.skipped += skipped
    # pytest's 5 is "no tests collected": a marker that selects nothing is no failure.
    if returncode == 5 and outcome.failed == 0:
        outcome.returncode = 0
    return outcome


async def execute(run: Run, reports: Path, extra: list[str], prefix: bool) -> Outcome:
    report = reports / f"{run.name}.xml"
    started = time.monotonic()
    process = await asyncio.create_subprocess_exec(
        *command(run, report, extra), cwd=ROOT, stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    assert process.stdout is not None
    label = f"[{run.name}] " if prefix else ""
    async for line in process.stdout:
        sys.stdout.write(label + line.decode(errors="replace"))
        sys.stdout.flush()
    returncode = await process.wait()
    outcome = counted(report, returncode)
    print(f"== {now()} {run.name}: {outcome.passed} passed, {outcome.failed} failed, "
          f"{outcome.skipped} skipped in {time.monotonic() - started:.0f} s "
          f"(exit {returncode})", flush=True)
    return outcome


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=[r.name for _, runs in PHASES for r in runs])
    options = parser.parse_args()
    extra = shlex.split(os.environ.get("PYTEST_ARGS", ""))
    total = Outcome()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="eso-tests-") as directory:
        for phase, planned in PHASES:
            runs = [r for r in planned if options.only in (None, r.name)]
            if not runs:
                continue
            print(f"== {now()} phase {phase}: {', '.join(r.name for r in runs)}", flush=True)
            outcomes = await asyncio.gather(*(execute(run, Path(directory), extra,
                                                      prefix=len(runs) > 1) for run in runs))
            for outcome in outcomes:
                total.add(outcome)
    print(f"== {now()} all phases in {time.monotonic() - started:.0f} s")
    print(f"total: {total.passed} passed, {total.failed} failed, {total.skipped} skipped")
    return total.returncode


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
