"""bitwarden-sdk-server as its clients see it: a TLS handshake verified as the controller's
Bitwarden provider verifies it (the CA it is given, the Service's DNS name), GET /ready, and
a sampler that keeps asking during a certificate renewal.

The sampler asks the way the controller does: from inside the controller's pod (its network
namespace, entered through its process), at the Service's ClusterIP, which the simulated
cluster relays to one ready endpoint per connection as kube-proxy would (devcluster/services.py),
with the CA and the Service's DNS name. Simulated cluster only: it enters a pod's namespace.
"""

from __future__ import annotations

import hashlib
import itertools
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from devcluster.api import Api
from devcluster.netns import socket_of

SERVICE = "bitwarden-sdk-server"
PORT = 9998
SAMPLE_INTERVAL = 0.1


def service_dns_name(namespace: str) -> str:
    """The name the operator renders into the Certificate and the provider's URL."""
    return f"{SERVICE}.{namespace}.svc.cluster.local"


def digest(der: bytes) -> str:
    return hashlib.sha256(der).hexdigest()[:16]


def der(pem: bytes) -> bytes:
    """The DER bytes of the first certificate of a PEM text (as a TLS server sends it)."""
    return ssl.PEM_cert_to_DER_cert(pem.decode())


@dataclass(frozen=True)
class Answer:
    leaf: bytes  # the certificate the server presented (DER)
    status: int
    body: str


def get_ready(connection: socket.socket, ca_pem: bytes, hostname: str) -> Answer:
    """GET /ready over `connection` (connected, unencrypted), verified against `ca_pem` for
    `hostname`; an ssl.SSLCertVerificationError if the server's certificate does not verify."""
    context = ssl.create_default_context(cadata=ca_pem.decode())
    with context.wrap_socket(connection, server_hostname=hostname) as tls:
        leaf = tls.getpeercert(binary_form=True)
        assert leaf is not None
        tls.sendall(f"GET /ready HTTP/1.1\r\nHost: {hostname}:{PORT}\r\n"
                    "Connection: close\r\n\r\n".encode())
        response = b""
        while chunk := tls.recv(65536):
            response += chunk
    head, _, body = response.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.") else 0
    return Answer(leaf, status, body.decode(errors="replace"))


def get_ready_at(address: str, ca_pem: bytes, hostname: str, timeout: float = 5.0) -> Answer:
    """GET /ready at `address`:9998 from here (a pod's address: the runner relays it)."""
    return get_ready(socket.create_connection((address, PORT), timeout=timeout), ca_pem,
                     hostname)


def get_ready_from(netns_pid: int, address: str, ca_pem: bytes, hostname: str,
                   timeout: float = 2.0) -> Answer:
    """GET /ready at `address`:9998 from the network namespace of process `netns_pid` (a
    container's process: its pod's namespace)."""
    connection = socket_of(netns_pid)
    try:
        connection.settimeout(timeout)
        connection.connect((address, PORT))
    except OSError:
        connection.close()
        raise
    return get_ready(connection, ca_pem, hostname)


def ready_endpoints(api: Api, namespace: str) -> int:
    """How many ready endpoints the Service has (its EndpointSlices, as kube-proxy reads them)."""
    slices = api.request("GET", f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices",
                         {"labelSelector": f"kubernetes.io/service-name={SERVICE}"})
    return sum(1 for endpoint_slice in slices.get("items") or []
               for endpoint in endpoint_slice.get("endpoints") or []
               if (endpoint.get("conditions") or {}).get("ready") is not False)


@dataclass
class Sample:
    at: float  # seconds after the sampler started
    leaf: str | None  # digest of the served certificate; None: the request failed
    error: str = ""
    endpoints: int = 0  # the Service's ready endpoints just before the request


@dataclass
class RenewalSampler:
    """Asks `ask()` every SAMPLE_INTERVAL seconds in a thread of its own until `stop`,
    counting `endpoints()` (the Service's ready endpoints, as the API server has them) just
    before each request."""

    ask: Callable[[], Answer]
    endpoints: Callable[[], int]
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _started: float = 0.0

    def start(self) -> RenewalSampler:
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, daemon=True, name="bitwarden-sampler")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def elapsed(self) -> float:
        return time.monotonic() - self._started

    def _run(self) -> None:
        while not self._stop.is_set():
            at = self.elapsed()
            try:
                endpoints = self.endpoints()
            except (OSError, RuntimeError):  # the API server did not answer: unknown
                endpoints = -1
            try:
                answer = self.ask()
                if answer.status == 200 and answer.body == "ready":
                    self.samples.append(Sample(at, digest(answer.leaf), "", endpoints))
                else:
                    self.samples.append(Sample(at, None, f"{answer.status} {answer.body!r}",
                                               endpoints))
            except (OSError, ValueError) as error:  # ssl.SSLError is an OSError
                self.samples.append(Sample(at, None, f"{type(error).__name__}: {error}",
                                           endpoints))
            self._stop.wait(SAMPLE_INTERVAL)

    def served(self, leaf_der: bytes) -> list[Sample]:
        return [s for s in self.samples if s.leaf == digest(leaf_der)]

    def failures(self) -> list[Sample]:
        return [s for s in self.samples if s.leaf is None]

    def last_samples_serve(self, leaf_der: bytes, count: int) -> bool:
        """Whether the last `count` answers all presented `leaf_der`."""
        last = self.samples[-count:]
        return len(last) == count and all(s.leaf == digest(leaf_der) for s in last)

    def figures(self, changed_at: float, new_leaf: bytes) -> dict[str, object]:
        """What the client saw after the certificate changed at `changed_at` (sampler time):
        its requests, the failed ones (and their first errors), the seconds until the first
        answer with the new certificate `new_leaf` (DER), and until the last with another."""
        new = digest(new_leaf)
        after = [s for s in self.samples if s.at >= changed_at]
        first_new = next((s.at for s in after if s.leaf == new), None)
        old = [s.at for s in after if s.leaf is not None and s.leaf != new]
        failures = [s for s in after if s.leaf is None]
        known = [s.endpoints for s in after if s.endpoints >= 0]
        times = [s.at for s in self.samples if s.at < changed_at][-1:] + [s.at for s in after]
        intervals = [b - a for a, b in itertools.pairwise(times)]
        return {
            "requests": len(after),
            "largest_interval_s": round(max(intervals, default=float("inf")), 2),
            "fewest_ready_endpoints": min(known, default=-1),
            "failed": len(failures),
            "failed_at_s": [round(s.at - changed_at, 1) for s in failures],
            "first_new_s": None if first_new is None else round(first_new - changed_at, 1),
            "last_old_s": round(old[-1] - changed_at, 1) if old else None,
            "errors": sorted({s.error for s in failures})[:5],
        }
