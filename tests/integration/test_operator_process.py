"""The operator as a process (`python -m manager run`), as an administrator starts it: the
first log lines say what is in effect, problems are warnings, lines stay short, and SIGTERM
stops it within 2 s even when the API server does not answer."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import yaml

from manager.paths import REPO_ROOT
from tests.conftest import Cluster
from tests.e2e.operator_process import OperatorProcess, free_port
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    EscHandle,
    UserObjects,
    eventually,
    wait_condition,
)

LINE_LIMIT = 600  # the message is cut at 400 characters; the prefix adds time, level, name


def log_lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines()


async def test_the_log_starts_with_what_is_in_effect_and_warns_about_problems(
        *, cluster: Cluster, esc: EscHandle, user_objects: UserObjects, tmp_path: Path) -> None:
    namespace = SCENARIO_NAMESPACES["process"]
    await esc.create({"controllerConfig": {"namespace": namespace}})
    log = tmp_path / "operator.log"
    operator = OperatorProcess(REPO_ROOT, cluster.kubeconfig, log,
                               {"POD_NAMESPACE": "external-secrets-operator"}).start()
    try:
        await wait_condition(esc, "Ready", "True", timeout=60)
        # Before the runtime's two lines only the metrics certificate's (self-signed here).
        lines = log_lines(log)
        runtime = next(i for i, line in enumerate(lines) if " manager.runtime.worker " in line)
        assert all(" action=metrics-certificate " in line for line in lines[:runtime]), \
            "\n".join(line[24:160] for line in lines[:runtime + 2])  # without the time
        first, second = lines[runtime:runtime + 2]
        assert " INFO manager.runtime.worker action=start " in first, first
        assert f"operandNamespace={namespace} " in first
        server = yaml.safe_load(cluster.kubeconfig.read_text())["clusters"][0]["cluster"]
        assert f"apiServer={server['server']} " in first
        assert "operatorNamespace=external-secrets-operator eventsNamespace=default" in first
        assert " action=settings externalSecretsImage=" in second, second
        assert "liveness=http://127.0.0.1:" in second
        assert " metrics=https://127.0.0.1:" in second, second

        # Degraded: the pass and status lines are warnings, and say when the retry comes.
        await esc.patch_spec({"appConfig": {"bitwardenSecretManagerProvider": {
            "enabled": "true", "secretRef": {"name": "bitwarden-tls"}}}})
        await wait_condition(esc, "Degraded", "True", reason="BitwardenSecretNotFound")

        async def warned() -> None:
            lines = log_lines(log)
            assert any(" WARNING manager.runtime.worker action=pass " in line
                       and "result=Degraded" in line and " retry_in=" in line
                       for line in lines), lines[-5:]
            assert any(" WARNING manager.reporting.writer action=status " in line
                       and "reason=BitwardenSecretNotFound" in line for line in lines)

        await eventually(warned)
        long_lines = [line for line in log_lines(log) if len(line) > LINE_LIMIT]
        assert long_lines == []
    finally:
        code = operator.stop()
    assert code == 0, operator.log_tail()


@dataclass
class SilentServer:
    """A port that accepts connections and never answers: an API server that hangs."""

    port: int
    accepted: list[socket.socket] = field(default_factory=list)


@pytest.fixture
def silent_server() -> Iterator[SilentServer]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    server = SilentServer(listener.getsockname()[1])

    def accept() -> None:
        while True:
            try:
                server.accepted.append(listener.accept()[0])
            except OSError:
                return

    threading.Thread(target=accept, daemon=True).start()
    yield server
    listener.close()
    for connection in server.accepted:
        connection.close()


def unreachable_kubeconfig(port: int, path: Path) -> Path:
    """A kubeconfig of its own for an API server at `port` (no cluster is needed: nothing
    there answers; the token is never checked)."""
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "unreachable",
        "clusters": [{"name": "unreachable", "cluster": {
            "server": f"https://127.0.0.1:{port}", "insecure-skip-tls-verify": True}}],
        "users": [{"name": "operator", "user": {"token": "never-checked"}}],
        "contexts": [{"name": "unreachable",
                      "context": {"cluster": "unreachable", "user": "operator"}}],
    }
    path.write_text(yaml.safe_dump(config))
    return path


def stop_seconds(process: subprocess.Popen[bytes]) -> float:
    started = time.monotonic()
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(10)
    return time.monotonic() - started


@pytest.mark.parametrize("leader_election", ["off", "on"])
@pytest.mark.parametrize("server", ["refusing", "silent"])
def test_sigterm_stops_it_within_2_seconds_when_the_api_server_does_not_answer(
        server: str, leader_election: str, silent_server: SilentServer, tmp_path: Path) -> None:
    """Needs no cluster: the operator's API server is a port that refuses connections, or
    one that accepts them and never answers. With leader election on, the instance is
    still campaigning (its read of the Lease gets no answer)."""
    port = silent_server.port if server == "silent" else free_port()
    kubeconfig = unreachable_kubeconfig(port, tmp_path / "kubeconfig")
    log = tmp_path / "operator.log"
    election = ["--leader-elect"] if leader_election == "on" else []
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "manager", "run", f"--kubeconfig={kubeconfig}", *election],
            cwd=REPO_ROOT, env={**os.environ, "PYTHONPATH": str(REPO_ROOT),
                                "POD_NAMESPACE": "external-secrets-operator",
                                "METRICS_ADDR": f"127.0.0.1:{free_port()}"},
            stdout=output, stderr=subprocess.STDOUT)
        time.sleep(5)  # started, and retrying its first requests
        assert process.poll() is None, log.read_text()
        if server == "silent":  # it is waiting for an answer that never comes
            assert silent_server.accepted, log.read_text()
        seconds = stop_seconds(process)
    assert seconds < 2.0, f"stopped after {seconds:.1f} s:\n{log.read_text()[-3000:]}"
    assert process.returncode == 0, log.read_text()[-3000:]
