"""How `down` tells that a process of a detached cluster has ended (devcluster/controlplane.py):
real processes, one of them a zombie nobody has reaped yet."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from devcluster.controlplane import _running


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_running_process_runs() -> None:
    with subprocess.Popen(["sleep", "30"]) as sleeper:
        try:
            assert _running(sleeper.pid)
        finally:
            sleeper.kill()


def test_an_exited_process_not_reaped_yet_has_ended() -> None:
    # A parent that never reaps its children leaves a zombie, as an init that is no init does
    # with a detached cluster's processes.
    child = subprocess.Popen(["sh", "-c", "exit 0"])
    try:
        deadline = time.monotonic() + 10
        while _state(child.pid) != "Z":
            assert time.monotonic() < deadline, "the child never exited"
            time.sleep(0.05)
        assert not _running(child.pid)
    finally:
        child.wait()
    assert not _running(child.pid)  # reaped: gone from /proc
