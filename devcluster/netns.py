"""A network of its own for every pod, joined to the cluster only through the runner.

Each pod gets a network namespace (held by a "pause" process, as a kubelet's sandbox does)
whose only interface is `lo`, carrying the pod's IP. Its processes bind whatever they
bind, as in a real pod, so two replicas of the webhook (both on port 10250) can run at once.
No interface connects that namespace to anything; the runner relays TCP instead:

- inbound: for each declared container port (and probe port) the runner listens on
  `<podIP>:<port>` in the cluster's namespace (the pod CIDR is local there) and relays each
  connection to the same address inside the pod's namespace. Services, the API server's
  webhook calls and the runner's probes reach the pod this way;
- outbound: inside the pod's namespace the runner listens on the API server's loopback
  address and relays to the real API server, so in-cluster clients work unchanged; and on
  each egress address a test declared (a proxy outside the cluster, say), relayed to where
  the test listens in the cluster's namespace; OLM's namespace also gets every Service's
  ClusterIP, relayed to one of its ready endpoints per connection (services.py).

Nothing else leaves a pod, and no packet can leave the machine: every namespace involved has
`lo` as its only interface.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import socket
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("devcluster.netns")

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
CHUNK = 65536


def _setns(fd: int) -> None:
    if _libc.setns(fd, CLONE_NEWNET) != 0:
        error = ctypes.get_errno()
        raise OSError(error, os.strerror(error))


@contextlib.contextmanager
def inside(namespace_fd: int) -> Iterator[None]:
    """Run the block in another network namespace (this thread only): sockets created in
    it belong to that namespace for good."""
    with open("/proc/thread-self/ns/net", "rb") as own:
        _setns(namespace_fd)
        try:
            yield
        finally:
            _setns(own.fileno())


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


Address = tuple[str, int]


@dataclass
class Relay:
    """Accepts on `listener`, connects to `target` in namespace `target_fd` (None: ours).
    A callable target is asked at each connection (None: nothing to connect to), as
    kube-proxy picks a Service's endpoint per connection."""

    listener: socket.socket
    target: Address | Callable[[], Address | None]
    target_fd: int | None

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True,
                         name=f"relay {self.listener.getsockname()}").start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):  # the listener was closed: the pod is gone
            while True:
                client, _ = self.listener.accept()
                threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = self._connect()
        except OSError:
            client.close()  # nothing listens there (yet): the caller sees a reset
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def _connect(self) -> socket.socket:
        target = self.target() if callable(self.target) else self.target
        if target is None:
            raise ConnectionRefusedError(f"no endpoint for {self.listener.getsockname()}")
        if self.target_fd is None:
            return socket.create_connection(target, timeout=5)
        with inside(self.target_fd):
            connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        connection.settimeout(5)
        connection.connect(target)
        connection.settimeout(None)
        return connection


def _listen(address: tuple[str, int], namespace_fd: int | None = None) -> socket.socket:
    def make() -> socket.socket:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(address)
        listener.listen(64)
        return listener

    if namespace_fd is None:
        return make()
    with inside(namespace_fd):
        return make()


@dataclass
class PodNetwork:
    """The pod's network namespace and the relays in and out of it. Without a pod IP it is a
    namespace that reaches nothing but the API server (OLM's processes: olm.py)."""

    pod_ip: str | None
    api: tuple[str, int]  # the API server's loopback address
    service: tuple[str, int] | None = None
    """The `kubernetes` Service's ClusterIP and port, relayed to `api` inside the pod."""
    egress: dict[tuple[str, int], tuple[str, int]] = field(default_factory=dict)
    """Addresses inside the pod relayed to addresses of the cluster's namespace."""
    pause: subprocess.Popen[bytes] | None = None
    namespace_fd: int = -1
    _listeners: list[socket.socket] = field(default_factory=list)
    _addresses: set[str] = field(default_factory=set)

    @property
    def path(self) -> Path:
        assert self.pause is not None
        return Path(f"/proc/{self.pause.pid}/ns/net")

    def start(self) -> None:
        """Create the namespace (lo up, with the pod IP) and the relay to the API server."""
        addresses = [ip for ip in (self.pod_ip, self.service and self.service[0]) if ip]
        addresses += sorted({ip for ip, _ in self.egress} - {*addresses, "127.0.0.1"})
        address = "".join(f"ip addr add {ip}/32 dev lo && " for ip in addresses)
        script = (f"ip link set lo up && {address}echo up && exec sleep infinity >/dev/null")
        self.pause = subprocess.Popen(
            ["unshare", "--net", "--", "setpriv", "--pdeathsig=KILL", "--", "sh", "-c", script],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, start_new_session=True)
        assert self.pause.stdout is not None
        with self.pause.stdout as ready:
            if ready.readline() != b"up\n":
                raise OSError(f"the network namespace of {self.pod_ip} did not come up")
        self.namespace_fd = os.open(self.path, os.O_RDONLY)
        self._addresses = {"127.0.0.1", *addresses}
        self._relay(_listen(self.api, self.namespace_fd), self.api, None)
        if self.service is not None:  # as kube-proxy would: ClusterIP -> the API server
            self._relay(_listen(self.service, self.namespace_fd), self.api, None)
        for inside_pod, target in self.egress.items():
            self._relay(_listen(inside_pod, self.namespace_fd), target, None)

    def expose(self, port: int) -> None:
        """Relay `<podIP>:port` of the cluster's namespace into the pod."""
        assert self.pod_ip is not None
        address = (self.pod_ip, port)
        self._relay(_listen(address), address, self.namespace_fd)

    def forward(self, address: Address, target: Callable[[], Address | None]) -> None:
        """Relay `address` inside the namespace (added to its `lo` if new) to what `target`
        names at each connection, in the cluster's namespace: a Service's ClusterIP to one
        of its endpoints, as kube-proxy would."""
        if address[0] not in self._addresses:
            added = subprocess.run(["nsenter", f"--net={self.path}", "--", "ip", "addr", "add",
                                    f"{address[0]}/32", "dev", "lo"], check=False,
                                   capture_output=True, text=True)
            if added.returncode != 0:
                raise OSError(f"ip addr add {address[0]}: {added.stderr.strip()}")
            self._addresses.add(address[0])
        self._relay(_listen(address, self.namespace_fd), target, None)

    def _relay(self, listener: socket.socket, target: Address | Callable[[], Address | None],
               target_fd: int | None) -> None:
        self._listeners.append(listener)
        Relay(listener, target, target_fd).start()

    def stop(self) -> None:
        for listener in self._listeners:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        self._listeners.clear()
        if self.namespace_fd >= 0:
            os.close(self.namespace_fd)
            self.namespace_fd = -1
        if self.pause is not None:
            self.pause.kill()
            self.pause.wait()
            self.pause = None
