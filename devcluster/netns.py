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
  the test listens in the cluster's namespace;
- Services: a pod's namespace routes the Service CIDR to its `lo`, and an nftables rule of
  its own (a `nat` output chain, as kube-proxy's rules) redirects every TCP connection to a
  ClusterIP, but for those relayed above, to one listener of the runner on 127.0.0.1 there,
  which reads the connection's original destination (SO_ORIGINAL_DST) and relays it to a
  ready endpoint of that Service (services.py `ClusterServices`). Nothing binds a ClusterIP
  in the pod, so no process of the pod ever finds a Service's port taken. OLM's namespace
  relays every Service's ClusterIP with a listener on it instead (`forward`, services.py).

Nothing else leaves a pod, and no packet can leave the machine: every namespace involved has
`lo` as its only interface.
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
import os
import socket
import struct
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger("devcluster.netns")

CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)
CHUNK = 65536
SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h: the destination before a NAT rule changed it
NFT_TABLE = "devcluster"


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


def socket_of(pid: int) -> socket.socket:
    """A TCP socket in the network namespace of process `pid` (a pod's process: it connects
    as that pod does)."""
    fd = os.open(f"/proc/{pid}/ns/net", os.O_RDONLY)
    try:
        with inside(fd):
            return socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    finally:
        os.close(fd)


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(CHUNK):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


Address = tuple[str, int]


def original_destination(connection: socket.socket) -> Address:
    """Where the client of an accepted connection connected to, before a `redirect` rule
    sent it to our listener (a `struct sockaddr_in`)."""
    raw = connection.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
    port, address = struct.unpack("!2xH4s8x", raw)
    return socket.inet_ntoa(address), port


def redirect_rules(service_cidr: str, port: int, own: list[Address]) -> str:
    """nftables rules that send every TCP connection to `service_cidr` to 127.0.0.1:`port`,
    but those to `own` addresses (relayed by listeners of their own)."""
    kept = "".join(f"    ip daddr {ip} tcp dport {p} return\n" for ip, p in own)
    return (f"table ip {NFT_TABLE} {{\n"
            "  chain services {\n"
            "    type nat hook output priority -100; policy accept;\n"
            f"{kept}"
            f"    ip daddr {service_cidr} meta l4proto tcp redirect to :{port}\n"
            "  }\n"
            "}\n")


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
            upstream = self._connect(self._target(client))
        except OSError:
            client.close()  # nothing listens there (yet): the caller sees a reset
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()
        client.close()
        upstream.close()

    def _target(self, client: socket.socket) -> Address | None:  # noqa: ARG002 (ServiceRelay's)
        """Where the accepted connection `client` goes."""
        return self.target() if callable(self.target) else self.target

    def _connect(self, target: Address | None) -> socket.socket:
        if target is None:
            raise ConnectionRefusedError(f"no endpoint for {self.listener.getsockname()}")
        if self.target_fd is None:
            connection = socket.create_connection(target, timeout=5)
            connection.settimeout(None)  # the 5 s were for connecting: a watch may stay silent
            return connection
        with inside(self.target_fd):
            connection = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        connection.settimeout(5)
        connection.connect(target)
        connection.settimeout(None)
        return connection


class ServiceRelay(Relay):
    """Accepts the connections a `redirect` rule sent to `listener`, and connects each to
    what `resolve` names for its original destination (a ClusterIP and port), in our
    namespace."""

    def __init__(self, listener: socket.socket,
                 resolve: Callable[[Address], Address | None]) -> None:
        super().__init__(listener, lambda: None, None)
        self.resolve = resolve

    def _target(self, client: socket.socket) -> Address | None:
        return self.resolve(original_destination(client))


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
    service_cidr: str | None = None
    """With `services`: connections to this range go to `services` (ClusterIPs)."""
    services: Callable[[Address], Address | None] | None = None
    """Where a connection to a ClusterIP and port goes (services.ClusterServices.endpoint)."""
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
        if self.services is not None and self.service_cidr:  # ClusterIPs are local here
            address += f"ip route add local {self.service_cidr} dev lo table local && "
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
        if self.services is not None and self.service_cidr:
            self._route_services(self.services, self.service_cidr)

    def _route_services(self, services: Callable[[Address], Address | None],
                        service_cidr: str) -> None:
        """The Service CIDR's connections, redirected to one relay (services.py). Without
        nftables the pod still runs, and reaches no Service: said in the runner's log."""
        listener = _listen(("127.0.0.1", 0), self.namespace_fd)
        own = [a for a in (self.service, *self.egress) if a is not None]
        try:
            result = subprocess.run(
                ["nsenter", f"--net={self.path}", "--", "nft", "-f", "-"],
                input=redirect_rules(service_cidr, listener.getsockname()[1], own),
                capture_output=True, text=True, check=False, timeout=30)
            failed = result.stderr.strip() if result.returncode else ""
        except OSError as error:  # no nft
            failed = str(error)
        if failed:
            listener.close()
            logger.warning("pod %s reaches no Service: nft failed: %s", self.pod_ip, failed)
            return
        self._listeners.append(listener)
        ServiceRelay(listener, services).start()

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
