"""Cluster DNS and kube-proxy: Services by name and ClusterIP, for pods and OLM's processes.

A client in a pod reaches a Service at `<service>.<namespace>.svc[.cluster.local]:<port>`: a
name that cluster DNS resolves to the Service's ClusterIP, where kube-proxy sends each
connection to one of the Service's ready endpoints. The simulated cluster has neither. This
module stands in for both, from the Services and EndpointSlices the API server holds:

- names: a hosts file listing every Service's ClusterIP under `<name>.<namespace>.svc` and
  `<name>.<namespace>.svc.cluster.local`, bind-mounted at /etc/hosts in a private mount
  namespace only (the host's /etc/hosts is untouched): every container the pod runner starts
  (runner.py; not podman's, which writes its own) and OLM's processes (olm.py). It is
  rewritten in place (a bind mount keeps its inode) when Services change; Go's resolver reads
  it again on change. Only these full names: a pod's DNS search path (`<name>`,
  `<name>.<namespace>`) is not simulated.
- addresses, in pods (`ClusterServices`, netns.py `PodNetwork.services`): the pod's network
  namespace routes the whole Service CIDR to its `lo` and redirects every TCP connection to a
  ClusterIP (nftables, as kube-proxy's own rules do) to one relay of the runner's, which reads
  the connection's original destination and connects to a ready endpoint of the Service that
  owns that ClusterIP and port now, looked up at each connection, in the cluster's namespace,
  where the runner relays the endpoint's pod address into that pod. No socket is bound on a
  ClusterIP inside the pod, so a process binding a port on every address never collides with
  a Service's port.
- addresses, in OLM's namespace (`Services`): each ClusterIP and port is relayed by a listener
  (netns.py `forward`) to a ready endpoint of the Service. A Service port that OLM's own
  processes bind on every address (8080, their health port) cannot be relayed that way, and
  is logged once.

Only TCP. A connection to a ClusterIP and port with no Service or no ready endpoint behind
it is accepted and closed at once (kube-proxy would reject it); headless and ExternalName
Services get no entry.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from pathlib import Path

from devcluster.api import Api, ApiError, JsonObject
from devcluster.netns import Address, PodNetwork

logger = logging.getLogger("devcluster.services")

HOSTS_HEADER = "127.0.0.1 localhost\n::1 localhost ip6-localhost ip6-loopback\n"
SLICES = "/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices"


def hosts_file(services: list[JsonObject]) -> str:
    """/etc/hosts naming each Service with a ClusterIP as cluster DNS would."""
    lines = [HOSTS_HEADER]
    for service in sorted(services, key=lambda s: (s["metadata"]["namespace"],
                                                   s["metadata"]["name"])):
        ip = cluster_ip(service)
        if ip:
            name = f"{service['metadata']['name']}.{service['metadata']['namespace']}.svc"
            lines.append(f"{ip} {name} {name}.cluster.local\n")
    return "".join(lines)


def write_in_place(hosts: Path, text: str) -> None:
    """Rewrite `hosts` if its text changed, in place: a bind mount of it keeps its inode."""
    if hosts.read_text() != text:
        with hosts.open("r+") as opened:
            opened.write(text)
            opened.truncate()


def service_ports(services: list[JsonObject]) -> dict[Address, tuple[str, str, str]]:
    """Each TCP ClusterIP and port: (namespace, Service name, port name)."""
    ports = {}
    for service in services:
        ip = cluster_ip(service)
        if not ip:
            continue
        meta = service["metadata"]
        for port in (service.get("spec") or {}).get("ports") or []:
            if port.get("protocol", "TCP") == "TCP":
                ports[ip, int(port["port"])] = (meta["namespace"], meta["name"],
                                                port.get("name", ""))
    return ports


def list_services(api: Api) -> list[JsonObject] | None:
    """Every Service, or None (logged) when the API server did not answer."""
    try:
        return list(api.request("GET", "/api/v1/services").get("items") or [])
    except (ApiError, OSError) as error:
        logger.warning("listing Services failed: %s", error)
        return None


def cluster_ip(service: JsonObject) -> str:
    ip = str((service.get("spec") or {}).get("clusterIP") or "")
    return "" if ip == "None" else ip


def ready_endpoint(slices: list[JsonObject], port_name: str) -> Address | None:
    """An address and port of a ready endpoint for the Service port named `port_name`."""
    for endpoint_slice in slices:
        ports = [p for p in endpoint_slice.get("ports") or [] if p.get("name", "") == port_name]
        if not ports or ports[0].get("port") is None:
            continue
        for endpoint in endpoint_slice.get("endpoints") or []:
            if (endpoint.get("conditions") or {}).get("ready") is False:
                continue
            return endpoint["addresses"][0], int(ports[0]["port"])
    return None


class Services:
    """Keeps the hosts file and the ClusterIP relays of `network` up to date (`sync`)."""

    def __init__(self, api: Api, network: PodNetwork, hosts: Path) -> None:
        self.api = api
        self.network = network
        self.hosts = hosts
        self._forwarded: set[Address] = set()
        hosts.write_text(HOSTS_HEADER)

    def sync(self) -> None:
        services = list_services(self.api)
        if services is None:
            return
        write_in_place(self.hosts, hosts_file(services))
        for address, (namespace, name, port_name) in service_ports(services).items():
            if address in self._forwarded:
                continue
            self._forwarded.add(address)  # tried once: a failure is logged once
            try:
                self.network.forward(address, self._resolver(namespace, name, port_name))
            except OSError as error:
                logger.warning("Service %s/%s: %s:%d cannot be relayed: %s", namespace, name,
                               *address, error)

    def _resolver(self, namespace: str, name: str, port_name: str,
                  ) -> Callable[[], Address | None]:
        return lambda: service_endpoint(self.api, namespace, name, port_name)


def service_endpoint(api: Api, namespace: str, name: str, port_name: str) -> Address | None:
    """A ready endpoint of the Service's port `port_name`, as the API server holds it now."""
    try:
        slices = api.request("GET", SLICES.format(namespace=namespace),
                             {"labelSelector": f"kubernetes.io/service-name={name}"})
    except (ApiError, OSError):
        return None
    return ready_endpoint(slices.get("items") or [], port_name)


class ClusterServices:
    """The pods' cluster DNS and kube-proxy (runner.py): the hosts file every container mounts
    at /etc/hosts (`hosts`), kept up to date by `run`, and `endpoint`: where a connection to
    a ClusterIP and port goes."""

    def __init__(self, api: Api, hosts: Path) -> None:
        self.api = api
        self.hosts = hosts
        self._ports: dict[Address, tuple[str, str, str]] = {}
        self._lock = threading.Lock()
        hosts.write_text(HOSTS_HEADER)

    def sync(self) -> None:
        """Read the Services: the hosts file and the table of ClusterIPs and ports."""
        services = list_services(self.api)
        if services is None:
            return
        with self._lock:
            write_in_place(self.hosts, hosts_file(services))
            self._ports = service_ports(services)

    def run(self, stop: threading.Event, period: float = 1.0) -> None:
        """`sync` every `period` seconds until `stop`."""
        while True:
            self.sync()
            if stop.wait(period):
                return

    def endpoint(self, address: Address) -> Address | None:
        """A ready endpoint of the Service that owns ClusterIP and port `address` (None: no
        such Service, or no ready endpoint). A Service newer than the last `sync` is found by
        reading the Services again, once."""
        with self._lock:
            owner = self._ports.get(address)
        if owner is None:
            self.sync()
            with self._lock:
                owner = self._ports.get(address)
        if owner is None:
            logger.info("no Service at %s:%d", *address)
            return None
        return service_endpoint(self.api, *owner)
