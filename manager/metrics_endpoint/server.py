"""GET /metrics: the operator's own series (manager/metrics.py), in the Prometheus text format.

    python -m manager run [--metrics-addr :8080]   serves them (docs/operations.md)

Served over TLS to bearer tokens allowed to `get` /metrics (manager/metrics_endpoint/tls.py,
manager/metrics_endpoint/auth.py), or plain and open with --metrics-secure=false (local runs).
"""

from __future__ import annotations

import logging
import ssl
from typing import Final

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST

from manager.metrics import exposition
from manager.metrics_endpoint.auth import MetricsAccess
from manager.metrics_endpoint.tls import ServingTLS

logger = logging.getLogger(__name__)

DEFAULT_METRICS_ADDR: Final = ":8080"
METRICS_PATH: Final = "/metrics"


def _exposition_response() -> web.Response:
    response = web.Response(body=exposition())
    response.content_type = CONTENT_TYPE_LATEST.split(";")[0]
    response.charset = "utf-8"
    return response


def parse_addr(addr: str) -> tuple[str, int]:
    """`HOST:PORT` or `:PORT` (all interfaces) -> (host, port)."""
    host, sep, port = addr.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--metrics-addr must be HOST:PORT or :PORT, not {addr!r}")
    return host.strip("[]") or "0.0.0.0", int(port)  # noqa: S104 (a pod's port, by design)


class MetricsServer:
    """GET /metrics on one address, in the operator's event loop. With `tls`, over HTTPS;
    with `access`, only to requests whose bearer token may get /metrics."""

    def __init__(self, addr: str, *, tls: ServingTLS | None = None,
                 access: MetricsAccess | None = None) -> None:
        self.host, self.port = parse_addr(addr)
        self.tls = tls
        self.access = access
        self._runner: web.AppRunner | None = None

    @property
    def scheme(self) -> str:
        return "https" if self.tls is not None else "http"

    def set_tls_policy(self, minimum: ssl.TLSVersion, ciphers: str) -> None:
        """The cluster's TLS profile: minimum version and ciphers (OpenSSL cipher-list
        syntax), for every connection from now on. Intermediate until called; plain HTTP
        has nothing to apply it to."""
        if self.tls is not None:
            self.tls.set_policy(minimum, ciphers)

    async def _metrics(self, request: web.Request) -> web.Response:
        if self.access is not None:
            status = await self.access.status(request.headers.get("Authorization"))
            if status != web.HTTPOk.status_code:
                headers = {"WWW-Authenticate": 'Bearer realm="metrics"'} if status == 401 else {}
                return web.Response(status=status, headers=headers)
        return _exposition_response()

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get(METRICS_PATH, self._metrics)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port,
                           ssl_context=self.tls.context if self.tls else None)
        try:
            if self.tls is not None:
                await self.tls.start()
            await site.start()
        except (OSError, RuntimeError) as error:
            # The port is taken, or no certificate: reconciling matters more than metrics.
            logger.warning("action=serve-metrics result=error address=%s:%d error=%r "
                           "hint=%r", self.host, self.port, str(error),
                           "choose another port with --metrics-addr, or 'off'; mount a "
                           "certificate (--metrics-cert-file, --metrics-key-file)")
            await self.stop()
            return
        sockets = getattr(site._server, "sockets", None) or []
        if sockets:  # the port actually bound (port 0 picks a free one)
            self.port = sockets[0].getsockname()[1]
        # The settings line (the second of the log) already names the address.
        logger.debug("action=serve-metrics address=%s://%s:%d%s", self.scheme, self.host,
                     self.port, METRICS_PATH)

    async def stop(self) -> None:
        if self.tls is not None:
            await self.tls.stop()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None
