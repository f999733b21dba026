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
from collections.abc import Mapping
from pathlib import Path
from typing import IO

from devcluster.api import answers_ok


def log_problems(log: str) -> list[str]:
    """What a healthy operator never logs: a crashed pass (`result=crash`: the worker retries
    it, so the process still looks alive) and any traceback."""
    problems = [line for line in log.splitlines() if "result=crash" in line]
    if "Traceback" in log:
        start = max(0, log.index("Traceback") - 300)
        problems.append(log[start:start + 3000])
    return problems


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
        clean stop), a crashed pass or a traceback in its log."""
        code = self.stop(timeout)
        problems = [] if code == 0 else [f"{self.name} exited with {code} (log {self.log_path})"]
        try:
            log = self.log_path.read_text(errors="replace")
        except OSError:
            log = ""
        return problems + [f"{self.name}: {problem}" for problem in log_problems(log)]

    def log_tail(self, lines: int = 80) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return "(no log)"
        return "\n".join(text.splitlines()[-lines:])
