"""Cluster DNS and kube-proxy for OLM's network namespace (devcluster.services)."""

from __future__ import annotations

from typing import Any

from devcluster import services


def service(name: str, namespace: str, ip: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": ip, "ports": [{"name": "grpc", "port": 50051}]}}


def test_the_hosts_file_names_each_service_with_a_cluster_ip() -> None:
    text = services.hosts_file([service("catalog", "olm", "10.0.0.9"),
                                service("headless", "olm", "None"),
                                service("kubernetes", "default", "10.0.0.1")])
    assert text.startswith("127.0.0.1 localhost\n")
    lines = text.splitlines()[2:]
    assert lines == ["10.0.0.1 kubernetes.default.svc kubernetes.default.svc.cluster.local",
                     "10.0.0.9 catalog.olm.svc catalog.olm.svc.cluster.local"]


def test_only_a_ready_endpoint_of_the_named_port_is_chosen() -> None:
    def endpoint_slice(ready: bool, ip: str) -> dict[str, Any]:
        return {"ports": [{"name": "grpc", "port": 50051}],
                "endpoints": [{"addresses": [ip], "conditions": {"ready": ready}}]}

    assert services.ready_endpoint([endpoint_slice(False, "10.244.0.5")], "grpc") is None
    assert services.ready_endpoint([endpoint_slice(False, "10.244.0.5"),
                                    endpoint_slice(True, "10.244.0.6")], "grpc") == (
        "10.244.0.6", 50051)
    assert services.ready_endpoint([endpoint_slice(True, "10.244.0.6")], "metrics") is None
    assert services.ready_endpoint([], "grpc") is None
