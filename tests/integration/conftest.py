"""Fixtures for running the operator in-process against the session's real API server.

The operator runs in its own thread with its own event loop (as in production, where it owns
the process): kopf cancels every task of its loop when it stops, which must not reach the
test session's loop. Every HTTP request the operator thread makes (kopf's and the
operator's own, both through aiohttp) is recorded, so tests can count writes; a test may
also inject a connection fault into that thread's requests (the real server cannot produce
a transient failure on demand; tests that do this say so). So are the thread's log records:
the reasons of each pass (a test proves that its trigger woke the operator before it asserts
that nothing happened), and any crashed pass or traceback, which fails the test, as a crash
in the operator's log fails the resilience suites (a worker whose pass crashed looks alive:
it retries). An operator that does not stop, or whose thread ended with an error, fails the
test too.

The ExternalSecretsConfig is a singleton and one cluster serves the whole session, so
scenarios run one after another, each with its own operand namespace. The operand really
runs (the pod runner starts its processes), so after each scenario the `esc` fixture
deletes the ESC and then removes the operand the way an administrator would
(manager.steps.uninstall): two operands at once would fight over the cluster-scoped webhook
configurations. The scenario namespaces, and the user objects in them (an ExternalSecret, a
SecretStore, a Secret without our labels), are created once per module, while no operand
webhook configuration exists (a configuration whose webhook is not served would refuse them).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
import pytest_asyncio
import yaml

from devcluster.crds import OPENSHIFT_CONFIG_API, OPENSHIFT_CONFIG_OBJECTS
from manager.client.kube import CRD_COLLECTION, ApiError, Kube, install_crds
from manager.names import FIELD_MANAGER
from manager.paths import REPO_ROOT
from manager.render.state import renderable_kinds
from manager.runtime.operator import CRDS_DIR, OperatorOptions, load_crds, serve
from manager.runtime.worker import OperatorRuntime
from tests.conftest import Cluster
from tests.e2e.operator_process import log_problems
from tests.operand import (
    BITWARDEN_TLS_SECRET,
    bitwarden_tls_secret,
    counts_as_installed,
    remove_operand,
)
from tests.waiting import eventually

USE_EXISTING_CLUSTER = os.environ.get("USE_EXISTING_CLUSTER") == "1"
FETCH_CRDS = REPO_ROOT / "hack" / "fetch-crds.sh"
RBAC_FILE = REPO_ROOT / "manifests" / "operator" / "rbac.yaml"

ESC_API = "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs"
ESM_PATH = "/apis/operator.openshift.io/v1alpha1/externalsecretsmanagers/cluster"
MANAGED = "app.kubernetes.io/managed-by=external-secrets-operator"
WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})

# One operand namespace per scenario (the default one for the `spec: {}` install).
CONDITION_MESSAGE_LIMIT = 160  # manager.reporting.summary.LIMIT, stated here on purpose
SCENARIO_NAMESPACES = {
    "install": "external-secrets",
    "bitwarden": "eso-it-bitwarden",
    "cert-manager": "eso-it-cert-manager",
    "drift": "eso-it-drift",
    "restart": "eso-it-restart",
    "invalid": "eso-it-invalid",
    "transient": "eso-it-transient",
    "service-account": "eso-it-sa",
    "apply": "eso-it-apply",
    "policies": "eso-it-policies",
    "operating-namespace": "eso-it-narrow",
    "events": "eso-it-events",
    "columns": "eso-it-columns",
    "failure": "eso-it-failure",
    "lifetimes": "eso-it-lifetimes",
    "ca-switch": "eso-it-ca-switch",
    "process": "eso-it-process",
    "management": "eso-it-management",
    "plan": "eso-it-plan",
    "plan-pass": "eso-it-plan-pass",
    "shadowed": "eso-it-shadowed",
    "knobs": "eso-it-knobs",
    "metrics": "eso-it-metrics",
    "monitoring": "eso-it-monitoring",
    "tls-profile": "eso-it-tls",
    "wire-scan": "eso-it-wire",
    "waiting": "eso-it-waiting",
    "generic-targets": "eso-it-generic",
    # long, so that the names in status summaries are long (63 is the limit)
    "status-line": "eso-it-status-line-with-a-long-namespace-name-to-fill-summaries",
}
USER_NAMESPACE = "eso-it-user-apps"


# --- recording the operator's requests ------------------------------------------------------


PASS_LINE = re.compile(r"^action=pass number=(?P<number>\d+) .* reasons=(?P<reasons>.*)$")


@dataclass
class RequestLog:
    """Requests and log records of one operator thread; `fault` makes matching requests fail
    to connect."""

    requests: list[tuple[str, str]] = field(default_factory=list)
    fault: Callable[[str, str], bool] | None = None
    records: list[logging.LogRecord] = field(default_factory=list)
    passes_ended: int = 0
    passes_before: list[int] = field(default_factory=list)
    """For each request, how many passes had ended (logged their line) when it was sent."""

    def writes(self) -> list[tuple[str, str]]:
        return [(m, u) for m, u in self.requests if m in WRITE_METHODS]

    def forget_requests(self) -> None:
        self.requests.clear()
        self.passes_before.clear()

    def requests_of_pass(self, number: int) -> list[tuple[str, str]]:
        """The requests sent while pass `number` ran (and the watches' at the same time)."""
        return [request for request, ended in zip(self.requests, self.passes_before, strict=True)
                if ended == number - 1]

    def pass_reasons(self) -> dict[int, str]:
        """Pass number -> the reasons it ran for, as its log line gives them."""
        found = {}
        for record in list(self.records):
            match = PASS_LINE.match(record.getMessage())
            if match:
                found[int(match["number"])] = match["reasons"]
        return found

    def crashes(self) -> list[str]:
        """Each crashed pass (`result=crash`) and each record with a traceback: the check of
        every suite's operator logs (`log_problems`), record by record."""
        formatter = logging.Formatter("%(levelname)s %(name)s %(message)s")
        return [problem for record in list(self.records)
                for problem in log_problems(formatter.format(record))]


_LOGS: dict[int, RequestLog] = {}
_ORIGINAL_REQUEST = aiohttp.ClientSession._request


async def _recording_request(self: aiohttp.ClientSession, method: str, url: Any,
                             *args: Any, **kwargs: Any) -> aiohttp.ClientResponse:
    log = _LOGS.get(threading.get_ident())
    if log is not None:
        text = str(url)
        log.requests.append((method.upper(), text))
        log.passes_before.append(log.passes_ended)
        if log.fault is not None and log.fault(method.upper(), text):
            raise aiohttp.ClientConnectionError(f"injected by the test: {method} {text}")
    return await _ORIGINAL_REQUEST(self, method, url, *args, **kwargs)


class _RecordingHandler(logging.Handler):
    """Keeps each record of an operator thread in that thread's RequestLog."""

    def emit(self, record: logging.LogRecord) -> None:
        log = _LOGS.get(record.thread or 0)
        if log is not None:
            log.records.append(record)
            log.passes_ended += bool(PASS_LINE.match(record.getMessage()))


@pytest.fixture(scope="session", autouse=True)
def _record_requests() -> Iterator[None]:
    aiohttp.ClientSession._request = _recording_request  # type: ignore[method-assign]
    handler = _RecordingHandler()
    runtime_logger = logging.getLogger("manager.runtime.worker")
    level = runtime_logger.level
    runtime_logger.setLevel(logging.INFO)  # the pass lines
    logging.getLogger().addHandler(handler)
    yield
    logging.getLogger().removeHandler(handler)
    runtime_logger.setLevel(level)
    aiohttp.ClientSession._request = _ORIGINAL_REQUEST  # type: ignore[method-assign]


# --- the operator in a thread ---------------------------------------------------------------


class OperatorThread:
    """One operator process's worth of work, in a thread of this process."""

    def __init__(self, options: OperatorOptions):
        self.options = options
        self.log = RequestLog()
        self.holder: dict[str, OperatorRuntime] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="operator", daemon=True)
        self.error: BaseException | None = None

    def _main(self) -> None:
        _LOGS[threading.get_ident()] = self.log
        try:
            asyncio.run(serve(self.options, stop_flag=self._stop, holder=self.holder))
        except BaseException as error:  # reported by stop() and by the waiting helpers
            self.error = error
        finally:
            _LOGS.pop(threading.get_ident(), None)

    async def start(self, timeout: float = 30.0) -> OperatorThread:
        self._thread.start()
        await self.wait_until(lambda: self.runtime is not None, timeout, "the operator to start")
        return self

    async def stop(self, timeout: float = 30.0) -> None:
        """Stop it; fails if it does not stop within `timeout` or ended with an error."""
        self._stop.set()
        await asyncio.to_thread(self._thread.join, timeout)
        assert not self._thread.is_alive(), f"the operator did not stop within {timeout} s"
        assert self.error is None, f"the operator ended with an error: {self.error!r}"

    def crashes(self) -> list[str]:
        return self.log.crashes()

    def assert_healthy(self) -> None:
        """The thread has not ended with an error, and no pass crashed."""
        if self.error is not None:
            raise AssertionError(f"the operator crashed: {self.error!r}")
        if crashes := self.crashes():
            raise AssertionError("a pass of the operator crashed:\n" + "\n".join(crashes))

    @property
    def runtime(self) -> OperatorRuntime | None:
        return self.holder.get("runtime")

    @property
    def passes(self) -> int:
        runtime = self.runtime
        return runtime.last_pass.number if runtime and runtime.last_pass else 0

    async def wait_until(self, predicate: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not predicate():
            self.assert_healthy()
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out after {timeout}s waiting for {what}")
            await asyncio.sleep(0.1)

    async def wait_idle(self, quiet: float = 1.5, timeout: float = 30.0) -> None:
        """Until at least one pass ran and no pass started for `quiet` seconds."""
        await self.wait_until(lambda: self.passes > 0, timeout, "a first pass")
        deadline = time.monotonic() + timeout
        last, since = self.passes, time.monotonic()
        while time.monotonic() - since < quiet:
            self.assert_healthy()
            assert time.monotonic() < deadline, "the operator never went idle"
            await asyncio.sleep(0.1)
            runtime = self.runtime
            if self.passes != last or (runtime is not None and runtime.queue.pending):
                last, since = self.passes, time.monotonic()

    async def wait_woken(self, after: int, reason: str, timeout: float = 30.0) -> None:
        """Until a pass numbered above `after` ran for `reason` (part of the reason its
        trigger gave, such as "modified ExternalSecretsConfig cluster"), then until idle.
        Proof that a trigger reached the operator, before asserting that its pass did
        nothing: `after = operator.passes` before the trigger."""
        def woken() -> bool:
            return any(number > after and reason in reasons
                       for number, reasons in self.log.pass_reasons().items())

        try:
            await self.wait_until(woken, timeout, f"a pass after pass {after} for {reason!r}")
        except AssertionError as error:
            since = {n: r for n, r in self.log.pass_reasons().items() if n > after}
            raise AssertionError(f"{error}; the passes since: {since}") from None
        await self.wait_idle()


StartOperator = Callable[..., Awaitable[OperatorThread]]
"""The `start_operator` fixture: start an operator in-process; kwargs go to OperatorOptions."""


@pytest_asyncio.fixture(loop_scope="session")
async def start_operator(cluster: Cluster, operator_crds: None,
                         ) -> AsyncIterator[StartOperator]:
    """Start operators (stopped at the end of the test); kwargs go to OperatorOptions."""
    started: list[OperatorThread] = []

    async def start(**overrides: Any) -> OperatorThread:
        options = OperatorOptions(**{"kubeconfig": str(cluster.kubeconfig),
                                     "resync_seconds": 3600.0, **overrides})
        operator = await OperatorThread(options).start()
        started.append(operator)
        return operator

    yield start
    problems = []
    for operator in started:  # every one is stopped, whatever the first one's trouble
        try:
            await operator.stop()
        except AssertionError as error:
            problems.append(str(error))
        problems.extend(operator.crashes())
    assert not problems, "\n".join(problems)


# --- cluster preparation ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def crd_dir() -> Path:
    result = subprocess.run(["bash", str(FETCH_CRDS)], stdout=subprocess.PIPE, text=True,
                            check=True, timeout=900)
    return Path(result.stdout.strip().splitlines()[-1])


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def operator_crds(kube: Kube) -> None:
    await install_crds(kube, load_crds(CRDS_DIR), field_manager="integration-tests")


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def operand_crds(kube: Kube, crd_dir: Path) -> None:
    await install_crds(kube, load_crds(crd_dir / "external-secrets"),
                       field_manager="integration-tests")


async def install_openshift_config(kube: Kube, crd_dir: Path) -> None:
    """OpenShift's config API (APIServer, Proxy) with their `cluster` objects, as the
    simulated cluster's OpenShift mode serves them (devcluster/crds.py)."""
    await install_crds(kube, load_crds(crd_dir / "openshift-config"),
                       field_manager="integration-tests")
    for path, obj in OPENSHIFT_CONFIG_OBJECTS:
        await kube.apply(path, obj, field_manager="integration-tests")


async def remove_openshift_config(kube: Kube, crd_dir: Path) -> None:
    """Back to plain Kubernetes: the config API is no longer served."""
    names = [crd["metadata"]["name"] for crd in load_crds(crd_dir / "openshift-config")]
    for name in names:
        await kube.delete(f"{CRD_COLLECTION}/{name}")

    async def gone() -> None:
        for name in names:
            assert await kube.get(f"{CRD_COLLECTION}/{name}") is None, name
        served = await kube.get(OPENSHIFT_CONFIG_API)
        assert not (served or {}).get("resources"), f"{OPENSHIFT_CONFIG_API} is still served"

    await eventually(gone, timeout=30)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def openshift_config(kube: Kube, crd_dir: Path) -> AsyncIterator[None]:
    """The session's cluster serves OpenShift's config API for one module, then no longer:
    plain Kubernetes stays the default for every other test."""
    if USE_EXISTING_CLUSTER:
        yield  # an OpenShift cluster has it; on another, the tests that need it say so
        return
    await install_openshift_config(kube, crd_dir)
    yield
    await remove_openshift_config(kube, crd_dir)


@dataclass(frozen=True)
class UserObjects:
    """Objects users own; the operator must never change or delete them.

    The running operand does change them (it writes an ExternalSecret's status), so
    "untouched by the operator" means: the same object (uid), the same spec (generation), and
    no field ever written by the operator's field manager."""

    refs: tuple[tuple[str, str], ...]  # (collection path, name)
    versions: dict[str, tuple[str, int | None]]  # object path -> (uid, generation) at creation

    async def assert_untouched(self, kube: Kube) -> None:
        for path, (uid, generation) in self.versions.items():
            live = await kube.get(path)
            assert live is not None, f"user object {path} was deleted"
            meta = live["metadata"]
            assert meta["uid"] == uid, f"user object {path} was deleted and re-created"
            assert meta.get("generation") == generation, f"user object {path} changed"
            managers = {entry.get("manager") for entry in meta.get("managedFields") or []}
            assert FIELD_MANAGER not in managers, f"the operator wrote to {path}"


def _user_objects_for(namespace: str) -> list[tuple[str, dict[str, Any]]]:
    secret_store = {
        "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": "user-store", "namespace": namespace},
        "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}},
    }
    external_secret = {
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": "user-external-secret", "namespace": namespace},
        "spec": {"secretStoreRef": {"name": "user-store", "kind": "SecretStore"},
                 "target": {"name": "user-synced"},
                 "data": [{"secretKey": "k", "remoteRef": {"key": "k"}}]},
    }
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": "user-secret", "namespace": namespace,
                           "labels": {"app": "external-secrets"}},
              "stringData": {"password": "not-for-the-operator"}}
    return [
        (f"/apis/external-secrets.io/v1/namespaces/{namespace}/secretstores", secret_store),
        (f"/apis/external-secrets.io/v1/namespaces/{namespace}/externalsecrets", external_secret),
        (f"/api/v1/namespaces/{namespace}/secrets", secret),
    ]


WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


async def remove_operand_webhooks(kube: Kube) -> None:
    """Delete the operand's webhook configurations (no operator runs between modules), so
    that user objects can be created and deleted: nothing serves those webhooks here."""
    for item in (await kube.list(WEBHOOKS, label_selector=MANAGED)).get("items") or []:
        await kube.delete(f"{WEBHOOKS}/{item['metadata']['name']}")


async def _past_stale_webhooks(request: Callable[[], Awaitable[Any]]) -> Any:
    """Run `request`, retrying while the API server still calls a webhook configuration that
    was just deleted (its admission cache follows the deletion a moment later)."""
    deadline = time.monotonic() + 15
    while True:
        try:
            return await request()
        except ApiError as error:
            if "webhook" not in error.message or time.monotonic() > deadline:
                raise
        await asyncio.sleep(0.2)


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def user_objects(kube: Kube, operand_crds: None, operator_crds: None,
                       ) -> AsyncIterator[UserObjects]:
    """Every scenario namespace with user objects in it, created before any webhook exists;
    removed again after the module, so that later tests find the cluster as they expect."""
    await remove_operand_webhooks(kube)
    versions: dict[str, str] = {}
    refs = []
    for namespace in [USER_NAMESPACE, *SCENARIO_NAMESPACES.values()]:
        await kube.apply(f"/api/v1/namespaces/{namespace}",
                         {"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": namespace}}, field_manager="integration-tests")
        for collection, body in _user_objects_for(namespace):
            path = f"{collection}/{body['metadata']['name']}"
            await _gone(kube, path)
            created = await _past_stale_webhooks(
                lambda collection=collection, body=body: kube.create(
                    collection, body, field_manager="integration-tests"))
            versions[path] = (created["metadata"]["uid"], created["metadata"].get("generation"))
            refs.append((collection, body["metadata"]["name"]))
    yield UserObjects(tuple(refs), versions)
    await remove_operand_webhooks(kube)
    for path in versions:
        await _gone(kube, path)


async def _gone(kube: Kube, path: str, timeout: float = 15.0) -> None:
    """Delete a user object the tests made and wait until it is gone, first releasing the
    finalizer a controller that no longer runs left on it (external-secrets v1.x puts one on
    every ExternalSecret; only its running controller removes it)."""
    live = await kube.get(path)
    if live is None:
        return
    if live["metadata"].get("finalizers"):
        await _past_stale_webhooks(lambda: kube.merge_patch(
            path, {"metadata": {"finalizers": None}}, field_manager="integration-tests"))
    await _past_stale_webhooks(lambda: kube.delete(path))
    deadline = time.monotonic() + timeout
    while await kube.get(path) is not None:
        assert time.monotonic() < deadline, f"{path} was not deleted"
        await asyncio.sleep(0.1)


# --- the ExternalSecretsConfig ---------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def esc(kube: Kube, user_objects: UserObjects) -> AsyncIterator[EscHandle]:
    """Create/patch/read the singleton ESC; after the test it is deleted and the operand it
    installed is removed (see the module doc)."""
    handle = EscHandle(kube)
    yield handle
    await remove_operand(kube)


@dataclass
class EscHandle:
    kube: Kube

    async def create(self, spec: dict[str, Any]) -> dict[str, Any]:
        body = {"apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
                "metadata": {"name": "cluster"}, "spec": spec}
        return await self.kube.create(ESC_API, body, field_manager="integration-tests")

    async def patch_spec(self, spec: dict[str, Any]) -> dict[str, Any]:
        return await self.kube.merge_patch(f"{ESC_API}/cluster", {"spec": spec},
                                           field_manager="integration-tests")

    async def get(self) -> dict[str, Any]:
        return await self.kube.request("GET", f"{ESC_API}/cluster")

    async def condition(self, kind: str) -> dict[str, Any] | None:
        """The condition `kind`; every condition read here is checked to fit on one line of
        `kubectl get esc` (the detail is in status.awaited, status.failure and Events), but
        Upgradeable, which carries the upgrade gate's whole message (no column shows it)."""
        esc = await self.get()
        conditions = (esc.get("status") or {}).get("conditions") or []
        for condition in conditions:
            if condition["type"] != "Upgradeable":
                assert len(condition.get("message", "")) <= CONDITION_MESSAGE_LIMIT, condition
        for condition in conditions:
            if condition["type"] == kind:
                return dict(condition)
        return None

    async def failure_message(self) -> str:
        """The whole message of the current failure (the conditions summarise it)."""
        status = (await self.get()).get("status") or {}
        return str((status.get("failure") or {}).get("message", ""))


def esm_entries(esm: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The entries of an ExternalSecretsManager (as read) by controller name, each condition
    of each checked to fit on one line, as EscHandle.condition checks the ESC's (the whole
    text is in Events about the ESM). For tests that need more of the ESM than one entry."""
    entries = {str(entry.get("name")): dict(entry)
               for entry in (esm.get("status") or {}).get("controllerStatuses") or []}
    for entry in entries.values():
        for condition in entry.get("conditions") or []:
            assert len(condition.get("message", "")) <= CONDITION_MESSAGE_LIMIT, entry
    return entries


async def esm_conditions(kube: Kube, controller: str) -> dict[str, dict[str, Any]]:
    """The conditions of one ExternalSecretsManager entry by type ({} while it has none);
    every entry's messages are checked to fit on one line (esm_entries)."""
    entries = esm_entries(await kube.request("GET", ESM_PATH))
    return {c["type"]: dict(c) for c in (entries.get(controller) or {}).get("conditions") or []}


# --- helpers --------------------------------------------------------------------------------


OPERATOR_NAMESPACE = "external-secrets-operator"


async def in_operator_namespace(kube: Kube, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the operator as the OLM Deployment does: POD_NAMESPACE set, the namespace there
    (where its Events, own monitoring objects and Lease live)."""
    monkeypatch.setenv("POD_NAMESPACE", OPERATOR_NAMESPACE)
    await kube.apply(f"/api/v1/namespaces/{OPERATOR_NAMESPACE}",
                     {"apiVersion": "v1", "kind": "Namespace",
                      "metadata": {"name": OPERATOR_NAMESPACE}},
                     field_manager="integration-tests")


async def wait_condition(esc: EscHandle, kind: str, status: str, timeout: float = 30.0,
                         reason: str | None = None) -> dict[str, Any]:
    async def check() -> dict[str, Any]:
        condition = await esc.condition(kind)
        assert condition is not None, f"no {kind} condition yet"
        assert condition["status"] == status, f"{kind} is {condition}"
        if reason is not None:
            assert condition["reason"] == reason, f"{kind} is {condition}"
        return condition

    result: dict[str, Any] = await eventually(check, timeout)
    return result


async def wait_installed(esc: EscHandle, namespace: str, timeout: float = 60.0,
                         ) -> dict[str, Any]:
    """Until the ESC is Ready, bitwarden-sdk-server included if it is on (tests/operand.py);
    the operand's namespace names it in the failure."""
    async def check() -> dict[str, Any]:
        status = (await esc.get()).get("status") or {}
        assert counts_as_installed(status), f"{namespace}: {status}"
        return next(c for c in status["conditions"] if c["type"] == "Ready")

    result: dict[str, Any] = await eventually(check, timeout)
    return result


async def install_with_bitwarden(kube: Kube, esc: EscHandle, namespace: str,
                                 secret: str = BITWARDEN_TLS_SECRET) -> None:
    """What an administrator does for bitwarden-sdk-server: its TLS Secret (someone else's
    object), then an ESC that installs the operand in `namespace` with it; until Ready."""
    await kube.apply(f"/api/v1/namespaces/{namespace}/secrets/{secret}",
                     bitwarden_tls_secret(namespace, secret), field_manager="someone-else")
    await esc.create({"controllerConfig": {"namespace": namespace},
                      "appConfig": {"bitwardenSecretManagerProvider": {
                          "enabled": "true", "secretRef": {"name": secret}}}})
    await wait_installed(esc, namespace)


async def managed_objects(kube: Kube, namespace: str) -> dict[tuple[str, str, str], dict[str, Any]]:
    """Our objects, by (kind, namespace, name), across every kind the renderer can produce:
    those in `namespace`, that Namespace, and the cluster-scoped ones."""
    found = {}
    for api_version, kind in renderable_kinds():
        plural = await _plural(kube, api_version, kind)
        if plural is None:
            continue
        base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        namespaced = plural[1]
        path = f"{base}/namespaces/{namespace}/{plural[0]}" if namespaced else f"{base}/{plural[0]}"
        for item in (await kube.list(path, label_selector=MANAGED)).get("items") or []:
            item.update(apiVersion=api_version, kind=kind)
            meta = item["metadata"]
            if kind == "Namespace" and meta["name"] != namespace:
                continue  # another scenario's operand namespace
            found[(kind, meta.get("namespace", ""), meta["name"])] = item
    return found


async def _plural(kube: Kube, api_version: str, kind: str) -> tuple[str, bool] | None:
    base = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    document = await kube.get(base)
    for resource in (document or {}).get("resources") or []:
        if resource["kind"] == kind and "/" not in resource["name"]:
            return resource["name"], bool(resource["namespaced"])
    return None


EVENTS = "/apis/events.k8s.io/v1/namespaces/default/events"


async def esc_events(kube: Kube, uid: str) -> list[dict[str, Any]]:
    """The Events about the ExternalSecretsConfig (or the ExternalSecretsManager) with `uid`
    (events.k8s.io/v1, in `default`), oldest first."""
    listing = await kube.list(EVENTS, field_selector=f"regarding.uid={uid}")
    return sorted(listing.get("items") or [], key=lambda e: e.get("eventTime") or "")


def rbac_documents() -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(RBAC_FILE.read_text()) if doc]


def dump(obj: object) -> str:
    return json.dumps(obj, indent=1, sort_keys=True)[:4000]

