"""`make bench`: speed and footprint of the operator on the simulated cluster.

Each run starts a fresh operator process (authenticated as its own ServiceAccount, so the API
server's audit log tells its requests apart from ours) and measures install, reconfigure,
repair, start-up, idle request rates and memory. Start-up is measured twice: with no
ExternalSecretsConfig (the first pass has nothing to do) and as a restart with the stack
installed (what users see after an upgrade or a node failure). The operator runs with a
resync period as long as the idle window, so that every window holds exactly one periodic
resync, whose cost is counted. Figures are the median of the runs, with min and max, written
to bench/results/latest.json and the table in docs/performance.md.

Run it inside the loopback-only namespace: hack/netns-run.sh .venv/bin/python bench/run.py
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families

from devcluster import controlplane, crds
from devcluster.cluster import SimulatedCluster
from manager.client.kube import Kube
from manager.paths import REPO_ROOT as ROOT
from manager.runtime.watches import UNRESOLVED_RECHECK_MAX
from manager.runtime.worker import DEFAULT_RESYNC_SECONDS
from tests.e2e.operator_process import free_port
from tests.metrics_scrape import get_metrics, service_account_token
from tests.waiting import seconds_until

RESULTS = ROOT / "bench" / "results" / "latest.json"
DOC = ROOT / "docs" / "performance.md"
MANAGED = "app.kubernetes.io/managed-by=external-secrets-operator"
ESC_PATH = "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs/cluster"
ESM_PATH = "/apis/operator.openshift.io/v1alpha1/externalsecretsmanagers/cluster"
OPERATOR_SA = ("bench-operator", "operator-identity")
WRITE_VERBS = {"create", "update", "patch", "delete", "deletecollection"}
RESYNC = "periodic resync"
NEVER_RUNS = "registry.example/bench/external-secrets-never-pulled:v0"
# An administrator creates the ExternalSecretsConfig once OLM says the operator is installed,
# not in the instant its first pass ends: the install starts this long after start-up.
INSTALL_AFTER_START_S = 2.0
# The operator's pass line (manager/runtime/worker.py), after logging's asctime.
PASS_LINE = re.compile(r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .* action=pass "
                       r"number=\d+ result=(?P<result>\S+) writes=(?P<writes>\d+) "
                       r"seconds=(?P<seconds>[\d.]+).* reasons=(?P<reasons>.*)$")


@dataclass
class Figures:
    """One list of samples per figure, one sample per run."""

    samples: dict[str, list[float]] = field(default_factory=dict)

    def add(self, name: str, value: float) -> None:
        self.samples.setdefault(name, []).append(round(value, 3))
        print(f"  {name}: {value:.3f}", flush=True)

    def summary(self) -> dict[str, dict[str, Any]]:
        return {name: {"median": statistics.median(values), "min": min(values),
                       "max": max(values), "runs": values}
                for name, values in self.samples.items()}


# --- the cluster side ---------------------------------------------------------------------


class Bench:
    def __init__(self, plane: controlplane.LocalControlPlane, kube: Kube):
        self.plane = plane
        self.kube = kube

    async def operator_kubeconfig(self) -> Path:
        """A kubeconfig with the token of a dedicated ServiceAccount (cluster-admin)."""
        namespace, name = OPERATOR_SA
        await self.kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}},
                               field_manager="bench")
        accounts = f"/api/v1/namespaces/{namespace}/serviceaccounts"
        await self.kube.create(accounts, {"metadata": {"name": name}}, field_manager="bench")
        await self.kube.create(
            "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
                "metadata": {"name": "bench-operator"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                            "name": "cluster-admin"},
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            }, field_manager="bench")
        token = (await self.kube.request("POST", f"{accounts}/{name}/token", body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 86400}}))["status"]["token"]
        kubeconfig = yaml.safe_load(self.plane.kubeconfig.read_text())
        kubeconfig["users"][0]["user"] = {"token": token}
        path = self.plane.workdir / "operator.kubeconfig"
        path.write_text(yaml.safe_dump(kubeconfig))
        return path

    async def esc(self) -> dict[str, Any] | None:
        return await self.kube.get(ESC_PATH)

    async def ready(self) -> bool:
        """Ready=True: applied, and the operand works (its Deployments available)."""
        return await self._ready_is(("True", "Reconciled"))

    async def applied(self) -> bool:
        """Every object applied and reported: Ready, or still waiting for the operand."""
        return await self._ready_is(("True", "Reconciled"), ("False", "WaitingForOperand"))

    async def waiting(self) -> bool:
        """Applied, and waiting for the operand."""
        return await self._ready_is(("False", "WaitingForOperand"))

    async def _ready_is(self, *states: tuple[str, str]) -> bool:
        esc = await self.esc()
        conditions = (esc or {}).get("status", {}).get("conditions", [])
        generation = (esc or {}).get("metadata", {}).get("generation")
        return any(c["type"] == "Ready" and (c["status"], c.get("reason")) in states
                   and c.get("observedGeneration") == generation for c in conditions)

    async def managed_objects(self, namespace: str) -> list[dict[str, Any]]:
        """Every managed object of the operand, by kubectl (all kinds at once)."""
        kinds = ("serviceaccounts,services,secrets,deployments,roles,rolebindings,"
                 "networkpolicies")
        out = await kubectl(self.plane, "get", kinds, "-n", namespace, "-l", MANAGED, "-o", "json")
        cluster = await kubectl(self.plane, "get", "clusterroles,clusterrolebindings,"
                                "validatingwebhookconfigurations", "-l", MANAGED, "-o", "json")
        # Earlier runs' operand namespaces stay (nothing deletes namespaces here): only this one.
        own = await kubectl(self.plane, "get", "namespace", namespace, "-o", "json")
        return [*json.loads(out)["items"], *json.loads(cluster)["items"], json.loads(own)]

    async def clear_operand(self) -> None:
        """Remove what a previous run left, as an administrator would: the ESC, then the
        operand (`uninstall --operand --yes`), so that its processes stop too."""
        await kubectl(self.plane, "delete", "externalsecretsconfigs", "--all", "--wait=true")
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "manager", "uninstall", "--operand", "--yes",
            f"--kubeconfig={self.plane.kubeconfig}", cwd=ROOT,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        await process.wait()

    async def create_unrelated(self, run: int, count: int) -> None:
        namespace = f"unrelated-{run}"
        await self.kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}},
                               field_manager="bench")
        gate = asyncio.Semaphore(16)

        async def one(index: int) -> None:
            body = {"metadata": {"name": f"noise-{index}"}, "data": {"k": "dmFsdWU="}}
            async with gate:
                if index % 2:
                    await self.kube.create(f"/api/v1/namespaces/{namespace}/secrets", body,
                                           field_manager="bench")
                else:
                    await self.kube.create(f"/api/v1/namespaces/{namespace}/configmaps",
                                           {"metadata": body["metadata"], "data": {"k": "value"}},
                                           field_manager="bench")

        await asyncio.gather(*(one(i) for i in range(count)))


async def kubectl(plane: controlplane.LocalControlPlane, *args: str) -> str:
    process = await asyncio.create_subprocess_exec(
        str(plane.kubectl), f"--kubeconfig={plane.kubeconfig}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    out, err = await process.communicate()
    if process.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)}: {err.decode()}")
    return out.decode()



# --- the operator process -----------------------------------------------------------------


@dataclass(frozen=True)
class Pass:
    """One pass, from its line in the operator's log; times in seconds since the epoch."""

    started: float
    ended: float
    result: str
    writes: int
    reasons: frozenset[str]

    @classmethod
    def parse(cls, line: str) -> Pass:
        match = PASS_LINE.match(line)
        if match is None:
            raise ValueError(f"not a pass line: {line}")
        # logging's asctime is local time with milliseconds, like the bench's clock.
        ended = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        return cls(ended - float(match["seconds"]), ended, match["result"],
                   int(match["writes"]), frozenset(match["reasons"].split(",")))


class OperatorProcess:
    def __init__(self, kubeconfig: Path, log: Path, resync_seconds: float,
                 env: dict[str, str] | None = None):
        self.kubeconfig = kubeconfig
        self.log = log
        self.resync_seconds = resync_seconds
        self.env = env or {}
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.metrics_port = free_port()

    def start(self) -> None:
        self.started = time.monotonic()
        # Metrics on, as in production (the Deployment serves them on :8080); scraped below.
        self.process = subprocess.Popen(
            [sys.executable, "-m", "manager", "run", "--kubeconfig", str(self.kubeconfig),
             "--resync-seconds", str(self.resync_seconds),
             "--metrics-addr", f"127.0.0.1:{self.metrics_port}"],
            stdout=self.log.open("ab"), stderr=subprocess.STDOUT, cwd=ROOT,
            env={**os.environ, "POD_NAMESPACE": "default", **self.env})

    def rss_mb(self) -> float:
        assert self.process is not None
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        raise RuntimeError("no VmRSS")

    async def metrics_series(self, token: str) -> int:
        """Scrape /metrics as Prometheus would (HTTPS, a ServiceAccount's bearer token); the
        number of samples it exposes."""
        status, text = await get_metrics(self.metrics_port, token)
        if status != 200:
            raise RuntimeError(f"scraping /metrics answered {status}")
        return sum(len(family.samples) for family in text_string_to_metric_families(text))

    def passes(self) -> list[Pass]:
        return [Pass.parse(line) for line in self.log.read_text().splitlines()
                if "action=pass " in line]

    async def start_until_first_pass(self) -> float:
        """Start the process; seconds from its start to the end of its first pass."""
        self.start()

        async def first_pass_done() -> bool:
            return len(self.passes()) >= 1

        await seconds_until(first_pass_done, timeout=60)
        return time.monotonic() - self.started

    def stop(self) -> None:
        if self.process is not None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


# --- audit-log counting -------------------------------------------------------------------


class Audit:
    """Requests of the operator's identity, counted from the API server's audit log."""

    def __init__(self, path: Path):
        self.path = path
        self.user = f"system:serviceaccount:{OPERATOR_SA[0]}:{OPERATOR_SA[1]}"

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def since(self, mark: int) -> list[dict[str, Any]]:
        with self.path.open("rb") as log:
            log.seek(mark)
            entries = [json.loads(line) for line in log.read().splitlines() if line.strip()]
        return [e for e in entries if e.get("user", {}).get("username") == self.user]

    @staticmethod
    def show(what: str, entries: list[dict[str, Any]]) -> None:
        """The requests behind a count, on the bench's output."""
        print(f"{what}: {len(entries)} requests", *(
            f"  {e.get('verb')} {e.get('requestURI', '').split('?')[0]}" for e in entries),
            sep="\n", flush=True)

    @staticmethod
    def count(entries: list[dict[str, Any]], verbs: set[str]) -> int:
        return sum(1 for e in entries if e.get("verb") in verbs)

    @staticmethod
    def during(entries: list[dict[str, Any]], passes: list[Pass],
               slack: float = 0.05) -> list[dict[str, Any]]:
        """The requests received while one of `passes` ran (the log's times are to the
        millisecond, hence the slack)."""
        return [e for e in entries if any(p.started - slack <= received(e) <= p.ended + slack
                                          for p in passes)]


def received(entry: dict[str, Any]) -> float:
    """When the API server received a request, in seconds since the epoch."""
    return datetime.fromisoformat(entry["requestReceivedTimestamp"]).timestamp()


# --- one run ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Session:
    """What every run shares."""

    bench: Bench
    audit: Audit
    operator_kubeconfig: Path
    args: argparse.Namespace
    figures: Figures


async def one_run(session: Session, run: int) -> None:
    await session.bench.clear_operand()
    workdir, args = session.bench.plane.workdir, session.args
    operator = OperatorProcess(session.operator_kubeconfig, workdir / f"operator-{run}.log",
                               args.resync_seconds)
    # No ExternalSecretsConfig yet: the first pass finds nothing to do.
    session.figures.add("startup_no_esc_s", await operator.start_until_first_pass())
    try:
        await _measure(session, operator, run)
    finally:
        operator.stop()
    await _restart(session, run)
    await _waiting(session, run)


async def _measure(session: Session, operator: OperatorProcess, run: int) -> None:
    bench, audit, args, figures = session.bench, session.audit, session.args, session.figures
    namespace = f"bench-operand-{run}"
    await asyncio.sleep(INSTALL_AFTER_START_S)
    mark = audit.mark()
    await bench.kube.create(
        ESC_PATH.rsplit("/", 1)[0],
        {"apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
         "metadata": {"name": "cluster"},
         "spec": {"controllerConfig": {"namespace": namespace}}}, field_manager="bench")
    figures.add("install_s", await seconds_until(bench.applied))
    applied = audit.since(mark)
    figures.add("install_requests", len(applied))
    figures.add("install_writes", Audit.count(applied, WRITE_VERBS))
    Audit.show("install", applied)
    started = time.monotonic()
    await seconds_until(bench.ready, timeout=180)
    figures.add("install_available_s", figures.samples["install_s"][-1]
                + time.monotonic() - started)
    await asyncio.sleep(2)  # let the pass that follows its own writes finish
    figures.add("install_requests_until_ready", len(audit.since(mark)))
    expected = len(await bench.managed_objects(namespace))
    figures.add("managed_objects", expected)

    label = f"run-{run}"

    async def labelled() -> bool:
        objects = await bench.managed_objects(namespace)
        return len(objects) >= expected and all(
            o["metadata"].get("labels", {}).get("bench") == label for o in objects)

    await bench.kube.merge_patch(ESM_PATH, {"spec": {"globalConfig": {"labels": {
        "bench": label}}}}, field_manager="bench")
    figures.add("reconfigure_s", await seconds_until(labelled))

    await _measure_knobs(session, namespace, expected, label)
    # Right after the pass that found the stack Ready again: the next pass waits for the
    # queue's spacing (at most five passes a second).
    await _repair(session, operator, namespace, "repair")
    await asyncio.sleep(3)

    figures.add("rss_idle_mb", operator.rss_mb())
    await _idle_window(session, operator)
    # From a quiet state: a second after the last pass, and a second before the next resync.
    await _quiet(operator, args.resync_seconds)
    await _repair(session, operator, namespace, "repair_quiet")
    await asyncio.sleep(2)

    await bench.create_unrelated(run, args.unrelated)
    await asyncio.sleep(5)
    figures.add("rss_after_unrelated_mb", operator.rss_mb())


async def _repair(session: Session, operator: OperatorProcess, namespace: str,
                  name: str) -> None:
    """Delete the operand's managed Deployment; seconds until it is back and the requests in
    between, then wait until the stack is Ready again."""
    bench, audit, figures = session.bench, session.audit, session.figures
    deployment = f"/apis/apps/v1/namespaces/{namespace}/deployments/external-secrets"
    old = await bench.kube.request("GET", deployment)
    figures.add(f"{name}_since_pass_s", time.time() - operator.passes()[-1].ended)
    mark = audit.mark()
    await bench.kube.delete(deployment)

    async def recreated() -> bool:
        new = await bench.kube.get(deployment)
        return new is not None and new["metadata"]["uid"] != old["metadata"]["uid"]

    figures.add(f"{name}_s", await seconds_until(recreated))
    repair = audit.since(mark)
    figures.add(f"{name}_requests", len(repair))
    Audit.show(name, repair)
    await seconds_until(bench.ready, timeout=180)


async def _idle_window(session: Session, operator: OperatorProcess) -> None:
    """Requests while nothing changes, in a window that holds one periodic resync: the
    resync period is as long as the window, so whatever the phase of the operator's timer,
    exactly one resync falls into the window. The window counts the requests received in it
    and those of the passes that started in it (one that starts near its end may end after
    it); requests are told apart as in or outside a pass by their time."""
    audit, args, figures = session.audit, session.args, session.figures
    if any(RESYNC in p.reasons for p in operator.passes()):
        print("warning: a periodic resync fell before the idle window (the run's measures "
              "took longer than the resync period)", flush=True)
    # A Prometheus's token; its first scrape reviews it (a TokenReview and a
    # SubjectAccessReview), cached 120 s (manager/metrics_endpoint/auth.py): scraped once before the
    # window, as at steady state, where those two requests come once every 2 minutes.
    token = await service_account_token(session.bench.kube, "default", "metrics-scraper",
                                        reader=True)
    await operator.metrics_series(token)
    mark, opened = audit.mark(), time.time()
    # Scraped every 15 s during the idle window, as a Prometheus would.
    series = []
    for _ in range(max(1, int(args.idle_seconds // 15))):
        series.append(await operator.metrics_series(token))
        await asyncio.sleep(max(0.0, min(15.0, opened + args.idle_seconds - time.time())))
    await asyncio.sleep(max(0.0, opened + args.idle_seconds - time.time()))
    closed = time.time()
    figures.add("metrics_samples", series[-1])
    await asyncio.sleep(1)  # a pass that started at the end of the window ends

    passes = [p for p in operator.passes() if opened <= p.started < closed]
    resyncs = [p for p in passes if RESYNC in p.reasons]
    in_passes = Audit.during(audit.since(mark), passes)
    idle = [e for e in audit.since(mark) if received(e) < closed or e in in_passes]
    figures.add("idle_requests", len(idle))
    Audit.show("idle", idle)
    figures.add("idle_writes", Audit.count(idle, WRITE_VERBS))
    for one in passes:
        print(f"  pass in the idle window: {one}", flush=True)
    figures.add("idle_passes", len(passes))
    figures.add("idle_resyncs", len(resyncs))
    if len(resyncs) != 1:
        print(f"warning: {len(resyncs)} periodic resyncs in the idle window", flush=True)
    if resyncs:  # per resync
        during = Audit.during(idle, resyncs)
        figures.add("resync_requests", len(during) / len(resyncs))
        figures.add("resync_writes", Audit.count(during, WRITE_VERBS) / len(resyncs))
    figures.add("idle_requests_outside_passes", len(idle) - len(Audit.during(idle, passes)))


async def _quiet(operator: OperatorProcess, resync_seconds: float, seconds: float = 1.0,
                 ) -> None:
    """Wait until the last pass ended `seconds` ago and no periodic resync is due within
    `seconds` (its timer ticks every `resync_seconds` from the last resync pass)."""
    while True:
        passes = operator.passes()
        now = time.time()
        wait = passes[-1].ended + seconds - now
        resyncs = [p.started for p in passes if RESYNC in p.reasons]
        if resyncs:
            due = max(resyncs) + resync_seconds
            while due < now - seconds:
                due += resync_seconds
            if due - seconds <= now:  # one due now or just done: let it pass first
                wait = max(wait, due + seconds - now)
        if wait <= 0:
            return
        await asyncio.sleep(wait)


async def _restart(session: Session, run: int) -> None:
    """Start-up as users see it after an upgrade or a node failure: a new operator process
    while the ESC exists and the stack runs; seconds and requests until its first pass has
    ended."""
    audit, figures = session.audit, session.figures
    log = session.bench.plane.workdir / f"operator-{run}-restart.log"
    operator = OperatorProcess(session.operator_kubeconfig, log, session.args.resync_seconds)
    mark = audit.mark()
    try:
        figures.add("startup_restart_s", await operator.start_until_first_pass())
        first = operator.passes()[0]
        print(f"  first pass after the restart: {first}", flush=True)
        if first.result != "Ready":
            print(f"warning: the restart's first pass ended {first.result}", flush=True)
        # Requests complete by then (a watch is logged when it ends, so none is counted).
        requests = [e for e in audit.since(mark) if received(e) <= first.ended + 0.05]
        figures.add("startup_restart_requests", len(requests))
        figures.add("startup_restart_writes", Audit.count(requests, WRITE_VERBS))
        Audit.show("restart", requests)
    finally:
        operator.stop()


async def _waiting(session: Session, run: int) -> None:
    """Requests while the operand waits for what never happens by itself: a new operator
    process whose operand image the simulated cluster has no binary for (as for an image
    that cannot be pulled), so the Deployments roll out and never become available. Its
    resync is an hour away: the window shows what the wait itself costs."""
    bench, audit, figures = session.bench, session.audit, session.figures
    log = bench.plane.workdir / f"operator-{run}-waiting.log"
    operator = OperatorProcess(session.operator_kubeconfig, log, 3600.0,
                               {"RELATED_IMAGE_EXTERNAL_SECRETS": NEVER_RUNS})

    started = audit.mark()
    try:
        operator.start()
        await seconds_until(bench.waiting, timeout=120)
        # A watch of a kind not served here asks discovery again for about 16 s after it
        # starts (watches.FIRST_RECHECK doubling up to UNRESOLVED_RECHECK_MAX), then waits
        # for its CRD: the window opens once no request came for longer than the last step.
        await _requests_settle(audit, started, quiet=UNRESOLVED_RECHECK_MAX + 1)
        mark, passes = audit.mark(), len(operator.passes())
        await asyncio.sleep(session.args.idle_seconds)
        figures.add("waiting_requests", len(audit.since(mark)))
        figures.add("waiting_passes", len(operator.passes()) - passes)
        Audit.show("waiting", audit.since(mark))
    finally:
        operator.stop()


async def _requests_settle(audit: Audit, mark: int, quiet: float, timeout: float = 120.0,
                           ) -> None:
    """Until the operator's last request audited since `mark` is `quiet` seconds old."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        entries = audit.since(mark)
        last = max((received(e) for e in entries), default=0.0)
        if time.time() - last >= quiet:
            return
        await asyncio.sleep(0.5)
    raise TimeoutError(f"the operator kept sending requests for {timeout} s")


async def _measure_knobs(session: Session, namespace: str, expected: int, label: str) -> None:
    """Administrator knobs (issue 15): an annotation onto every object; the webhook scaled to
    3 (PodDisruptionBudget created) and back to 1 (pruned)."""
    bench, figures = session.bench, session.figures

    async def annotated() -> bool:
        objects = await bench.managed_objects(namespace)
        return len(objects) >= expected and all(
            o["metadata"].get("annotations", {}).get("example.com/bench") == label
            for o in objects if o["kind"] != "Namespace")

    await bench.kube.merge_patch(ESC_PATH, {"spec": {"controllerConfig": {
        "annotations": {"example.com/bench": label}}}}, field_manager="bench")
    figures.add("annotate_s", await seconds_until(annotated))

    budget = f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/external-secrets-webhook"

    def webhook_replicas(replicas: int) -> dict[str, Any]:
        return {"spec": {"controllerConfig": {"componentConfigs": [
            {"componentName": "Webhook", "deploymentConfigs": {"replicas": replicas}}]}}}

    async def budget_is(present: bool) -> bool:
        return (await bench.kube.get(budget) is not None) == present

    await bench.kube.merge_patch(ESC_PATH, webhook_replicas(3), field_manager="bench")
    figures.add("scale_up_s", await seconds_until(lambda: budget_is(True)))
    await bench.kube.merge_patch(ESC_PATH, webhook_replicas(1), field_manager="bench")
    figures.add("scale_down_s", await seconds_until(lambda: budget_is(False)))
    await seconds_until(bench.ready, timeout=180)


# --- output -------------------------------------------------------------------------------


# The figures, in the order of the table.
LABELS = {
    "startup_no_esc_s": "start-up, no ESC: process start → first pass complete (s)",
    "startup_restart_s": "start-up, restart with the stack installed: process start → "
                         "first pass complete (s)",
    "startup_restart_requests": "API requests from the restart to its first pass complete "
                                "(count)",
    "startup_restart_writes": "… of which writes (count)",
    "install_s": "install: ESC created → every object applied and reported (s)",
    "install_requests": "API requests from ESC created to every object applied (count)",
    "install_writes": "… of which writes (count)",
    "install_available_s": "install: ESC created → Ready=True, every Deployment available (s)",
    "install_requests_until_ready": "API requests from ESC created to Ready=True, +2 s (count)",
    "managed_objects": "managed objects of the default install (count)",
    "reconfigure_s": "reconfigure: ESM label changed → on every managed object (s)",
    "annotate_s": "reconfigure: ESC annotation added → on every managed object (s)",
    "scale_up_s": "reconfigure: webhook replicas 1 → 3 → its PodDisruptionBudget exists (s)",
    "scale_down_s": "reconfigure: webhook replicas 3 → 1 → its PodDisruptionBudget pruned (s)",
    "repair_since_pass_s": "repair right after a pass: seconds since the last pass ended, at "
                           "the delete (s)",
    "repair_s": "repair right after a pass: managed Deployment deleted → re-created (s)",
    "repair_requests": "API requests from the delete to the re-created Deployment (count)",
    "repair_quiet_since_pass_s": "repair from a quiet state: seconds since the last pass "
                                 "ended, at the delete (s)",
    "repair_quiet_s": "repair from a quiet state: managed Deployment deleted → re-created (s)",
    "repair_quiet_requests": "API requests from the delete to the re-created Deployment "
                             "(count)",
    "rss_idle_mb": "operator RSS, idle, /metrics served (MB)",
    "metrics_samples": "samples in one /metrics scrape (count)",
    "idle_requests": "API requests per idle window, its periodic resync included (count)",
    "idle_writes": "… of which writes (count)",
    "idle_passes": "passes in the idle window (count)",
    "idle_resyncs": "… of which periodic resyncs (count)",
    "resync_requests": "API requests of the periodic resync's pass (count)",
    "resync_writes": "… of which writes (count)",
    "idle_requests_outside_passes": "API requests per idle window outside its passes (count)",
    "rss_after_unrelated_mb": "operator RSS after unrelated Secrets and ConfigMaps (MB)",
    "waiting_requests": "API requests per idle window while the operand waits (count)",
    "waiting_passes": "passes in that window (count)",
}


# The Go operator, measured side by side with ours on this kind of machine (issue 24: the
# same control plane, interleaved runs; issue "Lean and fast" for the repair figures), ours
# when issue 24 was opened (this bench, 2026-11-26, `make bench` then), and the goals:
# (figure, Go, ours then, goal). "—": no such figure. Issue 24 measured "process start →
# first API request" for both operators: Go 0.04-0.12 s, ours 1.66-1.95 s.
COMPARISON = (
    ("startup_no_esc_s", "0.17", "0.86", "≤ 0.3"),
    ("install_s", "0.33", "0.519", "≤ 0.33"),
    ("install_requests", "59", "49", "≤ 60"),
    ("repair_s", "0.11", "0.178", "≤ 0.1"),
    ("repair_quiet_s", "—", "0.088", "≤ 0.1"),
    ("repair_requests", "1", "3", "≤ 3"),
    ("idle_requests_outside_passes", "0", "0", "0"),
    ("waiting_requests", "—", "12 a minute (issue 24)", "0"),
    ("rss_idle_mb", "57", "70.074", "≤ 69 (stretch ≤ 60)"),
    ("rss_after_unrelated_mb", "57", "69.871", "≤ 69, flat"),
)


def comparison_table(summary: dict[str, Any]) -> str:
    rows = [f"| {LABELS[name]} | {go} | {before} | {summary[name]['median']:g} | {goal} |"
            for name, go, before, goal in COMPARISON if name in summary]
    return "\n".join(["| figure | Go operator | ours, 2026-11-26 | ours now (median) | goal |",
                      "|---|---|---|---|---|", *rows])


def machine() -> str:
    memory = Path("/proc/meminfo").read_text().split()[1]
    return (f"{platform.machine()}, {os.cpu_count()} cores, {int(memory) // 1024 // 1024} GiB, "
            f"Python {platform.python_version()}")


# Where the operator's memory goes: each step imports one more layer, in start-up's order.
IMPORT_STEPS = (("the interpreter", ""), ("aiohttp", "aiohttp"), ("pydantic", "pydantic"),
                ("jinja2", "jinja2"), ("kopf", "kopf"), ("the operator's own modules",
                                                          "manager.runtime.operator"))


def import_memory() -> list[tuple[str, float, float]]:
    """(layer, RSS after importing it and every layer before, what it adds) in MB, each
    measured in a fresh interpreter."""
    rows, imported, previous = [], [], 0.0
    for name, module in IMPORT_STEPS:
        imported += [module] if module else []
        code = "".join(f"import {m}\n" for m in imported) + (
            "print(next(l.split()[1] for l in open('/proc/self/status') "
            "if l.startswith('VmRSS')))")
        kb = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True).stdout
        total = int(kb) / 1024
        rows.append((name, round(total, 1), round(total - previous, 1)))
        previous = total
    return rows


def _replace_section(text: str, name: str, body: str) -> str:
    start, end = f"<!-- {name}:start -->", f"<!-- {name}:end -->"
    head, rest = text.split(start)
    _, tail = rest.split(end)
    return f"{head}{start}\n{body}\n{end}{tail}"


def write_results(summary: dict[str, Any], meta: dict[str, Any],
                  imports: list[tuple[str, float, float]]) -> None:
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps({"meta": meta, "figures": summary, "imports_mb": imports},
                                  indent=2) + "\n")
    order = [*(name for name in LABELS if name in summary),
             *(name for name in summary if name not in LABELS)]
    rows = [f"| {LABELS.get(name, name)} | {summary[name]['median']:g} | "
            f"{summary[name]['min']:g} | {summary[name]['max']:g} |" for name in order]
    table = "\n".join(["| figure | median | min | max |", "|---|---|---|---|", *rows])
    facts = (f"Measured {meta['date']} on {meta['machine']}, kube-apiserver {meta['kube']}; "
             f"{meta['runs']} runs, idle window {meta['idle_seconds']:g} s per run; the operator "
             f"runs with `--resync-seconds {meta['resync_seconds']:g}` (its default is "
             f"{DEFAULT_RESYNC_SECONDS:g}), so that each idle window holds one periodic resync; "
             f"{meta['unrelated']} unrelated objects per run; the operator serves /metrics, "
             "scraped every 15 s while idle.")
    layers = "\n".join(["| imported | RSS (MB) | added (MB) |", "|---|---|---|",
                         *(f"| {name} | {total:g} | {added:g} |"
                           for name, total, added in imports)])
    text = _replace_section(DOC.read_text(), "bench", f"{facts}\n\n{table}")
    text = _replace_section(text, "comparison", comparison_table(summary))
    DOC.write_text(_replace_section(text, "imports", layers))


def compile_operator() -> None:
    """Compile the operator's package as the image's `pip install` does (Dockerfile): with
    PYTHONDONTWRITEBYTECODE set (the image sets it, and so may the shell) and no bytecode in
    the checkout, every start would compile the sources again, which the image never does
    (git ignores the caches)."""
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "manager")],
                   check=True, capture_output=True, timeout=300)


async def main_async(args: argparse.Namespace) -> None:
    controlplane.require_loopback_only_network()
    compile_operator()
    workdir = Path(tempfile.mkdtemp(prefix="eso-bench-"))
    cluster = SimulatedCluster(workdir, audit=True)
    figures = Figures()
    with cluster:
        plane = cluster.plane
        crds.install(cluster.api, crds.all_crds())
        kube = Kube.connect(plane.kubeconfig)
        try:
            bench = Bench(plane, kube)
            session = Session(bench, Audit(plane.audit_log), await bench.operator_kubeconfig(),
                              args, figures)
            for run in range(args.runs):
                print(f"run {run + 1}/{args.runs}", flush=True)
                await one_run(session, run)
        finally:
            await kube.close()
        meta = {"date": datetime.now(UTC).strftime("%Y-%m-%d"), "machine": machine(),
                "kube": plane.version, "runs": args.runs, "idle_seconds": args.idle_seconds,
                "resync_seconds": args.resync_seconds, "unrelated": args.unrelated}
    write_results(figures.summary(), meta, import_memory())
    print(json.dumps(figures.summary(), indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--idle-seconds", type=float, default=60.0,
                        help="idle window per run (5 runs x 60 s = 5 idle minutes)")
    parser.add_argument("--resync-seconds", type=float, default=60.0,
                        help="the operator's periodic resync; no longer than the idle window, "
                        "so that the window holds one (the operator's default: "
                        f"{DEFAULT_RESYNC_SECONDS:g})")
    parser.add_argument("--unrelated", type=int, default=5000)
    asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    main()
