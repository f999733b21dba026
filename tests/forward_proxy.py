"""A real forward proxy for tests: tinyproxy (Debian's `tinyproxy-bin`; .ci/run installs
it), listening on a free port of 127.0.0.1 in the test's network namespace, logging every
CONNECT it is asked for.

tests/proxy_listener.py is the stand-in that only counts connections; this one carries the
traffic, so a client that uses it must work through it.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from tests.processes import stop

# tinyproxy's line for each request at LogLevel Connect, such as
# `CONNECT   Nov 28 08:08:16.428 [21784]: Request (file descriptor 4): CONNECT 192.0.2.30:443
# HTTP/1.1` (one line)
_REQUEST = re.compile(r"Request \(file descriptor \d+\): (?P<method>[A-Z]+) (?P<target>\S+) ")


@dataclass
class ForwardProxy:
    host: str
    port: int
    log: Path

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def requests(self) -> list[tuple[str, str]]:
        """(method, target) of every request the proxy was asked for so far, in order."""
        return [(m["method"], m["target"]) for m in
                _REQUEST.finditer(self.log.read_text(errors="replace"))]

    def connect_targets(self) -> list[str]:
        """The `host:port` of every CONNECT (the tunnels HTTPS clients asked for)."""
        return [target for method, target in self.requests() if method == "CONNECT"]


def _free_port(host: str) -> int:
    with socket.socket() as probe:
        probe.bind((host, 0))
        port: int = probe.getsockname()[1]
        return port


@contextlib.contextmanager
def tinyproxy(directory: Path, connect_ports: tuple[int, ...] = (443,),
              host: str = "127.0.0.1") -> Iterator[ForwardProxy]:
    """tinyproxy on a free port of `host`, accepting clients from 127.0.0.1 only (the pod
    runner relays the pods' connections from there) and tunnels to `connect_ports` only."""
    binary = shutil.which("tinyproxy")
    if binary is None:
        raise RuntimeError("tinyproxy is not installed: apt-get install tinyproxy-bin")
    port = _free_port(host)
    config = directory / "tinyproxy.conf"
    config.write_text("\n".join([
        f"Port {port}", f"Listen {host}", "Timeout 60", "MaxClients 50",
        "LogLevel Connect", "Allow 127.0.0.1", "DisableViaHeader Yes",
        *(f"ConnectPort {p}" for p in connect_ports),
        "User nobody", "Group nogroup", ""]))
    log = directory / "tinyproxy.log"
    with log.open("ab") as output:
        # -d: in the foreground, the log on its output.
        process = subprocess.Popen(["setpriv", "--pdeathsig=KILL", "--", binary, "-d",
                                    "-c", str(config)],
                                   stdout=output, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL)
    proxy = ForwardProxy(host, port, log)
    try:
        _wait_listening(proxy, process)
        yield proxy
    finally:
        stop(process)


def _wait_listening(proxy: ForwardProxy, process: subprocess.Popen[bytes],
                    timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"tinyproxy exited with {process.returncode}:\n"
                               + proxy.log.read_text(errors="replace")[-2000:])
        with contextlib.suppress(OSError), socket.create_connection(
                (proxy.host, proxy.port), timeout=1):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"tinyproxy does not listen on {proxy.url}")
        time.sleep(0.1)
