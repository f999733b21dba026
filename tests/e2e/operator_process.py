"""The operator as an administrator runs it out of cluster: `python -m manager run`, in a
process of its own, from a source tree (this repository, or an older release checked out
elsewhere: its directory goes first on PYTHONPATH, so its `manager` package wins over the
one installed in the virtualenv)."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Generator, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Protocol, runtime_checkable

import pytest

from devcluster.api import answers_ok

CRASH = "result=crash"
TRACEBACK = "Traceback"
TRACEBACKS_SHOWN = 5  # a crash loop repeats the same one


def log_problems(log: str, *, forbidden: bool = False) -> list[str]:
    """What a healthy operator never logs, in every suite that runs it: a crashed pass or
    leader task (`result=crash`: the worker retries, so the process still looks alive) and
    any traceback (an excerpt each); with `forbidden`, also each line about a forbidden
    request, for an operator that runs with exactly the permissions its bundle grants."""
    problems = [line for line in log.splitlines()
                if CRASH in line or (forbidden and "forbidden" in line.lower())]
    start = log.find(TRACEBACK)
    for _ in range(TRACEBACKS_SHOWN):
        if start < 0:
            break
        context = log.rfind("\n", 0, max(0, start - 300)) + 1  # from a line's start
        problems.append(log[context:start + 3000])
        start = log.find(TRACEBACK, start + 1)
    return problems


def assert_clean(problems: Iterable[str], where: str) -> None:
    """Fail with every problem `log_problems` found in the log of `where`."""
    found = list(problems)
    assert not found, (f"{where}: the operator logged {len(found)} problem(s) (a crashed "
                       "pass, a traceback or a forbidden request):\n" + "\n".join(found))


def assert_log_clean(log: str, where: str, *, forbidden: bool = False) -> None:
    assert_clean(log_problems(log, forbidden=forbidden), where)


@dataclass
class LogChecker:
    """Checks growing logs a piece at a time: each call reads only the whole lines the logs
    gained since the last one, so a problem fails the test during which it was logged, once."""

    forbidden: bool = False
    _checked: dict[str, int] = field(default_factory=dict)

    def new_problems(self, logs: Mapping[str, str]) -> list[str]:
        """The problems in what each log (by name) gained, each prefixed with its name."""
        problems = []
        for name, log in sorted(logs.items()):
            start, end = self._checked.get(name, 0), log.rfind("\n") + 1
            if end > start:
                problems += [f"{name}: {problem}" for problem in
                             log_problems(log[start:end], forbidden=self.forbidden)]
                self._checked[name] = end
        return problems


@runtime_checkable
class WatchedLogs(Protocol):
    """A fixture value whose operator logs are checked after each test that uses it."""

    def new_log_problems(self) -> list[str]: ...


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    """A suite's conftest imports this hook: after each test, what the operators among its
    fixtures (WatchedLogs) logged while it ran fails that test. A crashed pass leaves the
    process alive, so the test itself may well pass; a test that failed anyway gets the
    log's problems chained to its own error."""
    try:
        yield
    finally:
        watched = {id(value): value for value in getattr(item, "funcargs", {}).values()
                   if isinstance(value, WatchedLogs)}
        assert_clean((problem for value in watched.values()
                      for problem in value.new_log_problems()), item.name)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


class OperatorProcess:
    """One `python -m manager run --kubeconfig ...` process; its output goes to `log_path`."""

    def __init__(self, source: Path, kubeconfig: Path, log_path: Path,
                 environment: Mapping[str, str] | None = None, *, name: str = "operator",
                 python: str = sys.executable):
        self.source = source
        self.python = python
        self.kubeconfig = kubeconfig
        self.log_path = log_path
        self.environment = dict(environment or {})
        self.name = name
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None
        self._log: IO[bytes] | None = None
        self._checker = LogChecker()

    def start(self, timeout: float = 60.0) -> OperatorProcess:
        """Start it and wait until kopf's liveness endpoint answers."""
        # Metrics on loopback, on a port of their own: the pods' relays hold <podIP>:8080 in
        # this network namespace (older releases ignore METRICS_ADDR).
        environment = {**os.environ, "METRICS_ADDR": f"127.0.0.1:{free_port()}",
                       **self.environment, "PYTHONPATH": str(self.source)}
        command = [self.python, "-m", "manager", "run", f"--kubeconfig={self.kubeconfig}",
                   f"--liveness=http://127.0.0.1:{self.port}/healthz"]
        self._log = self.log_path.open("ab")
        self._process = subprocess.Popen(command, cwd=self.source, env=environment,
                                         stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while not self._healthy():
            if self._process.poll() is not None:
                raise AssertionError(f"{self.name} exited with {self._process.returncode}:\n"
                                     f"{self.log_tail()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} not live after {timeout}s:\n{self.log_tail()}")
            time.sleep(0.2)
        return self

    def _healthy(self) -> bool:
        return answers_ok(f"http://127.0.0.1:{self.port}/healthz", timeout=2)

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def stop(self, timeout: float = 30.0) -> int | None:
        """SIGTERM, as the kubelet sends it; SIGKILL if it does not exit in time."""
        process, self._process = self._process, None
        code = None
        if process is not None:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(timeout)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
            code = process.returncode
        if self._log is not None:
            with contextlib.suppress(OSError):
                self._log.close()
            self._log = None
        return code

    def stop_checked(self, timeout: float = 30.0) -> list[str]:
        """Stop it (see `stop`); what went wrong: an exit code other than 0 (SIGTERM is a
        clean stop), a crashed pass or a traceback in the part of its log that no test has
        checked yet (`new_log_problems`)."""
        code = self.stop(timeout)
        problems = [] if code == 0 else [f"{self.name} exited with {code} (log {self.log_path})"]
        return problems + self.new_log_problems()

    def new_log_problems(self) -> list[str]:
        """The problems (`log_problems`) in what its log gained since the last call."""
        try:
            log = self.log_path.read_text(errors="replace")
        except OSError:
            log = ""
        return self._checker.new_problems({self.name: log})

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
