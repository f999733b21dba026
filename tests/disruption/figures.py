"""What a disruption costs the teams, measured: the samplers around one scenario, and the
figures every scenario reports (tests/disruption, and the OLM upgrades of tests/olm).

While a scenario runs (`measure`):
- AdmissionSampler (tests/samplers.py, with a client of its own): server-side dry-run
  SecretStore creates through the webhook from three staggered streams, an attempt every
  33 ms whether or not earlier ones were answered: refusals, and the longest run of them;
  every tenth a probe the webhook itself must refuse; the sampler fails the scenario if it
  could not see (too few attempts answered, more than 0.3 s without one, a probe admitted);
- SyncSampler: the synced Secret must never be deleted or lose its key (asserted);
- `Recovery`: the ESC's Ready condition (how long it was not True, and how long it could not
  be read), the longest time during which the ExternalSecret's `status.refreshTime` did not
  move (a sync gap: the controller was not syncing), and when it first moved after the stack
  was whole (syncing again).

A scenario ends when every operand Deployment is whole (its wanted replicas updated and
available, no pod terminating), the ESC is Ready and the controller has synced since then;
refusals in a 1 s tail after that count too. How many admissions may be refused is each
test's to say (zero with two webhook replicas); every other figure is held to the bounds of
the scenario's kind (`BOUNDS`: whether the controller runs on or a new one waits for the
lease).

Every scenario's figures are collected in `FIGURES`. With DISRUPTION_RESULTS=PATH set (`make
bench-disruption`), a session that passed writes them to PATH as JSON (tests/conftest.py);
`python -m tests.disruption.figures PATH` then writes the table of docs/resilience.md from
that file. docs/development.md says how."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import enum
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

from manager.client.kube import ApiError, Kube
from manager.paths import REPO_ROOT
from manager.render.leader_election import CONTROLLER_LEASE
from tests.integration.conftest import EscHandle, wait_condition
from tests.samplers import (
    AdmissionFigures,
    AdmissionSampler,
    SyncSampler,
    own_client,
    stopped,
)
from tests.waiting import eventually

TAIL_SECONDS = 1.0
# Three staggered streams, each every 0.1 s: an attempt every 33 ms. (One stream every 50 ms
# that waited for each answer made one every 54 ms: an admission takes about that long here.)
SAMPLE_INTERVAL = 0.1
SAMPLE_STREAMS = 3
RESULTS_VARIABLE = "DISRUPTION_RESULTS"
DOC = REPO_ROOT / "docs" / "resilience.md"
DOC_SECTION = "disruption"
BOUNDS_SECTION = "disruption-bounds"


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


# --- the bounds -------------------------------------------------------------------------------

LEASE_SECONDS = float(CONTROLLER_LEASE.lease_duration)
"""The operand controller's leader-election lease, as the operator renders it
(manager/render/leader_election.py: 5 s, renewed within 3 s, retried every second; the
operand's default was 15 s). The old process does not release it, so a new one waits a full
lease from when it last saw it renewed. test_two_webhooks.py reads the Lease."""


class Kind(enum.Enum):
    """What a scenario does to the controller, which decides how long syncing may stop."""

    CONTROLLER_KEPT = "the controller process runs on"
    NEW_CONTROLLER = "a new controller process (it waits for the lease)"
    API_SERVER_RESTART = ("kube-apiserver restarted; the controller exits when it cannot renew "
                          "its lease, and the next one waits for it")
    OLM_UPGRADE = "OLM replaces the operator's pod; the controller process runs on"
    OLM_UPGRADE_NEW_CONTROLLER = ("OLM replaces the operator's pod and rolls the controller "
                                  "(from a release with the operand's 15 s lease, or ours)")


@dataclass(frozen=True)
class Bounds:
    """The most each figure of a scenario may be, in seconds."""

    sync_gap: float
    synced_again: float
    not_ready: float
    unreadable: float
    whole_after: float


# Chosen with margin for two loaded cores; the measured values are in docs/resilience.md.
# A controller that runs on syncs every second (the OLM tests: every 2 s), so its gap is the
# refresh interval plus a few seconds of load. A new one waits for the lease, then syncs.
# kube-apiserver's restart took 5.1 to 12.3 s. OLM's own work (updating the CRDs, the CSV
# Succeeded 35 to 55 s after the catalog changes) is most of an upgrade's "whole again".
_KEPT_SYNC_GAP = 5.0
# A new controller: the lease, up to 2.2 s of polling, its start and the next refresh, on
# loaded cores; a lease back at the operand's 15 s default (16 to 21 s) fails it.
_NEW_CONTROLLER_SYNC_GAP = LEASE_SECONDS + 10.0
# An upgrade from a release that rendered no lease flags: the new process waits out the
# Lease the old one wrote (leaseDurationSeconds 15, the operand's default).
DEFAULT_LEASE_SECONDS = 15.0
# The API server restart outlasts the leader's renewals (3 to 4 s): the controller exits
# and its next process waits for the lease once the server is back.
_API_SERVER_RESTART_SYNC_GAP = 20.0 + LEASE_SECONDS
BOUNDS: dict[Kind, Bounds] = {
    Kind.CONTROLLER_KEPT: Bounds(sync_gap=_KEPT_SYNC_GAP, synced_again=20.0, not_ready=15.0,
                                 unreadable=2.0, whole_after=20.0),
    Kind.NEW_CONTROLLER: Bounds(sync_gap=_NEW_CONTROLLER_SYNC_GAP, synced_again=30.0,
                                not_ready=15.0, unreadable=2.0, whole_after=20.0),
    Kind.API_SERVER_RESTART: Bounds(sync_gap=_API_SERVER_RESTART_SYNC_GAP,
                                    synced_again=_API_SERVER_RESTART_SYNC_GAP + 5.0,
                                    not_ready=15.0, unreadable=20.0, whole_after=25.0),
    Kind.OLM_UPGRADE: Bounds(sync_gap=_KEPT_SYNC_GAP + 0.5, synced_again=95.0,
                             not_ready=15.0, unreadable=2.0, whole_after=90.0),
    Kind.OLM_UPGRADE_NEW_CONTROLLER: Bounds(sync_gap=DEFAULT_LEASE_SECONDS + 13.0,
                                            synced_again=95.0, not_ready=15.0, unreadable=2.0,
                                            whole_after=90.0),
}


# --- watching recovery ------------------------------------------------------------------------


@dataclass
class Durations:
    """How long each state lasted, from polls: the state a poll read holds from that poll's
    start until the next poll's start (the elapsed time, not the nominal interval)."""

    totals: dict[str, float] = field(default_factory=dict)
    _last: tuple[str, float] | None = None

    def observe(self, state: str, now: float) -> None:
        self._credit(now)
        self._last = (state, now)

    def close(self, now: float) -> None:
        self._credit(now)
        self._last = None

    def _credit(self, now: float) -> None:
        if self._last is not None:
            state, since = self._last
            self.totals[state] = self.totals.get(state, 0.0) + now - since


READY, NOT_READY, UNREADABLE = "ready", "not ready", "unreadable"


@dataclass
class Recovery:
    """Polls the ESC's Ready condition and the ExternalSecret's refreshTime every `interval`."""

    kube: Kube
    esc: EscHandle
    external_secret: str
    """The ExternalSecret's path."""
    interval: float = 0.2
    durations: Durations = field(default_factory=Durations)
    """Seconds Ready was read True, not True, and could not be read (the API server down, a
    transient error)."""
    longest_sync_gap: float = 0.0
    """Longest time the ExternalSecret's refreshTime did not advance."""
    sync_after: float = float("inf")
    """A moment (time.time): `synced_from_now()` waits for a refresh whose refreshTime
    (whole seconds) is later, so written by a controller that runs now."""
    synced_again: float | None = None
    """When (time.monotonic) the first refresh after `sync_after` was seen."""
    _refresh: tuple[str, float] = ("", 0.0)
    _task: asyncio.Task[None] | None = None

    @property
    def not_ready(self) -> float:
        return self.durations.totals.get(NOT_READY, 0.0)

    @property
    def unreadable(self) -> float:
        return self.durations.totals.get(UNREADABLE, 0.0)

    async def __aenter__(self) -> Recovery:
        self._refresh = (await self._refresh_time(), time.monotonic())
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        await stopped(self._task)
        self.durations.close(time.monotonic())
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
        try:
            ready = await self.esc.condition("Ready")
        except ApiError as error:
            if error.transient:
                self.durations.observe(UNREADABLE, started)
            raise
        self.durations.observe(READY if ready and ready["status"] == "True" else NOT_READY,
                               started)
        self._note_sync(await self._refresh_time(), time.monotonic())


@dataclass
class Figures:
    """What one scenario measured (printed, collected, written with DISRUPTION_RESULTS)."""

    scenario: str
    webhook_replicas: int
    admissions: AdmissionFigures
    harm: list[str]
    not_ready: float
    unreadable: float
    """Seconds during which the ESC's Ready condition could not be read."""
    sync_gap: float
    synced_again: float
    """Seconds from the disruption to the controller's first sync after the stack was whole."""
    whole_after: float
    """Seconds from the disruption to every Deployment whole again and Ready=True."""
    kind: Kind
    notes: list[str] = field(default_factory=list)
    test: str = ""
    """The pytest node id of the test that measured it."""

    @property
    def bounds(self) -> Bounds:
        return BOUNDS[self.kind]

    def measured(self) -> dict[str, float]:
        """Each bounded figure, by the name of its bound."""
        return {"sync_gap": self.sync_gap, "synced_again": self.synced_again,
                "not_ready": self.not_ready, "unreadable": self.unreadable,
                "whole_after": self.whole_after}

    def beyond_bounds(self) -> list[str]:
        bounds = dataclasses.asdict(self.bounds)
        return [f"{name.replace('_', ' ')} {value:.1f} s > {bounds[name]:.1f} s"
                for name, value in self.measured().items() if value > bounds[name]]

    def assert_within_bounds(self) -> None:
        beyond = self.beyond_bounds()
        assert not beyond, (f"{'; '.join(beyond)} (bounds of {self.kind.name}: "
                            f"{self.kind.value}): {self}")

    def __str__(self) -> str:
        return (f"{self.scenario} ({self.webhook_replicas} webhook "
                f"{'replica' if self.webhook_replicas == 1 else 'replicas'}; "
                f"{self.kind.name}): {self.admissions}; synced Secret harmed "
                f"{len(self.harm)}x; longest sync gap {self.sync_gap:.1f} s; syncing again "
                f"after {self.synced_again:.1f} s; Ready not True for {self.not_ready:.1f} s, "
                f"unreadable for {self.unreadable:.1f} s; whole again after "
                f"{self.whole_after:.1f} s"
                + (f" ({'; '.join(self.notes)})" if self.notes else ""))

    def to_json(self) -> dict[str, Any]:
        admissions = self.admissions
        return {
            "test": self.test, "scenario": self.scenario,
            "webhook_replicas": self.webhook_replicas,
            "kind": self.kind.name,
            "admissions": {"attempts": admissions.attempts,
                           "refused": admissions.refused,
                           "longest_gap_s": round(admissions.longest_gap, 2),
                           "largest_interval_s": round(admissions.largest_interval, 3),
                           "webhook_probes": admissions.checked,
                           "window_s": round(admissions.window, 1),
                           "answers": dict(admissions.answers.most_common())},
            "synced_secret_harmed": len(self.harm),
            "sync_gap_s": round(self.sync_gap, 1),
            "synced_again_s": round(self.synced_again, 1),
            "ready_not_true_s": round(self.not_ready, 1),
            "unreadable_s": round(self.unreadable, 1),
            "whole_after_s": round(self.whole_after, 1),
            "bounds_s": dataclasses.asdict(self.bounds),
            "notes": list(self.notes),
        }


FIGURES: list[Figures] = []


def admissions_refused() -> int:
    """Admissions refused during the scenario that just ended."""
    return FIGURES[-1].admissions.refused


def assert_no_admission_refused() -> None:
    """The scenario that just ended refused no admission but the keep-alive race
    (tests/samplers.py `KEEPALIVE_RACE`: no rendering prevents it)."""
    FIGURES[-1].admissions.assert_refused_only_by_keepalive_races()


# --- the operand's state ----------------------------------------------------------------------


async def deployments_whole(kube: Kube, namespace: str) -> None:
    """Every operand Deployment runs exactly its wanted replicas, all updated and available,
    and no old pod is left (terminating pods count in status.replicas)."""
    for deployment in (await kube.list(f"/apis/apps/v1/namespaces/{namespace}/deployments",
                                       ))["items"]:
        name, status = deployment["metadata"]["name"], deployment.get("status") or {}
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
async def measure(watched: Watched, scenario: str, *, kind: Kind,
                  whole_timeout: float = 90.0) -> AsyncIterator[list[str]]:
    """Run the body (the disruption) with every sampler running, then wait until the stack is
    whole again; record the figures and hold them to the bounds of `kind` (`BOUNDS`). Yields a
    list the body may add notes to. The webhook's replicas are read when the body has ended.
    The admission sampler fails on its own when it could not see (tests/samplers.py)."""
    sync = SyncSampler(watched.kube, watched.user_namespace, watched.synced, watched.key)
    await sync.start()
    notes: list[str] = []
    sampler_client = own_client(watched.kube)
    try:
        async with AdmissionSampler(sampler_client, watched.user_namespace,
                                    interval=SAMPLE_INTERVAL,
                                    concurrency=SAMPLE_STREAMS) as admissions, \
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
    finally:
        await sampler_client.close()
    await sync.stop()
    assert recovery.synced_again is not None
    test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
    figures = Figures(scenario, replicas, admissions.figures, list(sync.harm), recovery.not_ready,
                      recovery.unreadable, recovery.longest_sync_gap,
                      recovery.synced_again - started, whole, kind, notes, test)
    FIGURES.append(figures)
    print(f"\nFIGURES {figures}")
    assert not figures.harm, figures.harm
    figures.assert_within_bounds()


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
    spacing = ("" if "largest_interval_s" not in admissions  # a file from before it was taken
               else f" (at most {admissions['largest_interval_s']:.2f} s apart)")
    if refused == 0:
        return f"**0** of {attempts}{spacing}"
    answers = "; ".join(f"{n}x {_short(answer)}" for answer, n in
                        list(admissions["answers"].items())[:2])
    return (f"**{refused} of {attempts}**{spacing}, longest gap "
            f"{admissions['longest_gap_s']:.2f} s ({answers})")


def _figure(row: dict[str, Any], key: str, bound: str) -> str:
    """One figure with its bound; "not taken" for a figure that a file from before it lacks."""
    if key not in row:
        return "not taken"
    bounds = row.get("bounds_s") or {}
    return f"{row[key]:.1f} s" + (f" (≤ {bounds[bound]:g})" if bound in bounds else "")


def _short(answer: str) -> str:
    """The telling part of an answer: a webhook call's error ("no endpoints available",
    "EOF"), or the API server's own."""
    status, _, text = answer.partition(" ")
    if status == "0":  # no HTTP answer at all (manager.client.kube: a connection error)
        return "no answer from the API server"
    if "failed to call webhook" in text:
        text = text.rsplit(": ", 1)[-1]
    return f"{status} `{textwrap.shorten(text, 70, placeholder=' …')}`"


# The bounded figures in the table's order: (column, results key, bounds key).
COLUMNS = (("sync gap", "sync_gap_s", "sync_gap"),
           ("syncing again after", "synced_again_s", "synced_again"),
           ("Ready not True", "ready_not_true_s", "not_ready"),
           ("Ready unreadable", "unreadable_s", "unreadable"),
           ("whole again", "whole_after_s", "whole_after"))


def table(results: dict[str, Any]) -> str:
    """The markdown table of docs/resilience.md, from a results document: each figure with
    the bound it was held to."""
    meta = results["meta"]
    heads = ["webhook replicas", "scenario", "refused admissions",
             *(column for column, _, _ in COLUMNS)]
    rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    # Two webhook replicas (what docs/resilience.md recommends) first, each group in run order.
    for row in sorted(results["scenarios"], key=lambda row: -row["webhook_replicas"]):
        scenario = row["scenario"] + (f" ({'; '.join(row['notes'])})" if row["notes"] else "")
        cells = [str(row["webhook_replicas"]), scenario, _refused(row["admissions"]),
                 *(_figure(row, key, bound) for _, key, bound in COLUMNS)]
        rows.append("| " + " | ".join(cells) + " |")
    facts = (f"Written by `make bench-disruption` from `bench/results/disruption.json`: "
             f"{meta['date']}, {meta['machine']}, kube-apiserver {meta['kube']}, commit "
             f"{meta['commit']}; {meta['tests']} tests in {meta['seconds']} s, one run. "
             + ("In brackets: the bound each figure is held to (seconds; `BOUNDS` in "
                "tests/disruption/figures.py, by the scenario's kind)."
                if all("bounds_s" in row for row in results["scenarios"]) else
                "Measured before the samplers checked themselves and before the bounds: "
                "\"not taken\" where a figure did not exist yet."))
    return "\n".join([facts, "", *rows])


def bounds_table() -> str:
    """The bounds of every kind of scenario, as docs/resilience.md shows them (from `BOUNDS`)."""
    heads = ["kind", "what happens to the controller", *(column for column, _, _ in COLUMNS)]
    rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    for kind, bounds in BOUNDS.items():
        limits = dataclasses.asdict(bounds)
        rows.append("| " + " | ".join([f"`{kind.name}`", kind.value,
                                       *(f"{limits[bound]:g} s" for _, _, bound in COLUMNS)])
                    + " |")
    return "\n".join(rows)


def section(text: str, name: str) -> str:
    """The text between `<!-- NAME:start -->` and `<!-- NAME:end -->`, without its newlines
    at either end."""
    after_start = text.split(f"<!-- {name}:start -->", maxsplit=1)[1]
    return after_start.split(f"<!-- {name}:end -->", maxsplit=1)[0].strip("\n")


def replace_section(text: str, name: str, body: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return f"{head}{start}\n{body}\n{end}{tail}"


def write_doc(results_path: Path | None, doc: Path = DOC) -> None:
    """Replace the table of figures (`<!-- disruption:start -->` to `<!-- disruption:end -->`)
    with the one of `results_path` if given, and the table of bounds (`disruption-bounds`)
    with the one of the code."""
    text = replace_section(doc.read_text(), BOUNDS_SECTION, bounds_table())
    if results_path is not None:
        text = replace_section(text, DOC_SECTION, table(json.loads(results_path.read_text())))
    doc.write_text(text)


def main() -> None:
    parser = argparse.ArgumentParser(description="Write the disruption table of "
                                     "docs/resilience.md from a results file, and the table "
                                     "of bounds from the code.")
    parser.add_argument("results", type=Path, nargs="?",
                        help="bench/results/disruption.json (without it: the bounds only)")
    write_doc(parser.parse_args().results)


if __name__ == "__main__":
    main()
