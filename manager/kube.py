"""A small asynchronous Kubernetes client for arbitrary kinds, built on kubernetes_asyncio.

The operator handles a dozen kinds, two of them (cert-manager's) optional, so it talks to
the API with plain JSON over the ApiClient that kubernetes_asyncio already authenticates
(bearer token, client certificate, in-cluster service account), instead of the typed
per-kind APIs or the DynamicClient (which discovers every group of the cluster up front).
Every request has a timeout; errors become `ApiError` with the status and the server's
message.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import os
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from kubernetes_asyncio import client, config

JsonObject = dict[str, Any]

REQUEST_TIMEOUT_SECONDS = 30.0
APPLY_PATCH = "application/apply-patch+yaml"
MERGE_PATCH = "application/merge-patch+json"
# Metadata only: watches and existence checks never transfer Secret data or CRD schemas.
PARTIAL_METADATA = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"
PARTIAL_METADATA_LIST = (
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
)

# Statuses worth retrying: the request may succeed later without anyone changing anything.
TRANSIENT_STATUSES = frozenset({0, 408, 409, 425, 429, 500, 502, 503, 504})


class ApiError(Exception):
    """A failed API request: HTTP status (0 when the server was not reached) and message."""

    def __init__(self, status: int, reason: str, message: str, method: str = "", path: str = ""):
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())
        self.status = status
        self.reason = reason
        self.message = message
        self.method = method
        self.path = path

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


KUBECONFIG_FIX = ("pass --kubeconfig PATH or set KUBECONFIG to a kubeconfig of the cluster "
                  "(`oc login` or `kubectl config view --raw` writes one), or run the operator "
                  "in a pod with a service account")


class KubeconfigError(Exception):
    """No usable credentials: the message says what is wrong and how to fix it."""


async def load_configuration(kubeconfig: str | os.PathLike[str] | None = None,
                             ) -> client.Configuration:
    """Client configuration from `kubeconfig`, else $KUBECONFIG or ~/.kube/config, else the
    in-cluster service account. Raises KubeconfigError when none of them is usable."""
    configuration = client.Configuration()
    path = str(kubeconfig) if kubeconfig else os.environ.get("KUBECONFIG") or None
    default = Path.home() / ".kube" / "config"
    if path is None and not default.exists():
        try:
            config.load_incluster_config(  # type: ignore[no-untyped-call]
                client_configuration=configuration)
        except config.ConfigException as error:
            raise KubeconfigError(f"no kubeconfig ({error}): {KUBECONFIG_FIX}") from None
        return configuration
    path = path or str(default)
    files = [Path(part) for part in path.split(os.pathsep) if part]
    if not any(file.is_file() for file in files):
        raise KubeconfigError(f"kubeconfig {path} does not exist: {KUBECONFIG_FIX}")
    try:
        await config.load_kube_config(config_file=path, client_configuration=configuration)
    except Exception as error:  # the client's parser fails in many ways on a bad file
        detail = (" ".join(str(error).split()) if isinstance(error, config.ConfigException)
                  else "not a kubeconfig (YAML with clusters, users, contexts and "
                  "current-context)")
        raise KubeconfigError(f"kubeconfig {path} is not usable: {detail}: {KUBECONFIG_FIX}",
                              ) from None
    return configuration


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


async def bearer_token(configuration: client.Configuration) -> str | None:
    """The bearer token the configuration authenticates with, if any."""
    header: object = configuration.get_api_key_with_prefix("BearerToken")
    if inspect.isawaitable(header):
        header = await header
    if not header:
        return None
    text = str(header)
    return text.split(" ", 1)[1] if " " in text else text


class Kube:
    """JSON requests against one API server, with the credentials of `configuration`."""

    def __init__(self, configuration: client.Configuration):
        self.configuration = configuration
        self.api = client.ApiClient(configuration)

    async def close(self) -> None:
        await self.api.close()

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
    ) -> JsonObject:
        """One request; the decoded JSON response (`{}` when empty). Raises ApiError."""
        try:
            response = await self.api.call_api(
                path, method,
                query_params=list((query or {}).items()),
                header_params={"Content-Type": content_type, "Accept": accept},
                body=body,
                auth_settings=["BearerToken"],
                _preload_content=False,
                _request_timeout=timeout,
            )
            async with response:
                data = await response.read()
                status = response.status
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            raise ApiError(0, type(error).__name__, str(error) or "connection failed",
                           method, path) from error
        if not 200 <= status <= 299:
            raise _api_error(status, data, method, path)
        if not data:
            return {}
        decoded: JsonObject = json.loads(data)
        return decoded

    async def get(self, path: str, *, accept: str = "application/json") -> JsonObject | None:
        """The object at `path`, or None if it does not exist."""
        try:
            return await self.request("GET", path, accept=accept)
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

    async def apply(self, path: str, body: JsonObject, *, field_manager: str) -> JsonObject:
        """Server-side apply of `body` at `path` (an object path), forcing ownership."""
        query = {"fieldManager": field_manager, "force": "true"}
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
            await self.request("DELETE", path, body=body)
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
        try:
            response = await self.api.call_api(
                path, "GET", query_params=list(query.items()),
                header_params={"Accept": accept},
                auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout,
            )
        except (TimeoutError, aiohttp.ClientError, OSError) as error:
            raise ApiError(0, type(error).__name__, str(error) or "connection failed",
                           "WATCH", path) from error
        async with response:
            if response.status != 200:
                raise _api_error(response.status, await response.read(), "WATCH", path)
            try:
                async for line in response.content:
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    if event.get("type") == "ERROR":
                        status = event.get("object", {})
                        raise ApiError(int(status.get("code") or 500), status.get("reason", ""),
                                       status.get("message", ""), "WATCH", path)
                    yield WatchEvent(event["type"], event["object"])
            except (TimeoutError, aiohttp.ClientError) as error:
                raise ApiError(0, type(error).__name__, str(error) or "stream broken",
                               "WATCH", path) from error


def _api_error(status: int, data: bytes, method: str, path: str) -> ApiError:
    reason, message = "", data.decode(errors="replace")[:500]
    try:
        body = json.loads(data)
    except ValueError:
        body = None
    if isinstance(body, dict):
        reason = str(body.get("reason", ""))
        message = str(body.get("message", message))
    return ApiError(status, reason, message, method, path)


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
