"""Cluster DNS and kube-proxy for OLM's network namespace: Services by name and ClusterIP.

The catalog operator reaches the registry pod of an image-based CatalogSource at the address
it writes into the CatalogSource's status, `<service>.<namespace>.svc:50051`: a name that
cluster DNS resolves to the Service's ClusterIP, where kube-proxy sends each connection to
one of the Service's ready endpoints. The simulated cluster has neither. For OLM's processes
(olm.py) this module stands in for both, from the Services and EndpointSlices the API server
holds:

- names: a hosts file listing every Service's ClusterIP under `<name>.<namespace>.svc` and
  `<name>.<namespace>.svc.cluster.local`, bind-mounted at /etc/hosts in OLM's private mount
  namespace only (the host's /etc/hosts is untouched). It is rewritten in place (a bind
  mount keeps its inode) when Services change; Go's resolver reads it again on change.
- addresses: each ClusterIP and port is relayed inside OLM's network namespace (netns.py
  `forward`) to a ready endpoint of the Service, looked up at each connection, in the
  cluster's namespace, where the pod runner relays the pod's address into the pod. Unlike
  kube-proxy's rules, a relay is a listener: a Service port that OLM's own processes bind
  on every address (8080, their health port) cannot be relayed, and is logged once.

Only OLM's namespace gets these; pods still reach only the API server (and declared egress).
"""

from __future__ import annotations

import logging
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
        try:
            services = self.api.request("GET", "/api/v1/services").get("items") or []
        except (ApiError, OSError) as error:
            logger.warning("listing Services failed: %s", error)
            return
        wanted = hosts_file(services)
        if self.hosts.read_text() != wanted:
            with self.hosts.open("r+") as hosts:  # in place: the bind mount keeps the inode
                hosts.write(wanted)
                hosts.truncate()
        for service in services:
            ip = cluster_ip(service)
            for port in (service.get("spec") or {}).get("ports") or []:
                address = (ip, int(port["port"]))
                if not ip or port.get("protocol", "TCP") != "TCP" or address in self._forwarded:
                    continue
                meta = service["metadata"]
                self._forwarded.add(address)  # tried once: a failure is logged once
                try:
                    self.network.forward(address, self._resolver(
                        meta["namespace"], meta["name"], port.get("name", "")))
                except OSError as error:
                    logger.warning("Service %s/%s: %s:%d cannot be relayed: %s",
                                   meta["namespace"], meta["name"], *address, error)

    def _resolver(self, namespace: str, name: str, port_name: str,
                  ) -> Callable[[], Address | None]:
        def endpoint() -> Address | None:
            try:
                slices = self.api.request(
                    "GET", SLICES.format(namespace=namespace),
                    {"labelSelector": f"kubernetes.io/service-name={name}"})
            except (ApiError, OSError):
                return None
            return ready_endpoint(slices.get("items") or [], port_name)
        return endpoint
