"""Kind → REST resource, from the API server's discovery documents, cached per group version.

Only the group versions the operator actually uses are fetched (a handful), once each, and
lookups made at once (the watches and the first pass, at start-up) share one request.

An API that may be missing (cert-manager, the Prometheus Operator, OpenShift's config API,
the operand's own) arrives as a CRD, and the operator watches those CRDs by name
(runtime/watches.py). While such a watch is in sync it vouches for its group: a kind of the
group that discovery did not list stays absent, without asking the server again, until a CRD
event of the group makes the watches forget the group (`crd_changed`). The vouch holds only
while discovery agrees with the watches: a watched CRD that exists but whose plural the cached
document does not list (created a moment ago, not yet served) leaves the group unvouched.
A kind of a group that no CRD watch vouches for is looked up again at most every
`ABSENT_TTL` seconds. So every kind looked up in a group that some CRD watch vouches for
must have its own CRD watched whenever it is looked up (runtime/pass_watches.py,
steps/preflight.py dependency_watches, steps/facts.py TLS_PROFILE_WATCHES).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Hashable
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


def crd_group(name: str) -> str:
    """The API group of a CRD, from its name (`<plural>.<group>`, enforced by the server)."""
    return name.partition(".")[2]


class Discovery:
    """Resolves (apiVersion, kind) to a Resource; None when the API is not served."""

    def __init__(self, kube: Kube):
        self._kube = kube
        self._cache: dict[str, tuple[float, dict[str, Resource]]] = {}
        self._fetching: dict[str, asyncio.Task[dict[str, Resource]]] = {}
        # The CRD watches in sync that select one CRD by name: its name, and whether it exists.
        self._named_crds: dict[Hashable, tuple[str, bool]] = {}

    async def resolve(self, api_version: str, kind: str) -> Resource | None:
        cached = self._cache.get(api_version)
        if cached is not None:
            fetched_at, kinds = cached
            if kind in kinds:
                return kinds[kind]
            if time.monotonic() - fetched_at <= ABSENT_TTL or self.absence_vouched(api_version):
                return None
        return (await self._shared_fetch(api_version)).get(kind)

    def absence_vouched(self, api_version: str) -> bool:
        """Whether a kind the cached document of `api_version` does not list is known to be
        absent: a CRD watch of its group is in sync, and every watched CRD of the group that
        exists is listed (see the module doc)."""
        cached = self._cache.get(api_version)
        if cached is None:
            return False
        group = api_version.rpartition("/")[0]
        watched = [(name, exists) for name, exists in self._named_crds.values()
                   if crd_group(name) == group]
        plurals = {resource.plural for resource in cached[1].values()}
        return bool(watched) and all(name.partition(".")[0] in plurals
                                     for name, exists in watched if exists)

    # --- what the CRD watches say ----------------------------------------------------------

    def crd_watched(self, watch: Hashable, name: str, exists: bool) -> None:
        """The watch `watch` of the CRD `name` is in sync (listed, or followed an event);
        whether the CRD exists. What discovery remembers of its group and disagrees (the
        CRD exists but its plural is not listed, or the reverse) is forgotten."""
        self._named_crds[watch] = (name, exists)
        group, plural = crd_group(name), name.partition(".")[0]
        documents = [kinds for api_version, (_, kinds) in self._cache.items()
                     if api_version.rpartition("/")[0] == group]
        served = any(resource.plural == plural for kinds in documents
                     for resource in kinds.values())
        if documents and served != exists:
            self.invalidate_groups({group})

    def crd_unwatched(self, watch: Hashable) -> None:
        """The watch `watch` stopped, or broke and will list again: it vouches no more."""
        self._named_crds.pop(watch, None)

    def crd_changed(self, name: str) -> None:
        """The CRD `name` came, went or changed: forget what discovery said about its group."""
        self.invalidate_groups({crd_group(name)})

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
