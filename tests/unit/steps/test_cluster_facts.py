"""Cluster facts: the API server's Service addresses (steps/facts.py)."""

from __future__ import annotations

from typing import cast

import pytest

from manager.apply.cache import ObjectCache
from manager.apply.discovery import Discovery
from manager.client.kube import JsonObject, Kube
from manager.steps.facts import ClusterFacts
from tests.unit.configs import config


class _ServiceReader:
    """A Kube that serves one object and counts the reads."""

    def __init__(self, objects: dict[str, JsonObject]) -> None:
        self.objects = objects
        self.reads: list[str] = []

    async def get(self, path: str) -> JsonObject | None:
        self.reads.append(path)
        return self.objects.get(path)


KUBERNETES_SERVICE_PATH = "/api/v1/namespaces/default/services/kubernetes"


def _no_apiserver() -> ObjectCache:
    """A cache whose APIServer watch listed nothing: the TLS profile costs no read; and
    whose Namespace watch holds the operand namespace (the operator created it): its labels
    cost no read either."""
    cache = ObjectCache()
    cache.replace(("config.openshift.io", "APIServer"), [])
    cache.replace(("", "Namespace"), [{"apiVersion": "v1", "kind": "Namespace",
                                       "metadata": {"name": "external-secrets"}}])
    return cache


@pytest.mark.parametrize(("service", "expected"), [
    ({"spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"]}}, ("10.96.0.1",)),
    ({"spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1", "fd00::1"]}},
     ("10.96.0.1", "fd00::1")),
    ({"spec": {"clusterIP": "172.30.0.1"}}, ("172.30.0.1",)),
    ({"spec": {"clusterIP": "None"}}, ()),
    (None, ()),
])
async def test_with_a_proxy_the_kubernetes_service_addresses_are_read_into_the_config(
        service: JsonObject | None, expected: tuple[str, ...]) -> None:
    kube = _ServiceReader({KUBERNETES_SERVICE_PATH: service} if service else {})
    facts = ClusterFacts(cast(Kube, kube), cast(Discovery, None), _no_apiserver())
    proxied = config({"proxy": {"httpProxy": "http://p:3128", "noProxy": "vault.corp"}})
    completed = await facts.complete(proxied)
    assert completed.proxy is not None
    assert completed.proxy.api_server_addresses == expected
    assert completed.proxy.effective_no_proxy.startswith(",".join(("vault.corp", *expected)))
    assert kube.reads.count(KUBERNETES_SERVICE_PATH) == 1


async def test_without_a_proxy_the_kubernetes_service_is_not_read() -> None:
    kube = _ServiceReader({})
    facts = ClusterFacts(cast(Kube, kube), cast(Discovery, None), _no_apiserver())
    assert await facts.complete(config()) == config()
    assert KUBERNETES_SERVICE_PATH not in kube.reads
