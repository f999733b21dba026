"""A small asynchronous Kubernetes client for arbitrary kinds: JSON over aiohttp.

The operator handles a dozen kinds, two of them (cert-manager's) optional, so it talks to
the API with plain JSON requests instead of typed per-kind APIs: no client library, whose
generated models kopf would import in full (docs/development.md, "Client choice"). aiohttp is
kopf's own HTTP client. Credentials come from manager.client.credentials (kubeconfig, exec plugins,
the rotating in-cluster token); after a 401 they are fetched again and the request is sent
once more. Every request has a timeout; errors become `ApiError` with the status and the
server's message.
"""

from __future__ import annotations

import asyncio
import asyncio.sslproto
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from manager import metrics
from manager.client.credentials import Credentials, CredentialsError, load_credentials
from manager.errors import PassError

JsonObject = dict[str, Any]

REQUEST_TIMEOUT_SECONDS = 30.0
# Each HTTP/1.1 request in flight holds a TLS connection of its own, and idle ones stay in
# the pool: at most this many requests at once (watches aside, which hold one each).
MAX_CONCURRENT_REQUESTS = 16
# asyncio gives every TLS connection a 256 KiB read buffer (sslproto.SSLProtocol.max_size),
# resident for the connection's life; with a connection per watch that was about 6 MB of the
# operator's 70 (docs/performance.md). 32 KiB still takes a watch event or an apply's answer
# in one read; a large listing takes a few more.
TLS_READ_BUFFER = 32 * 1024
asyncio.sslproto.SSLProtocol.max_size = TLS_READ_BUFFER
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
# Metadata only: watches and existence checks never transfer Secret data or CRD schemas.
PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
PARTIAL_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)

# Statuses worth retrying: the request may succeed later without anyone changing anything.
TRANSIENT_STATUSES = frozenset({0, 408, 409, 425, 429, 500, 502, 503, 504})
NOT_FOUND = frozenset({404})


class ApiError(PassError):
    """A failed API request: HTTP status (0 when the server was not reached) and message."""

    def __init__(self, status: int, reason: str, message: str, method: str = "", path: str = "",
                 *, details: JsonObject | None = None):
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message
        self.method = method
        self.path = path
        self.details = details or {}
        """The Status object's `details` (for example `causes` of a 422)."""

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def conflict(self) -> bool:
        return self.status == 409

    @property
    def transient(self) -> bool:
        return self.status in TRANSIENT_STATUSES


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK, ERROR
    object: JsonObject


SERVICE_ACCOUNT_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


def own_namespace(environ: Mapping[str, str] = os.environ,
                  namespace_file: Path = SERVICE_ACCOUNT_NAMESPACE_FILE) -> str | None:
    """The namespace this process runs in: POD_NAMESPACE (the Deployment sets it from the
    downward API), else the in-cluster service account's namespace file; None outside a pod."""
    if environ.get("POD_NAMESPACE"):
        return environ["POD_NAMESPACE"]
    try:
        return namespace_file.read_text(encoding="utf-8").strip() or None
    except OSError:
        return None


USER_AGENT = "external-secrets-operator"


class Kube:
    """JSON requests against one API server, authenticated by `credentials`. `user_agent`
    names the client in the API server's audit log (with leader election: which candidate)."""

    def __init__(self, credentials: Credentials, user_agent: str = USER_AGENT):
        self.credentials = credentials
        self.user_agent = user_agent
        self._session: aiohttp.ClientSession | None = None
        self._slots = asyncio.Semaphore(MAX_CONCURRENT_REQUESTS)

    @classmethod
    def connect(cls, kubeconfig: str | os.PathLike[str] | None = None) -> Kube:
        """From `kubeconfig`, else $KUBECONFIG, ~/.kube/config or the in-cluster account."""
        return cls(load_credentials(kubeconfig))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def _send(self, method: str, path: str, *, query: Mapping[str, str] | None,
                    body: object, content_type: str, accept: str,
                    timeout: aiohttp.ClientTimeout) -> aiohttp.ClientResponse:
        """The response (to be released by the caller); after a 401 the credentials are
        fetched again and the request is sent once more."""
        if self._session is None or self._session.closed:
            # Never the environment's proxy: HTTP(S)_PROXY is the cluster-wide proxy OLM
            # injects for the operand, not a way to the API server (only a kubeconfig's
            # proxy-url is). aiohttp's default, stated so that it stays.
            self._session = aiohttp.ClientSession(trust_env=False)
        data = None if body is None else json.dumps(body).encode()
        metrics.record_request(method, path, content_type, query)
        for attempt in (1, 2):
            headers = {"Accept": accept, "User-Agent": self.user_agent}
            if data is not None:
                headers["Content-Type"] = content_type
            try:
                authorization = await self.credentials.authorization()
                if authorization:
                    headers["Authorization"] = authorization
                response = await self._session.request(
                    method, self.credentials.server + path, params=query, data=data,
                    headers=headers, ssl=await self.credentials.ssl_context(),
                    proxy=self.credentials.proxy, timeout=timeout,
                    server_hostname=self.credentials.tls_server_name)
            except (TimeoutError, aiohttp.ClientError, OSError, CredentialsError) as error:
                metrics.record_error(0)
                raise ApiError(0, type(error).__name__, str(error) or "connection failed",
                               method, path) from error
            if response.status == 401 and attempt == 1:
                response.release()
                self.credentials.invalidate()
                continue
            return response
        raise AssertionError("unreachable")

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: object = None,
        content_type: str = "application/json",
        accept: str = "application/json",
        timeout: float = REQUEST_TIMEOUT_SECONDS,
        expected: frozenset[int] = frozenset(),
    ) -> JsonObject:
        """One request; the decoded JSON response (`{}` when empty). Raises ApiError.
        `expected`: statuses the caller takes as an answer (404 for "does it exist?"), which
        the error metric does not count."""
        data = await self._body(method, path, query=query, body=body,
                                content_type=content_type, accept=accept, timeout=timeout,
                                expected=expected)
        if not data:
            return {}
        decoded: JsonObject = json.loads(data)
        return decoded

    async def text(self, path: str, *, query: Mapping[str, str] | None = None,
                   timeout: float = REQUEST_TIMEOUT_SECONDS) -> str:
        """The body of a GET that answers text, not JSON (a pod's log, metrics through the
        API server's proxy). Raises ApiError."""
        data = await self._body("GET", path, query=query, body=None,
                                content_type="application/json", accept="*/*",
                                timeout=timeout, expected=frozenset())
        return data.decode(errors="replace")

    async def _body(self, method: str, path: str, *, query: Mapping[str, str] | None,
                    body: object, content_type: str, accept: str, timeout: float,
                    expected: frozenset[int]) -> bytes:
        """The raw body of a 2xx answer; any other answer or a broken connection raises
        ApiError (counted by the error metric unless `expected`). At most
        MAX_CONCURRENT_REQUESTS at once (watches aside)."""
        async with self._slots:
            response = await self._send(method, path, query=query, body=body,
                                        content_type=content_type, accept=accept,
                                        timeout=aiohttp.ClientTimeout(total=timeout))
            try:
                async with response:
                    data = await response.read()
            except (TimeoutError, aiohttp.ClientError, OSError) as error:
                metrics.record_error(0)
                raise ApiError(0, type(error).__name__, str(error) or "connection failed",
                               method, path) from error
        if not 200 <= response.status <= 299:
            if response.status not in expected:
                metrics.record_error(response.status)
            raise _api_error(response.status, data, method, path)
        return data

    async def get(self, path: str, *, accept: str = "application/json") -> JsonObject | None:
        """The object at `path`, or None if it does not exist."""
        try:
            return await self.request("GET", path, accept=accept, expected=NOT_FOUND)
        except ApiError as error:
            if error.not_found:
                return None
            raise

    async def list(self, path: str, *, label_selector: str | None = None,
                   field_selector: str | None = None,
                   accept: str = "application/json") -> JsonObject:
        query = {}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        return await self.request("GET", path, query=query, accept=accept)

    async def apply(self, path: str, body: JsonObject, *, field_manager: str,
                    dry_run: bool = False) -> JsonObject:
        """Server-side apply of `body` at `path` (an object path), forcing ownership; with
        `dry_run`, the object as the server would store it, and nothing stored."""
        query = {"fieldManager": field_manager, "force": "true"}
        if dry_run:
            query["dryRun"] = "All"
        return await self.request("PATCH", path, query=query, body=body, content_type=APPLY_PATCH)

    async def merge_patch(self, path: str, body: JsonObject, *, field_manager: str) -> JsonObject:
        return await self.request("PATCH", path, query={"fieldManager": field_manager},
                                  body=body, content_type=MERGE_PATCH)

    async def create(self, path: str, body: JsonObject, *, field_manager: str) -> JsonObject:
        return await self.request("POST", path, query={"fieldManager": field_manager}, body=body)

    async def delete(self, path: str, *, uid: str | None = None) -> None:
        """Delete the object at `path`; with `uid`, only that incarnation of it."""
        body: JsonObject = {"apiVersion": "v1", "kind": "DeleteOptions",
                            "propagationPolicy": "Background"}
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            await self.request("DELETE", path, body=body, expected=NOT_FOUND)
        except ApiError as error:
            if not error.not_found:
                raise

    async def watch(self, path: str, *, resource_version: str, label_selector: str | None = None,
                    field_selector: str | None = None, timeout_seconds: int = 300,
                    accept: str = "application/json") -> AsyncIterator[WatchEvent]:
        """Events on the collection at `path` from `resource_version` until the server ends
        the stream (after about `timeout_seconds`). Raises ApiError (410 when too old)."""
        query = {"watch": "true", "resourceVersion": resource_version,
                 "allowWatchBookmarks": "true", "timeoutSeconds": str(timeout_seconds)}
        if label_selector:
            query["labelSelector"] = label_selector
        if field_selector:
            query["fieldSelector"] = field_selector
        timeout = aiohttp.ClientTimeout(total=None, connect=REQUEST_TIMEOUT_SECONDS,
                                        sock_read=timeout_seconds + 30)
        response = await self._send("GET", path, query=query, body=None,
                                    content_type="application/json", accept=accept,
                                    timeout=timeout)
        async with response:
            if response.status != 200:
                metrics.record_error(response.status)
                raise _api_error(response.status, await response.read(), "WATCH", path)
            try:
                async for line in _lines(response.content):
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object", {})
                        metrics.record_error(int(status.get("code") or 500))
                        raise ApiError(int(status.get("code") or 500), status.get("reason", ""),
                                       status.get("message", ""), "WATCH", path)
                    yield WatchEvent(event["type"], event["object"])
            except (TimeoutError, aiohttp.ClientError) as error:
                metrics.record_error(0)
                raise ApiError(0, type(error).__name__, str(error) or "stream broken",
                               "WATCH", path) from error


async def _lines(stream: aiohttp.StreamReader) -> AsyncIterator[bytes]:
    """Non-empty lines of a stream, however long (aiohttp's own line reading stops at 64 KiB)."""
    pending = b""
    async for chunk in stream.iter_any():
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            if line.strip():
                yield line
    if pending.strip():
        yield pending


def _api_error(status: int, data: bytes, method: str, path: str) -> ApiError:
    reason, message = "", data.decode(errors="replace")[:500]
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    details = None
    if isinstance(body, dict):
        reason = str(body.get("reason", ""))
        message = str(body.get("message", message))
        details = body.get("details")
    return ApiError(status, reason, message, method, path, details=details)


CRD_COLLECTION = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


async def _lists(kube: Kube, crd: JsonObject, group: str, version: str) -> bool:
    """Whether the CRD's resource is in discovery and its storage answers a list."""
    plural = crd["spec"]["names"]["plural"]
    served = await kube.get(f"/apis/{group}/{version}") or {}
    if not any(r.get("name") == plural for r in served.get("resources") or []):
        return False
    try:
        await kube.request("GET", f"/apis/{group}/{version}/{plural}", query={"limit": "1"})
    except ApiError as error:
        if error.transient or error.not_found:  # 429 while its storage initialises
            return False
        raise
    return True


async def install_crds(kube: Kube, crds: list[JsonObject], *, field_manager: str,
                       timeout: float = 60.0) -> None:
    """Server-side apply CRDs and wait until each is Established and served."""
    for crd in crds:
        await kube.apply(f"{CRD_COLLECTION}/{crd['metadata']['name']}", crd,
                         field_manager=field_manager)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    for crd in crds:
        name = crd["metadata"]["name"]
        group = crd["spec"]["group"]
        version = next(v["name"] for v in crd["spec"]["versions"] if v.get("served", True))
        while True:
            live = await kube.request("GET", f"{CRD_COLLECTION}/{name}")
            conditions = {c["type"]: c["status"]
                          for c in (live.get("status") or {}).get("conditions") or []}
            if conditions.get("Established") == "True" and await _lists(kube, crd, group, version):
                break
            if loop.time() > deadline:
                raise TimeoutError(f"CRD {name} is not established after {timeout}s")
            await asyncio.sleep(0.2)
