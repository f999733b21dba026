"""Fixtures of the upgrade test: the operator's own client for the cluster under test."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from manager.client.kube import Kube
from tests.conftest import Cluster


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def admin(cluster: Cluster) -> AsyncIterator[Kube]:
    kube = Kube.connect(cluster.kubeconfig)
    yield kube
    await kube.close()
