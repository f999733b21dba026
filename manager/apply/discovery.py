"""Kind → REST resource, from the API server's discovery documents, cached per group version.

Only the group versions the operator actually uses are fetched (a handful), once each, and
lookups made at once (the watches and the first pass, at start-up) share one request. A kind
that is not served (cert-manager not installed, or its CRD just created and not yet in
discovery) is looked up again at most every `ABSENT_TTL` seconds. When a watched CRD comes,
goes or changes, the controllers forget what discovery said about its API group
(`invalidate_groups`), or everything when they cannot tell which (`invalidate()`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection
from dataclasses import dataclass
from urllib.parse import quote

from manager.client.kube import NOT_FOUND, ApiError, Kube


@dataclass(frozen=True)
class Resource:
    """Where objects of one kind live in the REST API."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def collection_path(self, namespace: str | None = None) -> str:
        """The collection; for a namespaced kind without `namespace`, all namespaces."""
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        if self.namespaced and namespace:
            return f"{base}/namespaces/{quote(namespace, safe='')}/{self.plural}"
        return f"{base}/{self.plural}"

    def object_path(self, name: str, namespace: str | None = None) -> str:
        if self.namespaced and not namespace:
            raise ValueError(f"{self.kind} {name} is namespaced, but no namespace was given")
        return f"{self.collection_path(namespace)}/{quote(name, safe='')}"


ABSENT_TTL = 5.0


def group_version_path(api_version: str) -> str:
    return "/api/v1" if api_version == "v1" else f"/apis/{api_version}"


class Discovery:
    """Resolves (apiVersion, kind) to a Resource; None when the API is not served."""

    def __init__(self, kube: Kube):
        self._kube = kube
        self._cache: dict[str, tuple[float, dict[str, Resource]]] = {}
        self._fetching: dict[str, asyncio.Task[dict[str, Resource]]] = {}

    async def resolve(self, api_version: str, kind: str) -> Resource | None:
        fetched_at, kinds = self._cache.get(api_version, (0.0, {}))
        if kind not in kinds and time.monotonic() - fetched_at > ABSENT_TTL:
            kinds = await self._shared_fetch(api_version)
        return kinds.get(kind)

    async def _shared_fetch(self, api_version: str) -> dict[str, Resource]:
        """One request per group version at a time: a lookup made while one is under way
        waits for its answer. Shielded: a cancelled caller does not cancel the others'."""
        task = self._fetching.get(api_version)
        if task is None:
            task = asyncio.create_task(self._fetch(api_version))
            self._fetching[api_version] = task
            task.add_done_callback(lambda done: self._fetched(api_version, done))
        return await asyncio.shield(task)

    def _fetched(self, api_version: str, task: asyncio.Task[dict[str, Resource]]) -> None:
        """Keep a fetch's answer (before its waiters resume), unless it was invalidated while
        under way: it may predate the change."""
        answered = not task.cancelled() and task.exception() is None  # (retrieves a failure)
        if self._fetching.get(api_version) is not task:
            return
        del self._fetching[api_version]
        if answered:
            self._cache[api_version] = (time.monotonic(), task.result())

    async def require(self, api_version: str, kind: str) -> Resource:
        resource = await self.resolve(api_version, kind)
        if resource is None:
            raise ApiError(404, "NotFound", f"the server does not serve {kind} ({api_version})",
                           "GET", group_version_path(api_version))
        return resource

    def invalidate(self, api_version: str | None = None) -> None:
        """Forget one group version (or all), so the next lookup asks the server again."""
        if api_version is None:
            self._cache.clear()
            self._fetching.clear()
        else:
            self._cache.pop(api_version, None)
            self._fetching.pop(api_version, None)

    def invalidate_groups(self, groups: Collection[str]) -> None:
        """Forget every version of these API groups (a CRD of theirs came, went or changed)."""
        for api_version in {*self._cache, *self._fetching}:
            if api_version.rpartition("/")[0] in groups:
                self.invalidate(api_version)

    async def _fetch(self, api_version: str) -> dict[str, Resource]:
        try:
            document = await self._kube.request("GET", group_version_path(api_version),
                                                expected=NOT_FOUND)
        except ApiError as error:
            if error.not_found:
                return {}
            raise
        kinds: dict[str, Resource] = {}
        for entry in document.get("resources", []):
            if "/" in entry["name"]:  # a subresource such as deployments/status
                continue
            kinds[entry["kind"]] = Resource(api_version, entry["kind"], entry["name"],
                                            bool(entry.get("namespaced")))
        return kinds
