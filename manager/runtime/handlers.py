"""kopf's part: the process around the runtime (start-up, clean-up, login, liveness probe).

The two custom resources are watched by the runtime itself (manager.runtime.worker),
metadata only, together with their CRDs. kopf, with cluster scanning off, resolves the
resources it watches once at start-up: it would never see an ExternalSecretsConfig whose CRD
was created after the operator started, or deleted and created again. With scanning on it
would stream every CRD of the cluster in full. So kopf watches no resource: it stores
nothing on the objects (no finalizers, no progress or last-handled-configuration
annotations), and the operator writes nothing to the CRs except their `status`, through its
own client. Settings switch off what is not needed: cluster scanning, kopf's Event posting
(the operator posts its own Events), peering (manager.runtime.leader elects one instance).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Collection
from datetime import UTC, datetime
from typing import Any

import kopf

from manager.client.credentials import Credentials
from manager.runtime.worker import OperatorRuntime

logger = logging.getLogger(__name__)


async def connection_info(credentials: Credentials) -> kopf.ConnectionInfo:
    """kopf logs in with exactly the credentials the operator's own client uses; a rotating
    credential carries its expiry, so kopf asks again in time."""
    authorization = await credentials.authorization()
    certificate = credentials.certificate
    expires = credentials.expires
    return kopf.ConnectionInfo(
        server=credentials.server,
        ca_path=credentials.ca_file,
        ca_data=credentials.ca_data,
        insecure=credentials.insecure,
        scheme="Bearer" if authorization else None,
        token=authorization.split(" ", 1)[1] if authorization else None,
        certificate_data=certificate.certificate if certificate else None,
        private_key_data=certificate.key if certificate else None,
        proxy_url=credentials.proxy,
        trust_env=False,  # as our client (client/kube.py): the environment's proxy is the operand's
        expiration=(datetime.fromtimestamp(expires, UTC)
                    if expires is not None and expires != float("inf") else None),
    )


def build_registry(runtime_factory: Callable[[], Awaitable[OperatorRuntime]] | None,
                   credentials: Credentials,
                   holder: dict[str, OperatorRuntime],
                   keep: Collection[asyncio.Task[Any]] = ()) -> kopf.OperatorRegistry:
    """A fresh registry (several operators may run one after another in one process).

    `runtime_factory` builds and starts the runtime in kopf's startup phase; `holder` gets
    it under "runtime" so the caller can reach it. None: the caller starts the runtime itself
    (leader election: only once it holds the Lease). At clean-up every other task still running
    is cancelled, except those in `keep` (the one running the operator).
    """
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.scanning.disabled = True
        settings.posting.enabled = False
        settings.peering.standalone = True
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 60
        if runtime_factory is not None:
            holder["runtime"] = await runtime_factory()

    @kopf.on.cleanup(registry=registry)
    async def shutdown(**_: Any) -> None:
        runtime = holder.get("runtime")
        if runtime is not None:
            await runtime.stop()
        await _cancel_leftovers(keep)
        logger.info("action=stop")

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return await connection_info(credentials)

    @kopf.on.probe(id="lastPass", registry=registry)
    def last_pass(**_: Any) -> dict[str, Any]:
        runtime = holder.get("runtime")
        summary = runtime.last_pass if runtime else None
        if summary is None:
            return {"number": 0, "result": "Pending"}
        return {"number": summary.number, "result": summary.result}

    return registry


async def _cancel_leftovers(keep: Collection[asyncio.Task[Any]]) -> None:
    """Cancel the tasks kopf would otherwise wait 5 s for (its API scans, retrying while the
    API server does not answer): SIGTERM must stop the operator within 2 s."""
    current = asyncio.current_task()
    leftovers = [task for task in asyncio.all_tasks()
                 if task is not current and task not in keep and not task.done()]
    for task in leftovers:
        task.cancel()
    for task in leftovers:
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
