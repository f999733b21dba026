"""What a disruption costs the teams, measured: the samplers around one scenario, and the
figures every scenario reports (tests/disruption, and the OLM upgrades of tests/olm).

While a scenario runs (`measure`):
- AdmissionSampler (tests/samplers.py): a server-side dry-run SecretStore create through the
  webhook every 50 ms: refusals, and the longest run of them;
- SyncSampler: the synced Secret must never be deleted or lose its key (asserted);
- `Recovery`: the ESC's Ready condition, and the longest time during which the
  ExternalSecret's `status.refreshTime` did not move (a sync gap: the controller was not
  syncing).

A scenario ends when every operand Deployment is whole (its wanted replicas updated and
available, no pod terminating), the ESC is Ready and the controller has synced since then;
refusals in a 1 s tail after that count too. How many admissions may be refused is each
test's to say (zero with two webhook replicas).

Every scenario's figures are collected in `FIGURES`. With DISRUPTION_RESULTS=PATH set (`make
bench-disruption`), a session that passed writes them to PATH as JSON (tests/conftest.py);
`python -m tests.disruption.figures PATH` then writes the table of docs/resilience.md from
that file. docs/development.md says how.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import subprocess
import textwrap
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from manager.kube import ApiError, Kube
from manager.paths import REPO_ROOT
from tests.integration.conftest import EscHandle, wait_condition
from tests.samplers import AdmissionFigures, AdmissionSampler, SyncSampler, stopped
from tests.waiting import eventually

TAIL_SECONDS = 1.0
SAMPLE_INTERVAL = 0.05  # finer than the day-2 sampler: a disruption's window can be short
RESULTS_VARIABLE = "DISRUPTION_RESULTS"
DOC = REPO_ROOT / "docs" / "resilience.md"
DOC_SECTION = "disruption"


@dataclass(frozen=True)
class Watched:
    """The installed stack as the samplers see it."""

    kube: Kube
    esc: EscHandle
    namespace: str
    """The operand's namespace."""
    user_namespace: str
    """Where the admission sampler creates (dry run) and the synced Secret lives."""
    external_secret: str
    """The ExternalSecret that writes the synced Secret (refreshed every second or two)."""
    synced: str
    """The synced Secret, holding `key`."""
    key: str = "k"

    @property
    def external_secret_path(self) -> str:
        return (f"/apis/external-secrets.io/v1/namespaces/{self.user_namespace}/"
                f"externalsecrets/{self.external_secret}")


# --- watching recovery ------------------------------------------------------------------------


@dataclass
class Recovery:
    """Polls the ESC's Ready condition and the ExternalSecret's refreshTime every `interval`."""

    kube: Kube
    esc: EscHandle
    external_secret: str
    """The ExternalSecret's path."""
    interval: float = 0.2
    not_ready: float = 0.0
    """Seconds during which Ready was not True."""
    last_not_ready: float | None = None
    """When (time.monotonic) Ready was last seen not True."""
    longest_sync_gap: float = 0.0
    """Longest time the ExternalSecret's refreshTime did not advance."""
    sync_after: float = float("inf")
    """A moment (time.time): `synced_from_now()` waits for a refresh whose refreshTime
    (whole seconds) is later, so written by a controller that runs now."""
    synced_again: float | None = None
    """When (time.monotonic) the first refresh after `sync_after` was seen."""
    _refresh: tuple[str, float] = ("", 0.0)
    _task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Recovery:
        self._refresh = (await self._refresh_time(), time.monotonic())
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        await stopped(self._task)
        self._note_sync(await self._refresh_time(), time.monotonic())

    async def _refresh_time(self) -> str:
        found = await self.kube.get(self.external_secret)
        return str(((found or {}).get("status") or {}).get("refreshTime") or "")

    def _note_sync(self, refreshed: str, now: float) -> None:
        last, since = self._refresh
        self.longest_sync_gap = max(self.longest_sync_gap, now - since)
        if refreshed != last:
            self._refresh = (refreshed, now)
            if self.synced_again is None and refreshed and datetime.fromisoformat(
                    refreshed.replace("Z", "+00:00")).timestamp() > self.sync_after:
                self.synced_again = now

    async def synced_from_now(self, timeout: float = 60.0) -> None:
        """Wait until the controller has written a refresh after this moment: the longest sync
        gap then covers the whole stall (a replaced controller waits for the lease)."""
        self.sync_after, self.synced_again = time.time(), None

        async def refreshed() -> None:
            assert self.synced_again is not None, "no sync since the stack was whole"

        await eventually(refreshed, timeout, what="a sync after the disruption")

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            try:
                await self._poll(started)
            except ApiError as error:  # the API server itself is down: nothing to read
                if not error.transient:
                    raise
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))

    async def _poll(self, started: float) -> None:
        ready = await self.esc.condition("Ready")
        if ready is None or ready["status"] != "True":
            self.not_ready += self.interval
            self.last_not_ready = started
        self._note_sync(await self._refresh_time(), time.monotonic())


@dataclass
class Figures:
    """What one scenario measured (printed, collected, written with DISRUPTION_RESULTS)."""

    scenario: str
    webhook_replicas: int
    admissions: AdmissionFigures
    harm: list[str]
    not_ready: float
    sync_gap: float
    whole_after: float
    """Seconds from the disruption to every Deployment whole again and Ready=True."""
    notes: list[str] = field(default_factory=list)
    test: str = ""
    """The pytest node id of the test that measured it."""

    def __str__(self) -> str:
        return (f"{self.scenario} ({self.webhook_replicas} webhook "
                f"{'replica' if self.webhook_replicas == 1 else 'replicas'}): "
                f"{self.admissions}; synced Secret harmed {len(self.harm)}x; "
                f"longest sync gap {self.sync_gap:.1f} s; Ready not True for "
                f"{self.not_ready:.1f} s; whole again after {self.whole_after:.1f} s"
                + (f" ({'; '.join(self.notes)})" if self.notes else ""))

    def to_json(self) -> dict[str, Any]:
        return {
            "test": self.test, "scenario": self.scenario,
            "webhook_replicas": self.webhook_replicas,
            "admissions": {"attempts": self.admissions.attempts,
                           "refused": self.admissions.refused,
                           "longest_gap_s": round(self.admissions.longest_gap, 2),
                           "answers": dict(self.admissions.answers.most_common())},
            "synced_secret_harmed": len(self.harm),
            "sync_gap_s": round(self.sync_gap, 1),
            "ready_not_true_s": round(self.not_ready, 1),
            "whole_after_s": round(self.whole_after, 1),
            "notes": list(self.notes),
        }


FIGURES: list[Figures] = []


def admissions_refused() -> int:
    """Admissions refused during the scenario that just ended."""
    return FIGURES[-1].admissions.refused


# --- the operand's state ----------------------------------------------------------------------


async def deployments_whole(kube: Kube, namespace: str) -> None:
    """Every operand Deployment runs exactly its wanted replicas, all updated and available,
    and no old pod is left (terminating pods count in status.replicas)."""
    for deployment in (await kube.list(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                                       ))["items"]:
        name, status = deployment["metadata"]["name"], deployment.get("status") or {}
        if name == "bitwarden-sdk-server":  # no binary on the simulated cluster
            continue
        wanted = deployment["spec"]["replicas"]
        assert status.get("observedGeneration") == deployment["metadata"]["generation"], name
        for key in ("replicas", "updatedReplicas", "readyReplicas", "availableReplicas"):
            assert status.get(key) == wanted, f"{name}: {key} {status.get(key)} != {wanted}"
    pods = (await kube.list(f"/api/v1/namespaces/{namespace}/pods"))["items"]
    terminating = [p["metadata"]["name"] for p in pods if p["metadata"].get("deletionTimestamp")]
    assert not terminating, f"pods still terminating: {terminating}"


async def wait_whole(watched: Watched, timeout: float = 90.0) -> None:
    await eventually(lambda: deployments_whole(watched.kube, watched.namespace), timeout,
                     what="the operand whole")
    await wait_condition(watched.esc, "Ready", "True", timeout=timeout)


async def webhook_replicas(watched: Watched) -> int:
    deployment = await watched.kube.request(
        "GET", f"/apis/apps/v1/namespaces/{watched.namespace}/deployments/"
        "external-secrets-webhook")
    return int(deployment["spec"]["replicas"])


# --- one scenario -----------------------------------------------------------------------------


@contextlib.asynccontextmanager
async def measure(watched: Watched, scenario: str, *, whole_timeout: float = 90.0,
                  ) -> AsyncIterator[list[str]]:
    """Run the body (the disruption) with every sampler running, then wait until the stack is
    whole again; record the figures. Yields a list the body may add notes to. The webhook's
    replicas are read when the body has ended."""
    sync = SyncSampler(watched.kube, watched.user_namespace, watched.synced, watched.key)
    await sync.start()
    notes: list[str] = []
    try:
        async with AdmissionSampler(watched.kube, watched.user_namespace,
                                    interval=SAMPLE_INTERVAL) as admissions, \
                Recovery(watched.kube, watched.esc, watched.external_secret_path) as recovery:
            started = time.monotonic()
            yield notes
            await wait_whole(watched, whole_timeout)
            whole = time.monotonic() - started
            await recovery.synced_from_now()
            await asyncio.sleep(TAIL_SECONDS)  # refusals right after "whole" count too
        replicas = await webhook_replicas(watched)
    except BaseException:
        await sync.discard()
        raise
    await sync.stop()
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    figures = Figures(scenario, replicas, admissions.figures, list(sync.harm), recovery.not_ready,
                      recovery.longest_sync_gap, whole, notes, test)
    FIGURES.append(figures)
    print(f"\nFIGURES {figures}")
    assert not figures.harm, figures.harm


# --- results: bench/results/disruption.json and the table of docs/resilience.md ---------------


def machine() -> str:
    memory = Path("/proc/meminfo").read_text().split()[1]
    return (f"{platform.machine()}, {os.cpu_count()} cores, {int(memory) // 1024 // 1024} GiB, "
            f"Python {platform.python_version()}")


def _commit() -> str:
    found = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "--short", "HEAD"],
                           capture_output=True, text=True, check=False)
    dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain",
                            "--untracked-files=no"], capture_output=True, text=True, check=False)
    return found.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def write_results(path: Path, *, kube_version: str, tests: int, seconds: float) -> None:
    """The figures of this session, as JSON (replacing the file)."""
    document = {
        "meta": {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "machine": machine(),
                 "kube": kube_version, "commit": _commit(), "tests": tests,
                 "seconds": round(seconds), "figures": len(FIGURES)},
        "scenarios": [figures.to_json() for figures in FIGURES],
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2) + "\n")


def _refused(admissions: dict[str, Any]) -> str:
    refused, attempts = admissions["refused"], admissions["attempts"]
    if refused == 0:
        return f"**0** of {attempts}"
    answers = "; ".join(f"{n}x {_short(answer)}" for answer, n in
                        list(admissions["answers"].items())[:2])
    return (f"**{refused} of {attempts}**, longest gap {admissions['longest_gap_s']:.2f} s "
            f"({answers})")


def _short(answer: str) -> str:
    """The telling part of an answer: a webhook call's error ("no endpoints available",
    "EOF"), or the API server's own."""
    status, _, text = answer.partition(" ")
    if status == "0":  # no HTTP answer at all (manager.kube: a connection error)
        return "no answer from the API server"
    if "failed to call webhook" in text:
        text = text.rsplit(": ", 1)[-1]
    return f"{status} `{textwrap.shorten(text, 70, placeholder=' …')}`"


def table(results: dict[str, Any]) -> str:
    """The markdown table of docs/resilience.md, from a results document."""
    meta = results["meta"]
    rows = ["| webhook replicas | scenario | refused admissions | sync gap | Ready not True "
            "| whole again |", "|---|---|---|---|---|---|"]
    # Two webhook replicas (what docs/resilience.md recommends) first, each group in run order.
    for row in sorted(results["scenarios"], key=lambda row: -row["webhook_replicas"]):
        scenario = row["scenario"] + (f" ({'; '.join(row['notes'])})" if row["notes"] else "")
        rows.append(f"| {row['webhook_replicas']} | {scenario} | {_refused(row['admissions'])} "
                    f"| {row['sync_gap_s']:.1f} s | {row['ready_not_true_s']:.1f} s "
                    f"| {row['whole_after_s']:.1f} s |")
    facts = (f"Written by `make bench-disruption` from `bench/results/disruption.json`: "
             f"{meta['date']}, {meta['machine']}, kube-apiserver {meta['kube']}, commit "
             f"{meta['commit']}; {meta['tests']} tests in {meta['seconds']} s, one run.")
    return "\n".join([facts, "", *rows])


def write_doc(results_path: Path, doc: Path = DOC) -> None:
    """Replace the text between `<!-- disruption:start -->` and `<!-- disruption:end -->`."""
    results = json.loads(results_path.read_text())
    start, end = f"<!-- {DOC_SECTION}:start -->", f"<!-- {DOC_SECTION}:end -->"
    head, rest = doc.read_text().split(start)
    _, tail = rest.split(end)
    doc.write_text(f"{head}{start}\n{table(results)}\n{end}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the disruption table of "
                                     "docs/resilience.md from a results file.")
    parser.add_argument("results", type=Path)
    write_doc(parser.parse_args().results)


if __name__ == "__main__":
    main()
