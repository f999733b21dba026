"""Leader election between real operator processes (manager/runtime/leader.py), on the local
API server.

Each candidate is `python -m manager run --leader-elect` with short timings (lease 4 s, renew
deadline 3 s, retry 1 s), authenticated as the operator's ServiceAccount with the shipped RBAC
(so the Role for the Lease is exercised). Each names itself in its User-Agent, so the API
server's audit log tells the candidates' requests apart:

- of two candidates exactly one leads; the other sends nothing but reads of the Lease;
- after a SIGKILL of the leader the other takes over within the lease duration (plus one
  retry period: it reads the Lease once per period), and after a SIGTERM at once (the leader
  releases the Lease);
- a leader that finds the Lease held by another exits with status 1;
- of candidates racing for the same Lease (created, or taken when expired), exactly one wins:
  the API server refuses the others' writes (AlreadyExists, or a stale resourceVersion).
"""

from __future__ import annotations

import asyncio
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from manager.client.kube import Kube
from manager.names import LEASE_NAME, OPERATOR_DEPLOYMENT
from manager.paths import REPO_ROOT
from manager.runtime.leader import Attempt, LeaderElector, LeaseTiming, micro_time
from tests.e2e.operator_process import assert_log_clean, free_port
from tests.integration.conftest import eventually
from tests.integration.test_controller_rbac import OPERATOR_NAMESPACE
from tests.metrics_scrape import get_metrics_sync, service_account_token
from tests.resilience.conftest import (  # noqa: F401 (fixtures)
    WRITE_VERBS,
    AuditLog,
    audit,
    control_plane,
    operator_kubeconfig,
)

# Bounds on time and on refusals: run after the busiest neighbours (hack/run-tests.py).
pytestmark = pytest.mark.timing

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 4.0, 3.0, 1.0
LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{OPERATOR_NAMESPACE}/leases/{LEASE_NAME}"
TIMINGS = ("--leader-elect", f"--leader-elect-lease-duration={LEASE_DURATION:g}",
           f"--leader-elect-renew-deadline={RENEW_DEADLINE:g}",
           f"--leader-elect-retry-period={RETRY_PERIOD:g}")
METRICS_REVIEWS = {"tokenreviews", "subjectaccessreviews"}
IDENTITY = re.compile(r"action=leader result=waiting identity=(\S+)")


@dataclass
class Candidate:
    """One operator process with leader election on; its log in `log_path`."""

    name: str
    kubeconfig: Path
    log_path: Path
    metrics_token: str = ""
    """A bearer token allowed to read /metrics (served over HTTPS by default)."""
    metrics_port: int = field(default_factory=free_port)
    health_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    def start(self) -> Candidate:
        command = [sys.executable, "-m", "manager", "run", f"--kubeconfig={self.kubeconfig}",
                   "--resync-seconds=3600", f"--liveness=http://127.0.0.1:{self.health_port}/healthz",
                   *TIMINGS]
        environment = {**os.environ, "POD_NAMESPACE": OPERATOR_NAMESPACE, "POD_NAME": self.name,
                       "PYTHONUNBUFFERED": "1", "METRICS_ADDR": f"127.0.0.1:{self.metrics_port}"}
        for variable in ("KUBECONFIG", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "LEADER_ELECT"):
            environment.pop(variable, None)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
                                            env=environment, start_new_session=True)
        return self

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    @property
    def identity(self) -> str:
        found = IDENTITY.search(self.log())
        assert found, f"{self.name} has not campaigned yet:\n{self.log()[-2000:]}"
        return found[1]

    @property
    def leads(self) -> bool:
        return "action=leader result=gained" in self.log()

    def leader_gauge(self) -> float:
        text = get_metrics_sync(self.metrics_port, self.metrics_token)
        found = re.search(r"^eso_operator_leader (\S+)$", text, re.MULTILINE)
        assert found, text[:2000]
        return float(found[1])

    def live(self) -> bool:
        url = f"http://127.0.0.1:{self.health_port}/healthz"
        with urllib.request.urlopen(url, timeout=5) as response:
            return bool(response.status == 200)

    def signal(self, number: int) -> int:
        """Send `number`; the exit status."""
        assert self.process is not None
        self.process.send_signal(number)
        return self.process.wait(timeout=20)

    def stop(self) -> int | None:
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        return self.process.returncode


StartCandidates = Callable[[int], list[Candidate]]


@pytest_asyncio.fixture(loop_scope="session")
async def candidates(kube: Kube, operator_kubeconfig: Path,  # noqa: F811 (fixture)
                     tmp_path: Path) -> AsyncIterator[StartCandidates]:
    """Start candidates (no Lease left from an earlier test); all stopped afterwards, and
    none may have crashed."""
    await kube.delete(LEASE_PATH)
    started: list[Candidate] = []
    token = await service_account_token(kube, OPERATOR_NAMESPACE, "metrics-scraper",
                                        reader=True)

    def start(count: int) -> list[Candidate]:
        batch = [Candidate(f"operator-{len(started) + n}", operator_kubeconfig,
                           tmp_path / f"operator-{len(started) + n}.log", token)
                 for n in range(count)]
        for candidate in batch:
            started.append(candidate.start())
        return batch

    yield start
    for candidate in started:
        candidate.stop()
    for candidate in started:
        assert_log_clean(candidate.log(), str(candidate.log_path))
    await kube.delete(LEASE_PATH)


async def wait_for_leader(group: list[Candidate], timeout: float = 60.0) -> Candidate:
    async def one_leads() -> Candidate:
        leaders = [c for c in group if c.leads]
        assert leaders, "no leader yet"
        return leaders[0]

    leader: Candidate = await eventually(one_leads, timeout, interval=0.05)
    return leader


async def holder(kube: Kube) -> str:
    lease = await kube.request("GET", LEASE_PATH)
    return str(lease["spec"].get("holderIdentity") or "")


def requests_of(audit_log: AuditLog, start: int, identity: str) -> list[dict[str, Any]]:
    return [e for e in audit_log.entries(start) if identity in e.get("userAgent", "")]


async def takeover_seconds(successor: Candidate, since: float, timeout: float = 30.0) -> float:
    """Seconds from `since` (time.monotonic) until `successor` logs that it leads."""
    deadline = since + timeout
    while not successor.leads:
        assert time.monotonic() < deadline, f"no takeover:\n{successor.log()[-2000:]}"
        await asyncio.sleep(0.02)
    return time.monotonic() - since


def logged_at(log: str, marker: str) -> float:
    """When (time.time()) the first line holding `marker` was logged: its asctime stamp."""
    found = re.search(rf"^(\S+ \S+) .*{re.escape(marker)}", log, re.MULTILINE)
    assert found, f"no {marker!r} in the log:\n{log[-2000:]}"
    return datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f").timestamp()


def report(capsys: pytest.CaptureFixture[str], line: str) -> None:
    with capsys.disabled():
        print(f"\n[leader election] {line}")


async def test_one_leads_and_the_waiting_one_writes_nothing(
        kube: Kube, candidates: StartCandidates, audit: AuditLog) -> None:  # noqa: F811
    start = audit.mark()
    group = candidates(2)
    leader = await wait_for_leader(group)
    waiting = next(c for c in group if c is not leader)
    await asyncio.sleep(3 * LEASE_DURATION)  # many renewals, and many reads by the other
    assert [c.leads for c in group].count(True) == 1, [c.log()[-1500:] for c in group]
    assert await holder(kube) == leader.identity
    assert leader.leader_gauge() == 1
    assert waiting.leader_gauge() == 0
    assert waiting.live(), "a waiting instance is alive (kopf serves its probe)"
    assert "action=start " not in waiting.log(), "the waiting one started no runtime"

    async def logged() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        ours = requests_of(audit, start, leader.identity)
        theirs = requests_of(audit, start, waiting.identity)
        assert any(e["verb"] == "update" for e in ours), "the leader's renewals"
        assert len(theirs) >= 2 * LEASE_DURATION / RETRY_PERIOD, len(theirs)
        return ours, theirs

    _, requests = await eventually(logged, 10)
    # Its metrics follow the cluster's TLS profile: read once at start (here one discovery
    # GET: plain Kubernetes has no config.openshift.io).
    profile = [e for e in requests if "objectRef" not in e]
    assert [(e["verb"], e["requestURI"]) for e in profile] == [
        ("get", "/apis/config.openshift.io/v1")], profile
    requests = [e for e in requests if e not in profile]
    # The scrape of its /metrics above had it review the token (a create that stores nothing).
    reviews = [e for e in requests if e["objectRef"]["resource"] in METRICS_REVIEWS]
    assert {e["objectRef"]["resource"] for e in reviews} == METRICS_REVIEWS
    theirs = [e for e in requests if e not in reviews]
    # Both start at once: the one that loses may have tried to create the Lease too, and was
    # refused (409 AlreadyExists: nothing stored). Anything else it writes is a write.
    lost_race = [e for e in theirs if e["verb"] == "create"
                 and e["objectRef"]["resource"] == "leases"
                 and e.get("responseStatus", {}).get("code") == 409]
    assert len(lost_race) <= 1, lost_race
    theirs = [e for e in theirs if e not in lost_race]
    assert [e for e in theirs if e["verb"] in WRITE_VERBS] == []
    # Before its first write of the Lease (the create it lost) a candidate reads the
    # operator's Deployment once: the Lease's owner.
    owner = ("get", "deployments", OPERATOR_DEPLOYMENT)
    assert {(e["verb"], e["objectRef"]["resource"], e["objectRef"]["name"])
            for e in theirs} - {owner} == {("get", "leases", LEASE_NAME)}
    # kopf (which sends its own requests, named kopf/...) writes nothing either.
    kopf = [e for e in audit.entries(start) if e.get("userAgent", "").startswith("kopf/")]
    assert [e for e in kopf if e["verb"] in WRITE_VERBS] == []


async def test_sigkill_of_the_leader_the_other_takes_over_within_the_lease_duration(
        kube: Kube, candidates: StartCandidates, capsys: pytest.CaptureFixture[str]) -> None:
    group = candidates(2)
    leader = await wait_for_leader(group)
    successor = next(c for c in group if c is not leader)
    await asyncio.sleep(2 * RETRY_PERIOD)  # the successor has read the leader's record
    killed_at = time.monotonic()
    assert leader.signal(signal.SIGKILL) == -signal.SIGKILL
    seconds = await takeover_seconds(successor, killed_at)
    report(capsys, f"SIGKILL of the leader: takeover after {seconds:.2f} s "
           f"(lease duration {LEASE_DURATION:g} s, retry period {RETRY_PERIOD:g} s)")
    # The successor counts the lease duration from when it saw the last renewal, and reads
    # the Lease once per retry period.
    assert seconds <= LEASE_DURATION + 2 * RETRY_PERIOD + 1.0, seconds
    assert await holder(kube) == successor.identity
    assert successor.leader_gauge() == 1


async def test_sigterm_of_the_leader_releases_the_lease_and_the_other_takes_over_at_once(
        kube: Kube, candidates: StartCandidates, capsys: pytest.CaptureFixture[str]) -> None:
    group = candidates(2)
    leader = await wait_for_leader(group)
    successor = next(c for c in group if c is not leader)
    await asyncio.sleep(2 * RETRY_PERIOD)
    stopped_at = time.monotonic()
    assert leader.signal(signal.SIGTERM) == 0
    seconds = await takeover_seconds(successor, stopped_at)
    report(capsys, f"SIGTERM of the leader: takeover after {seconds:.2f} s "
           f"(the Lease released; lease duration {LEASE_DURATION:g} s)")
    assert "action=leader result=released" in leader.log(), leader.log()[-2000:]
    assert seconds < LEASE_DURATION, seconds  # no wait for the lease to expire
    assert seconds <= RETRY_PERIOD + 1.5, seconds
    assert await holder(kube) == successor.identity

    # What a Recreate rollout does instead (docs/olm.md): the old instance stops (and
    # releases), then a new one starts and finds the Lease free on its first read.
    assert successor.signal(signal.SIGTERM) == 0
    assert "action=leader result=released" in successor.log(), successor.log()[-2000:]
    assert await holder(kube) == "", "the Lease is still held after a clean stop"
    started_at = time.time()
    (fresh,) = candidates(1)
    await wait_for_leader([fresh])
    campaign, gained = (logged_at(fresh.log(), f"action=leader result={outcome} ")
                        for outcome in ("waiting", "gained"))
    report(capsys, f"a new process after a SIGTERM (Recreate): leads {gained - started_at:.2f} s "
           f"after its start, {gained - campaign:.2f} s after its first read of the Lease")
    # Taken at its first read (or the next, a retry period later); a Lease still held would
    # have made it wait a whole lease duration from that read.
    assert 2 * RETRY_PERIOD < LEASE_DURATION
    assert gained - campaign < 2 * RETRY_PERIOD, (campaign, gained)
    assert await holder(kube) == fresh.identity


async def test_a_leader_that_loses_the_lease_exits_at_once(
        kube: Kube, candidates: StartCandidates) -> None:
    (leader,) = candidates(1)
    await wait_for_leader([leader])
    lease = await kube.request("GET", LEASE_PATH)
    now = micro_time()
    lease["spec"] = {**lease["spec"], "holderIdentity": "intruder", "leaseDurationSeconds": 60,
                     "acquireTime": now, "renewTime": now}
    await kube.request("PUT", LEASE_PATH, body=lease)
    taken_at = time.monotonic()
    assert leader.process is not None
    code = await asyncio.to_thread(leader.process.wait, 20)
    assert code == 1, leader.log()[-2000:]
    assert time.monotonic() - taken_at <= RETRY_PERIOD + 1.5
    assert "action=leader result=lost" in leader.log()
    assert await holder(kube) == "intruder"


async def test_of_candidates_racing_for_the_lease_exactly_one_wins(
        kube: Kube, operator_kubeconfig: Path) -> None:  # noqa: F811 (its namespace)
    """In-process candidates against the real API server, with a clock the test moves."""
    await kube.delete(LEASE_PATH)
    now = [0.0]
    racers = [LeaderElector(kube, OPERATOR_NAMESPACE, f"racer-{n}",
                            LeaseTiming(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD),
                            clock=lambda: now[0]) for n in range(6)]
    try:
        created = await asyncio.gather(*(racer.attempt() for racer in racers))
        assert created.count(Attempt.HELD) == 1, created
        winner = racers[created.index(Attempt.HELD)]
        assert await holder(kube) == winner.identity
        losers = [racer for racer in racers if racer is not winner]
        # The losers see the winner's record; it then stops renewing (a crash) and, a lease
        # duration later by their clock, they race to take it over.
        assert set(await asyncio.gather(*(r.attempt() for r in losers))) == {Attempt.TAKEN}
        now[0] += LEASE_DURATION
        taken = await asyncio.gather(*(racer.attempt() for racer in losers))
        assert taken.count(Attempt.HELD) == 1, taken
        assert await holder(kube) == losers[taken.index(Attempt.HELD)].identity
        lease = await kube.request("GET", LEASE_PATH)
        assert lease["spec"]["leaseTransitions"] == 1, lease["spec"]
    finally:
        await kube.delete(LEASE_PATH)


async def test_release_frees_the_lease_after_a_renewal_whose_answer_was_lost(
        kube: Kube, operator_kubeconfig: Path) -> None:  # noqa: F811 (its namespace)
    """At a SIGTERM the campaign is cancelled, possibly while a renewal is in flight: the
    server applied it, its answer (the new resourceVersion) never arrived. Release must
    still free the Lease, and must leave alone a Lease another candidate took meanwhile."""
    await kube.delete(LEASE_PATH)
    timing = LeaseTiming(LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD)
    leader = LeaderElector(kube, OPERATOR_NAMESPACE, "leader", timing)
    shadow = LeaderElector(kube, OPERATOR_NAMESPACE, "leader", timing)  # the lost renewal
    try:
        await leader.acquire()
        assert await shadow.attempt() is Attempt.HELD  # renewed behind the leader's back
        await leader.release()
        assert await holder(kube) == "", "the Lease is still held after the release"

        await leader.acquire()
        lease = await kube.request("GET", LEASE_PATH)
        lease["spec"] = {**lease["spec"], "holderIdentity": "successor"}
        await kube.request("PUT", LEASE_PATH, body=lease)
        await leader.release()
        assert await holder(kube) == "successor"
    finally:
        await kube.delete(LEASE_PATH)
