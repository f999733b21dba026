"""A wire scan: what a listening port accepts, by real handshakes with Python's ssl.

For each port: whether it speaks TLS at all, which versions (1.0 to 1.3) complete a handshake,
which TLS 1.0-1.2 suites do (each offered alone, at the newest of those versions the port
accepts), and which TLS 1.3 suite it chose (no client here can choose TLS 1.3 suites: Python's
ssl offers all three). The client runs at OpenSSL security level 0, so that it refuses nothing
itself: what fails, the server refused. Issue 37 item 6; the Go operator's CI runs such a
scanner over every pod of the operand.

`scan_pod` scans every port a process listens on, declared or not: it lists them inside the
process's network namespace (`ss`, through `nsenter`; root) and handshakes there, so a port
no Service or relay exposes is scanned too (`python -m tests.tls_scan ADDRESS:PORT ...` is
what runs inside).
"""

from __future__ import annotations

import dataclasses
import json
import re
import socket
import ssl
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

VERSIONS = {"VersionTLS10": ssl.TLSVersion.TLSv1, "VersionTLS11": ssl.TLSVersion.TLSv1_1,
            "VersionTLS12": ssl.TLSVersion.TLSv1_2, "VersionTLS13": ssl.TLSVersion.TLSv1_3}
TIMEOUT = 5.0
OWNER = re.compile(r"pid=(\d+)")


@dataclass(frozen=True)
class PortScan:
    address: str
    port: int
    tls: bool
    """False: no handshake completed at any version with any suite (plain HTTP, or nothing)."""
    versions: tuple[str, ...] = ()
    """The versions accepted, oldest first (OpenShift's names: VersionTLS12)."""
    suites: tuple[str, ...] = ()
    """The TLS 1.0-1.2 suites accepted (OpenSSL's names), in OpenSSL's order."""
    tls13_suite: str | None = None

    def __str__(self) -> str:
        if not self.tls:
            return f"{self.address}:{self.port} no TLS"
        return (f"{self.address}:{self.port} {', '.join(self.versions)}; "
                f"{len(self.suites)} suites below 1.3: {', '.join(self.suites) or '-'}"
                + (f"; 1.3: {self.tls13_suite}" if self.tls13_suite else ""))


def _context(version: ssl.TLSVersion | None, suites: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with warnings.catch_warnings():  # TLS 1.0 and 1.1 are deprecated: the point is to offer them
        warnings.simplefilter("ignore", DeprecationWarning)
        context.minimum_version = version or ssl.TLSVersion.TLSv1
        context.maximum_version = version or ssl.TLSVersion.TLSv1_3
    context.set_ciphers(f"{suites}:@SECLEVEL=0")
    return context


def handshake(address: str, port: int, version: ssl.TLSVersion | None = None,
              suites: str = "ALL") -> tuple[str, str] | None:
    """(version, suite) the server agreed to, offered exactly `version` (None: any) and only
    `suites` below TLS 1.3; None if it refused or closed."""
    try:
        with socket.create_connection((address, port), timeout=TIMEOUT) as raw, \
                _context(version, suites).wrap_socket(raw) as tls:
            cipher = tls.cipher()
            agreed = tls.version()
            return (agreed, cipher[0]) if agreed and cipher else None
    except (ssl.SSLError, ConnectionError, TimeoutError):
        return None


def candidate_suites() -> list[str]:
    """Every TLS 1.0-1.2 suite this OpenSSL can offer at security level 0."""
    context = _context(None, "ALL")
    return [c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"]


def scan(address: str, port: int) -> PortScan:
    if handshake(address, port) is None:
        return PortScan(address, port, tls=False)
    versions = tuple(name for name, version in VERSIONS.items()
                     if handshake(address, port, version) is not None)
    below = [VERSIONS[name] for name in versions if name != "VersionTLS13"]
    suites: tuple[str, ...] = ()
    if below:
        newest = below[-1]
        suites = tuple(name for name in candidate_suites()
                       if handshake(address, port, newest, name) is not None)
    tls13 = (handshake(address, port, ssl.TLSVersion.TLSv1_3)
             if "VersionTLS13" in versions else None)
    return PortScan(address, port, tls=True, versions=versions, suites=suites,
                    tls13_suite=tls13[1] if tls13 else None)


def listening(pid: int, owners: set[int]) -> list[tuple[str, int]]:
    """(address, port) of every TCP socket listening in the network namespace of `pid` that
    one of `owners` holds (not the pod runner's relays there); a wildcard address as
    127.0.0.1, reachable from inside."""
    listed = subprocess.run(["nsenter", f"--net=/proc/{pid}/ns/net", "ss", "-Hltnp"],
                            capture_output=True, text=True, check=True, timeout=30)
    found = set()
    for line in listed.stdout.splitlines():
        local = line.split()[3]  # State Recv-Q Send-Q Local:Port Peer:Port Process
        if not owners & {int(holder) for holder in OWNER.findall(line)}:
            continue
        address, _, port = local.rpartition(":")
        address = address.strip("[]")
        wildcard = address in ("*", "0.0.0.0", "::")  # noqa: S104 (read, not bound)
        found.add(("127.0.0.1" if wildcard else address, int(port)))
    return sorted(found, key=lambda target: target[1])


def scan_pod(pids: set[int]) -> list[PortScan]:
    """Every port the processes `pids` of one pod listen on, scanned from inside its
    network namespace."""
    inside = f"--net=/proc/{min(pids)}/ns/net"
    targets = [f"{address}:{port}" for address, port in listening(min(pids), pids)]
    if not targets:
        return []
    done = subprocess.run(["nsenter", inside, sys.executable, "-m", "tests.tls_scan", *targets],
                          capture_output=True, text=True, check=True, timeout=300,
                          cwd=Path(__file__).resolve().parent.parent)
    return [PortScan(**{**fields, "versions": tuple(fields["versions"]),
                        "suites": tuple(fields["suites"])})
            for fields in map(json.loads, done.stdout.splitlines())]


if __name__ == "__main__":
    for target in sys.argv[1:]:
        host, _, number = target.rpartition(":")
        print(json.dumps(dataclasses.asdict(scan(host, int(number)))), flush=True)
