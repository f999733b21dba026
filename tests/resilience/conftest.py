"""Fixtures of the resilience suites: the operator as a real process, as its own identity.

Every operator here is a separate process (`python -m manager run --kubeconfig ...`), so a
SIGKILL is a real crash, authenticated as its ServiceAccount with the shipped RBAC
(manifests/operator/rbac.yaml). The session's API server writes an audit log (one JSON line
per request, see LocalControlPlane.audit); requests of that ServiceAccount are the
operator's, and the suites count them, list the permissions they used, and look for
forbidden responses.

The session's control plane is shared with the other suites and starts with its audit log
on (tests/conftest.py). Each test uses its own operand namespace (namespaces never finish deleting
here), and leaves no ExternalSecretsConfig behind.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
import urllib.error
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from devcluster import controlplane
from manager.apply.discovery import Discovery
from manager.client.kube import ApiError, Kube, install_crds
from manager.paths import REPO_ROOT
from manager.runtime.operator import load_crds
from tests.conftest import Cluster
from tests.e2e.operator_process import assert_log_clean, free_port
from tests.integration import conftest as integration
from tests.integration.conftest import (
    ESC_API,
    EscHandle,
    eventually,
    managed_objects,
    remove_operand_webhooks,
)
from tests.integration.test_controller_rbac import (
    OPERATOR_NAMESPACE,
    SERVICE_ACCOUNT,
    service_account_kubeconfig,
)
from tests.operand import counts_as_installed, remove_operand

USE_EXISTING_CLUSTER = os.environ.get("USE_EXISTING_CLUSTER") == "1"
logger = logging.getLogger("tests.resilience")

# The integration suite's fixtures, registered here too (the CRDs; the admin client `kube` is
# in tests/conftest.py).
crd_dir = integration.crd_dir
operator_crds = integration.operator_crds
operand_crds = integration.operand_crds

OPERATOR_USER = f"system:serviceaccount:{OPERATOR_NAMESPACE}:{SERVICE_ACCOUNT}"
WRITE_VERBS = frozenset({"create", "update", "patch", "delete", "deletecollection"})
CERT_MANAGER_GROUP_PATH = "/apis/cert-manager.io/v1"
CRD_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"

LEASES = ("coordination.k8s.io", "leases")

Key = tuple[str, str, str]  # (kind, namespace, name)


# --- the API server's audit log -------------------------------------------------------------


@dataclass(frozen=True)
class AuditLog:
    """Requests of one user, read from the API server's audit log (one JSON line each).

    `mark()` is a position in the log; `entries(start, end)` the user's requests logged
    between two marks. An entry is logged when its response completed (a watch: when it
    ended).
    """

    path: Path
    username: str
    session_start: int

    def mark(self) -> int:
        return self.path.stat().st_size if self.path.exists() else 0

    def entries(self, start: int | None = None, end: int | None = None, *,
                everyone: bool = False) -> list[dict[str, Any]]:
        start = self.session_start if start is None else start
        with self.path.open("rb") as log:
            log.seek(start)
            data = log.read() if end is None else log.read(max(0, end - start))
        found = []
        for line in data.split(b"\n"):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except ValueError:  # a line still being written at `end`
                continue
            if everyone or entry.get("user", {}).get("username") == self.username:
                found.append(entry)
        return found


def resource_of(entry: dict[str, Any]) -> tuple[str, str]:
    """(API group, resource[/subresource]) of an audit entry."""
    ref = entry.get("objectRef") or {}
    resource = ref.get("resource", "")
    if ref.get("subresource"):
        resource = f"{resource}/{ref['subresource']}"
    return ref.get("apiGroup", ""), resource


def writes(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in entries if e.get("verb") in WRITE_VERBS]


@pytest.fixture(scope="session")
def control_plane(cluster: Cluster) -> controlplane.LocalControlPlane:
    """The session's local control plane, with its audit log on."""
    plane = cluster.local
    if plane is None:
        pytest.skip("the resilience suites restart kube-apiserver and read its audit log: "
                    "they need the local control plane, not USE_EXISTING_CLUSTER")
    assert plane.audit, "tests/conftest.py starts the session control plane with its audit log"
    return plane


@dataclass(frozen=True)
class Restart:
    began: datetime
    ended: datetime


# Restarts of kube-apiserver in this session: for a moment after each, the new server
# answers 403 while its RBAC caches fill (the operator must ride that out).
RESTARTS: list[Restart] = []
RBAC_WARM_UP = timedelta(seconds=10)


def restart_apiserver(plane: controlplane.LocalControlPlane, downtime: float = 0.0,
                      grace: float = 15.0) -> None:
    began = datetime.now(UTC)
    plane.restart_apiserver(downtime, grace)
    wait_for_custom_resource_storage(plane)
    RESTARTS.append(Restart(began, datetime.now(UTC)))


def wait_for_custom_resource_storage(plane: controlplane.LocalControlPlane,
                                     timeout: float = 30.0) -> None:
    """/readyz passes before the storage of every CRD is initialised (429 until then)."""
    deadline = time.monotonic() + timeout
    crds = plane.get_json(CRD_PATH)["items"]
    for crd in crds:
        group, plural = crd["spec"]["group"], crd["spec"]["names"]["plural"]
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served"))
        while True:
            try:
                plane.get_json(f"/apis/{group}/{version}/{plural}?limit=1")
                break
            except urllib.error.HTTPError as error:
                if error.code != 429 or time.monotonic() > deadline:
                    raise
            time.sleep(0.1)


def just_after_a_restart(entry: dict[str, Any]) -> bool:
    logged = datetime.fromisoformat(entry["stageTimestamp"].replace("Z", "+00:00"))
    return any(r.began <= logged <= r.ended + RBAC_WARM_UP for r in RESTARTS)


@pytest.fixture(scope="session")
def audit(control_plane: controlplane.LocalControlPlane) -> AuditLog:
    """The operator's requests (its ServiceAccount's) from here on."""
    log = AuditLog(control_plane.audit_log, OPERATOR_USER, 0)
    return AuditLog(log.path, log.username, log.mark())


# --- the operator as a process --------------------------------------------------------------


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def operator_kubeconfig(*, kube: Kube, cluster: Cluster, control_plane: Any,
                              operator_crds: None, operand_crds: None,
                              tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Path]:
    """A kubeconfig of the operator's ServiceAccount, bound to the shipped RBAC only.

    Afterwards the operand's webhook configurations are removed again (nothing serves them
    here, and later suites create objects they match)."""
    path = await service_account_kubeconfig(kube, cluster, tmp_path_factory.mktemp("identity"))
    yield path
    await remove_operand_webhooks(kube)


@dataclass
class OperatorProcess:
    """`python -m manager run` as the operator's ServiceAccount; its log in `log_path`."""

    kubeconfig: Path
    log_path: Path
    verbose: bool = False
    arguments: tuple[str, ...] = ()
    """More arguments of `run` (leader election, for the privilege scenario)."""
    process: subprocess.Popen[bytes] | None = None
    metrics_port: int = 0
    """Where it serves /metrics (HTTPS, to allowed bearer tokens)."""
    _log_offset: int = 0

    def start(self) -> OperatorProcess:
        command = [sys.executable, "-m", "manager", "run", "--kubeconfig", str(self.kubeconfig),
                   "--resync-seconds", "3600"]
        if self.verbose:
            command.append("--verbose")
        command.extend(self.arguments)
        # Metrics on loopback, on a port of their own: the pods' relays hold <podIP>:8080 in
        # this network namespace.
        self.metrics_port = free_port()
        environment = {**os.environ, "POD_NAMESPACE": OPERATOR_NAMESPACE,
                       "POD_NAME": self.log_path.stem, "PYTHONUNBUFFERED": "1",
                       "METRICS_ADDR": f"127.0.0.1:{self.metrics_port}"}
        for variable in ("KUBECONFIG", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY"):
            environment.pop(variable, None)
        self._log_offset = self.log_path.stat().st_size if self.log_path.exists() else 0
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, cwd=REPO_ROOT,
                                            env=environment, start_new_session=True)
        return self

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log(self) -> str:
        """This process's log (since its start)."""
        if not self.log_path.exists():
            return ""
        with self.log_path.open("rb") as log:
            log.seek(self._log_offset)
            return log.read().decode(errors="replace")

    async def wait_started(self, timeout: float = 30.0) -> None:
        """Until the runtime runs (its first pass is queued)."""
        deadline = time.monotonic() + timeout
        while "action=start " not in self.log():
            assert self.alive, f"the operator exited:\n{self.log()[-3000:]}"
            assert time.monotonic() < deadline, f"the operator did not start:\n{self.log()}"
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no clean-up of any kind runs."""
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self, timeout: float = 15.0) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)


StartOperator = Callable[..., Awaitable[OperatorProcess]]


@pytest_asyncio.fixture(loop_scope="session")
async def start_operator(operator_kubeconfig: Path, tmp_path: Path,
                         ) -> AsyncIterator[StartOperator]:
    """Start operator processes (all stopped after the test); `wait=False` returns at once."""
    started: list[OperatorProcess] = []

    async def start(wait: bool = True, verbose: bool = False,
                    arguments: tuple[str, ...] = ()) -> OperatorProcess:
        log_path = tmp_path / f"operator-{len(started) + 1}.log"
        operator = OperatorProcess(operator_kubeconfig, log_path, verbose, arguments).start()
        started.append(operator)
        if wait:
            await operator.wait_started()
        return operator

    yield start
    for operator in started:  # all stopped before any verdict
        operator.stop()
    for operator in started:
        assert_no_crash(operator)


def assert_no_crash(operator: OperatorProcess) -> None:
    """No pass crashed and no task died with a traceback (a dead worker looks alive)."""
    assert_log_clean(operator.log(), str(operator.log_path))


# --- the ExternalSecretsConfig, objects, conditions -----------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def esc(kube: Kube, operator_kubeconfig: Path) -> AsyncIterator[EscHandle]:
    """The singleton ESC, absent at the start; afterwards it and the operand are removed
    (the operand's processes really run)."""
    await delete_esc(kube)
    yield EscHandle(kube)
    await remove_operand(kube)


async def delete_esc(kube: Kube) -> None:
    await kube.delete(f"{ESC_API}/cluster")
    deadline = time.monotonic() + 30
    while await kube.get(f"{ESC_API}/cluster") is not None:
        assert time.monotonic() < deadline, "the ExternalSecretsConfig was not deleted"
        await asyncio.sleep(0.05)


async def replace_spec(kube: Kube, path: str, spec: dict[str, Any]) -> dict[str, Any]:
    """Set the whole spec (JSON patch: no resourceVersion race with status writes)."""
    return await kube.request("PATCH", path, body=[{"op": "add", "path": "/spec", "value": spec}],
                              content_type="application/json-patch+json")


async def condition(kube: Kube, kind: str) -> dict[str, Any] | None:
    esc = await kube.get(f"{ESC_API}/cluster")
    for item in ((esc or {}).get("status") or {}).get("conditions") or []:
        if item["type"] == kind:
            return dict(item)
    return None


async def wait_condition(kube: Kube, kind: str, status: str, *, contains: str = "",
                         reason: str | None = None, timeout: float = 30.0) -> dict[str, Any]:
    """Until the ESC's `kind` condition has `status`, for the current generation."""
    async def check() -> dict[str, Any]:
        esc = await kube.request("GET", f"{ESC_API}/cluster")
        found = {c["type"]: c for c in (esc.get("status") or {}).get("conditions") or []}
        current = found.get(kind)
        assert current is not None, f"no {kind} condition yet: {esc.get('status')}"
        assert current.get("observedGeneration") == esc["metadata"]["generation"], current
        assert current["status"] == status, current
        # the conditions summarise; status.failure.message has the whole text
        whole = ((esc.get("status") or {}).get("failure") or {}).get("message", "")
        assert contains in current["message"] or contains in whole, current
        if whole:
            current["whole"] = whole
        if reason is not None:
            assert current["reason"] == reason, current
        return dict(current)

    result: dict[str, Any] = await eventually(check, timeout, interval=0.05)
    return result


async def wait_installed(kube: Kube, namespace: str, timeout: float = 60.0,
                         ) -> dict[str, Any]:
    """Until the ESC is Ready for its generation, bitwarden-sdk-server included if it is on
    (tests/operand.py); the operand's namespace names it in the failure."""
    async def check() -> dict[str, Any]:
        esc = await kube.request("GET", f"{ESC_API}/cluster")
        ready = next((c for c in (esc.get("status") or {}).get("conditions") or []
                      if c["type"] == "Ready"), None)
        assert ready is not None, esc.get("status")
        assert ready.get("observedGeneration") == esc["metadata"]["generation"], ready
        assert counts_as_installed(esc.get("status")), f"{namespace}: {esc.get('status')}"
        return dict(ready)

    result: dict[str, Any] = await eventually(check, timeout, interval=0.05)
    return result


def strip_volatile(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as its manifest decides it: no status, server bookkeeping or random IPs, and
    none of what the running operand fills in (the cert-controller's certificate and
    caBundles)."""
    metadata = {k: v for k, v in obj["metadata"].items()
                if k in ("name", "namespace", "labels", "annotations", "ownerReferences")}
    body = {k: v for k, v in obj.items() if k not in ("metadata", "status")}
    if obj.get("kind") == "Service":
        body["spec"] = {k: v for k, v in body["spec"].items()
                        if k not in ("clusterIP", "clusterIPs")}
    if obj.get("kind") == "Secret":
        body.pop("data", None)
    if obj.get("kind") == "ValidatingWebhookConfiguration":
        body["webhooks"] = [{**hook, "clientConfig": {k: v for k, v in hook["clientConfig"].items()
                                                      if k != "caBundle"}}
                            for hook in body.get("webhooks") or []]
    return {**body, "metadata": metadata}


async def snapshot(kube: Kube, namespace: str) -> dict[Key, dict[str, Any]]:
    """Our objects (operand namespace and cluster-scoped), as strip_volatile shows them."""
    found = await managed_objects(kube, namespace)
    return {key: strip_volatile(obj) for key, obj in found.items()
            if not key[2].startswith("external-secrets-operator-")}


async def uids(kube: Kube, namespace: str) -> dict[Key, str]:
    return {key: obj["metadata"]["uid"]
            for key, obj in (await managed_objects(kube, namespace)).items()}


async def wipe_operand(kube: Kube, namespace: str) -> None:
    """Delete every managed object of this namespace and the cluster-scoped ones (not the
    Namespace itself, which would never finish deleting here)."""
    for (kind, _, name), obj in (await managed_objects(kube, namespace)).items():
        if kind == "Namespace" or name.startswith("external-secrets-operator-"):
            continue
        await kube.delete(await object_path(kube, obj))


async def object_path(kube: Kube, obj: dict[str, Any]) -> str:
    resource = await Discovery(kube).require(obj["apiVersion"], obj["kind"])
    return resource.object_path(obj["metadata"]["name"], obj["metadata"].get("namespace"))


async def wait_quiet(audit: AuditLog, quiet: float = 1.5, timeout: float = 30.0) -> None:
    """Until the operator sent no request for `quiet` seconds (watches and the leader
    Lease's renewals, its steady heartbeat, excepted)."""
    deadline = time.monotonic() + timeout
    mark, since = audit.mark(), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "the operator never went quiet"
        await asyncio.sleep(0.1)
        now = audit.mark()
        if [e for e in audit.entries(mark, now)
                if e.get("verb") != "watch" and resource_of(e) != LEASES]:
            since = time.monotonic()
        mark = now


async def retry_api(call: Callable[[], Awaitable[Any]], timeout: float = 30.0) -> Any:
    """`call`, retried while the API server is unreachable or busy (after its restart)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return await call()
        except ApiError as error:
            if not error.transient or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


# --- cert-manager's CRDs ----------------------------------------------------------------------


CERT_MANAGER_CRDS = ("certificates.cert-manager.io", "issuers.cert-manager.io",
                     "clusterissuers.cert-manager.io", "certificaterequests.cert-manager.io",
                     "orders.acme.cert-manager.io", "challenges.acme.cert-manager.io")


async def set_cert_manager(kube: Kube, crds: Path, installed: bool) -> None:
    """Install cert-manager's CRDs, or remove them (and with them every cert-manager object)."""
    if installed:
        await install_crds(kube, load_crds(crds / "cert-manager"), field_manager="cert-manager")
        return
    for name in CERT_MANAGER_CRDS:
        await kube.delete(f"{CRD_PATH}/{name}")

    async def gone() -> None:
        served = await kube.get(CERT_MANAGER_GROUP_PATH)
        assert not (served or {}).get("resources"), "cert-manager.io/v1 is still served"

    await eventually(gone, timeout=60)


@dataclass
class Rounds:
    """A record of what a randomised test did, printed (pytest shows it on failure)."""

    lines: list[str] = field(default_factory=list)

    def add(self, line: str) -> None:
        self.lines.append(line)
        logger.info(line)
        print(line, flush=True)


@pytest.fixture
def rounds() -> Rounds:
    return Rounds()


@contextlib.contextmanager
def timer() -> Iterator[Callable[[], float]]:
    start = time.monotonic()
    yield lambda: time.monotonic() - start
