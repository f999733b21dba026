"""Cluster DNS and kube-proxy for the pods (devcluster.services, devcluster.netns): the table of
ClusterIPs and ports, and the nftables rules that send a pod's connections to them to the
runner's relay."""

from __future__ import annotations

from typing import Any

from devcluster import netns, services


def service(name: str, namespace: str, ip: str, *ports: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": ip, "ports": list(ports)}}


def test_each_tcp_cluster_ip_and_port_names_its_service_and_port() -> None:
    table = services.service_ports([
        service("bitwarden-sdk-server", "external-secrets", "10.0.0.17",
                {"name": "http", "port": 9998}),
        service("dns", "kube-system", "10.0.0.10", {"name": "dns", "port": 53, "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP"}),
        service("headless", "team", "None", {"name": "http", "port": 80}),
        service("unnamed", "team", "10.0.0.20", {"port": 80})])
    assert table == {("10.0.0.17", 9998): ("external-secrets", "bitwarden-sdk-server", "http"),
                     ("10.0.0.10", 53): ("kube-system", "dns", "dns-tcp"),
                     ("10.0.0.20", 80): ("team", "unnamed", "")}


def test_the_rules_redirect_the_service_range_but_the_addresses_relayed_on_their_own() -> None:
    rules = netns.redirect_rules("10.0.0.0/24", 40123, [("10.0.0.1", 443), ("10.9.9.9", 3128)])
    lines = [line.strip() for line in rules.splitlines()]
    assert "type nat hook output priority -100; policy accept;" in lines
    redirect = lines.index("ip daddr 10.0.0.0/24 meta l4proto tcp redirect to :40123")
    # The kubernetes Service and the egress addresses keep their own listeners: first.
    assert lines.index("ip daddr 10.0.0.1 tcp dport 443 return") < redirect
    assert lines.index("ip daddr 10.9.9.9 tcp dport 3128 return") < redirect
