"""AWS served by moto (its server, `moto[server]`), over TLS with a private CA, on an address
of the test's network namespace: Secrets Manager, SSM Parameter Store and STS on one port,
as the AWS SDKs reach them through endpoint overrides.

moto serves TLS itself (werkzeug's server with our certificate and key): no terminator in
front. It runs as a process of its own (it dies with the test process), on an address the
helper adds to `lo` of the test's network namespace (never elsewhere: it refuses to touch a
namespace that has another interface), so that a proxy in that namespace reaches it at the
address the pods use.
"""

from __future__ import annotations

import contextlib
import ssl
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.private_ca import ServerCertificate, server_certificate
from tests.processes import stop

REGION = "us-east-1"
# moto accepts any credentials; these are what the SecretStores and this test present.
ACCESS_KEY_ID = "AKIAEXAMPLEEXAMPLE01"
SECRET_ACCESS_KEY = "moto-accepts-any-secret-access-key"


def only_loopback() -> bool:
    """Whether this network namespace has no interface but `lo` (hack/netns-run.sh)."""
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    return [line.split(":")[0].strip() for line in lines] == ["lo"]


@contextlib.contextmanager
def local_address(address: str) -> Iterator[None]:
    """`address` on `lo` of this network namespace for the block (added, then removed)."""
    if not only_loopback():
        raise RuntimeError(f"{address} is added to lo only in a namespace whose only "
                           "interface is lo: run the tests with hack/netns-run.sh")
    subprocess.run(["ip", "addr", "add", f"{address}/32", "dev", "lo"], check=True,
                   capture_output=True, text=True)
    try:
        yield
    finally:
        subprocess.run(["ip", "addr", "del", f"{address}/32", "dev", "lo"], check=False,
                       capture_output=True)


@dataclass
class MotoServer:
    host: str
    port: int
    tls: ServerCertificate
    log: Path

    @property
    def url(self) -> str:
        return f"https://{self.host}" if self.port == 443 else f"https://{self.host}:{self.port}"

    def client(self, service: str) -> Any:
        """A boto3 client of `service` that trusts only the private CA, without a proxy."""
        # moto[server] brings them (without type information); imported where used.
        import boto3  # type: ignore[import-untyped]  # noqa: PLC0415
        from botocore.config import Config  # type: ignore[import-untyped]  # noqa: PLC0415

        return boto3.client(service, endpoint_url=self.url, region_name=REGION,
                            aws_access_key_id=ACCESS_KEY_ID,
                            aws_secret_access_key=SECRET_ACCESS_KEY, verify=str(self.tls.ca),
                            config=Config(proxies={}, retries={"max_attempts": 2},
                                          connect_timeout=5, read_timeout=10))

    def requests(self) -> list[str]:
        """The request lines moto logged so far (`POST / HTTP/1.1" 200`, ...)."""
        return [line for line in self.log.read_text(errors="replace").splitlines()
                if '"' in line and " HTTP/1.1" in line]


@contextlib.contextmanager
def moto_server(directory: Path, host: str, port: int = 443) -> Iterator[MotoServer]:
    """moto on https://host:port with a new private CA's certificate for `host`."""
    tls = server_certificate(directory, "moto", [host])
    log = directory / "moto.log"
    with local_address(host), log.open("ab") as output:
        process = subprocess.Popen(
            ["setpriv", "--pdeathsig=KILL", "--", sys.executable, "-m", "moto.server",
             "-H", host, "-p", str(port), "--ssl-cert", str(tls.certificate),
             "--ssl-key", str(tls.key)],
            stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        try:
            server = MotoServer(host, port, tls, log)
            _wait_serving(server, process)
            yield server
        finally:
            stop(process)


def _wait_serving(server: MotoServer, process: subprocess.Popen[bytes],
                  timeout: float = 60.0) -> None:
    """Until moto answers over TLS with the certificate the private CA signed."""
    context = ssl.create_default_context(cafile=str(server.tls.ca))
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}),
                                         urllib.request.HTTPSHandler(context=context))
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"moto exited with {process.returncode}:\n"
                               + server.log.read_text(errors="replace")[-3000:])
        try:
            with opener.open(f"{server.url}/moto-api/", timeout=5) as answer:
                if answer.status == 200:
                    return
        except OSError as error:
            if time.monotonic() > deadline:
                raise RuntimeError(f"moto does not answer at {server.url}: {error}") from error
        time.sleep(0.3)
