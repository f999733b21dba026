"""The operator's own API traffic never goes through the environment's proxy.

OLM copies the cluster-wide proxy into the operator's environment (HTTP_PROXY, HTTPS_PROXY,
NO_PROXY) for the operand; the API server is inside the cluster, and a proxy outside it
would not reach it. Only a kubeconfig's `proxy-url` may route the operator's requests. With
every proxy variable pointing at a listener that counts connections, the operator's client
(manager/client/kube.py) and kopf's (logged in by manager/runtime/handlers.py) talk to the real
API server directly: the listener sees no connection.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import aiohttp
import pytest

from manager.client.credentials import load_credentials
from manager.client.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import OperatorThread
from tests.proxy_listener import counting_listener

StartOperator = Callable[..., Awaitable[OperatorThread]]

PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy",
                   "all_proxy")


async def test_the_operator_does_not_send_its_api_requests_to_the_environments_proxy(
        cluster: Cluster, start_operator: StartOperator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with counting_listener() as proxy:
        for name in PROXY_VARIABLES:
            monkeypatch.setenv(name, proxy.url)
        for name in ("NO_PROXY", "no_proxy"):  # nothing exempts the API server's address
            monkeypatch.delenv(name, raising=False)

        client = Kube.connect(cluster.kubeconfig)
        try:
            version = await client.request("GET", "/version")
        finally:
            await client.close()
        assert version.get("gitVersion"), version

        operator = await start_operator()  # kopf's watches and the operator's passes
        await operator.wait_idle()
        assert operator.passes > 0
        assert proxy.connections == 0, f"{proxy.connections} connections went to the proxy"

        # The check can fail: a client that honours the environment goes to the listener.
        credentials = load_credentials(cluster.kubeconfig)
        async with aiohttp.ClientSession(trust_env=True) as session:
            with pytest.raises(aiohttp.ClientError):
                await session.get(f"{credentials.server}/version",
                                  ssl=await credentials.ssl_context())
        assert proxy.connections >= 1
