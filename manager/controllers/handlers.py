"""kopf's part: watch the two custom resources and hand every event to the queue.

kopf watches exactly ExternalSecretsConfig and ExternalSecretsManager, with event-level
handlers only (`on.event`). Those store nothing on the objects: no finalizers, no progress
or last-handled-configuration annotations, no status fields; the operator writes nothing to
the CRs except their `status`, through its own client. Settings switch off what is not
needed: cluster scanning (no CRD/namespace watches), kopf's Event posting (the operator
posts its own Events), peering (one replica).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import kopf
from kubernetes_asyncio import client

from manager.constants import (
    ESC_KIND,
    ESC_PLURAL,
    ESM_KIND,
    ESM_PLURAL,
    GROUP,
    SINGLETON_NAME,
    VERSION,
)
from manager.controllers.runtime import OperatorRuntime
from manager.kube import bearer_token

logger = logging.getLogger(__name__)


async def connection_info(configuration: client.Configuration) -> kopf.ConnectionInfo:
    """kopf logs in with exactly the credentials the operator's own client uses."""
    token = await bearer_token(configuration)
    if not configuration.host:
        raise kopf.LoginError("the client configuration names no API server")
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme="Bearer" if token else None,
        token=token,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
        proxy_url=configuration.proxy,
    )


def build_registry(runtime_factory: Callable[[], Awaitable[OperatorRuntime]],
                   configuration: client.Configuration,
                   holder: dict[str, OperatorRuntime]) -> kopf.OperatorRegistry:
    """A fresh registry (several operators may run one after another in one process).

    `runtime_factory` builds and starts the runtime in kopf's startup phase; `holder` gets
    it under "runtime" so the caller can reach it.
    """
    registry = kopf.OperatorRegistry()

    @kopf.on.startup(registry=registry)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.scanning.disabled = True
        settings.posting.enabled = False
        settings.peering.standalone = True
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 60
        holder["runtime"] = await runtime_factory()
        logger.info("action=start watching=%s,%s", ESC_KIND, ESM_KIND)

    @kopf.on.cleanup(registry=registry)
    async def shutdown(**_: Any) -> None:
        runtime = holder.get("runtime")
        if runtime is not None:
            await runtime.stop()
        logger.info("action=stop")

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.ConnectionInfo:
        return await connection_info(configuration)

    @kopf.on.probe(id="lastPass", registry=registry)
    def last_pass(**_: Any) -> dict[str, Any]:
        runtime = holder.get("runtime")
        summary = runtime.last_pass if runtime else None
        if summary is None:
            return {"number": 0, "result": "Pending"}
        return {"number": summary.number, "result": summary.result}

    def is_singleton(name: str, **_: Any) -> bool:
        return name == SINGLETON_NAME

    for kind, plural in ((ESC_KIND, ESC_PLURAL), (ESM_KIND, ESM_PLURAL)):
        _register_event_handler(registry, kind, plural, holder, is_singleton)
    return registry


def _register_event_handler(registry: kopf.OperatorRegistry, kind: str, plural: str,
                            holder: dict[str, OperatorRuntime],
                            when: Callable[..., bool]) -> None:
    @kopf.on.event(GROUP, VERSION, plural, registry=registry, when=when, id=f"{plural}-event")
    async def on_event(event: kopf.RawEvent, body: kopf.Body, **_: Any) -> None:
        runtime = holder.get("runtime")
        if runtime is not None:
            runtime.custom_resource_event(kind, event.get("type"), dict(body))
