"""Server-side apply of desired objects, sending a write only when one is needed."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from manager.apply.cache import ObjectCache
from manager.apply.convergence import is_converged, prepare_for_apply
from manager.apply.discovery import Discovery
from manager.apply.ownership import is_foreign, managed_by
from manager.apply.results import (
    Action,
    ObjectError,
    ObjectRef,
    ObjectResult,
    TerminatingObjectError,
)
from manager.client.kube import PARTIAL_METADATA_LIST, ApiError, JsonObject, Kube
from manager.names import FIELD_MANAGER

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Observed:
    """A desired object and what the cluster held under its name when it was read."""

    desired: JsonObject
    ref: ObjectRef
    live: JsonObject | None

    @property
    def foreign(self) -> bool:
        """It exists and the operator never applied it (manager.apply.ownership)."""
        return is_foreign(self.live)

    @property
    def terminating(self) -> bool:
        """It is being deleted: it can be applied again only once it is gone."""
        return self.live is not None and bool(self.live["metadata"].get("deletionTimestamp"))


class Applier:
    """Applies manifests with one field manager (`external-secrets-operator`), forcing
    ownership of the fields it sets, in the order given."""

    def __init__(self, kube: Kube, discovery: Discovery, cache: ObjectCache,
                 field_manager: str = FIELD_MANAGER):
        self.kube = kube
        self.discovery = discovery
        self.cache = cache
        self.field_manager = field_manager

    async def read(self, desired: JsonObject,
                   listed: Mapping[ObjectRef, JsonObject | None] | None = None) -> Observed:
        """The object `desired` names: from the cache of the operator's own objects, else
        from `listed` (read_all), else from the server (an object of that name that is not
        the operator's is invisible to the cache; none can exist while its API is not
        served). An object being deleted is returned as it is (`Observed.terminating`)."""
        ref = ObjectRef.of(desired)
        live = self.cache.get(ref) if self.cache.synced((ref.group, ref.kind)) else None
        if live is None and listed is not None and ref in listed:
            live = listed[ref]
        elif live is None:
            try:
                resource = await self.discovery.resolve(ref.api_version, ref.kind)
                live = None if resource is None else await self.kube.get(
                    resource.object_path(ref.name, ref.namespace or None))
            except ApiError as error:
                raise ObjectError(ref, "get", error) from error
        return Observed(desired, ref, live)

    async def read_all(self, objects: Sequence[JsonObject]) -> list[Observed]:
        """Each object as `read` would see it, with fewer requests: where the cache vouches
        for a kind, the names it does not hold (absent, or someone else's) are read with one
        metadata LIST per kind and namespace rather than a GET each. The reads go at once;
        the first failure, in order, is raised."""
        by_place: dict[tuple[str, str, str], list[ObjectRef]] = {}
        for obj in objects:
            ref = ObjectRef.of(obj)
            if self.cache.synced((ref.group, ref.kind)) and self.cache.get(ref) is None:
                by_place.setdefault((ref.api_version, ref.kind, ref.namespace), []).append(ref)
        listed: dict[ObjectRef, JsonObject | None] = {}
        for names in await asyncio.gather(*(
                self._names(api_version, kind, namespace, refs)
                for (api_version, kind, namespace), refs in by_place.items() if len(refs) > 1)):
            listed.update(names)
        return list(await asyncio.gather(*(self.read(obj, listed) for obj in objects)))

    async def _names(self, api_version: str, kind: str, namespace: str,
                     refs: list[ObjectRef]) -> dict[ObjectRef, JsonObject | None]:
        """What exists under `refs`' names (metadata only), by one LIST."""
        resource = await self.discovery.resolve(api_version, kind)
        if resource is None:  # not served: none can exist
            return dict.fromkeys(refs)
        try:
            listing = await self.kube.list(resource.collection_path(namespace or None),
                                           accept=PARTIAL_METADATA_LIST)
        except ApiError as error:
            raise ObjectError(refs[0], "list", error) from error
        found = {item["metadata"]["name"]: {**item, "apiVersion": api_version, "kind": kind}
                 for item in listing.get("items") or []}
        return {ref: found.get(ref.name) for ref in refs}

    async def write(self, observed: Observed) -> ObjectResult:
        """Make the object match its desired state: apply only if it is missing, out of date
        or drifted (see manager.apply.convergence). A foreign object is adopted: callers
        decide beforehand whether that is allowed. One being deleted cannot be written."""
        body = prepare_for_apply(observed.desired)
        ref, live = observed.ref, observed.live
        if observed.terminating:
            raise TerminatingObjectError(ref)
        if is_converged(body, live, self.field_manager):
            return ObjectResult(ref, Action.UNCHANGED, live=live)
        try:
            resource = await self.discovery.require(ref.api_version, ref.kind)
            applied = await self.kube.apply(resource.object_path(ref.name, ref.namespace or None),
                                            body, field_manager=self.field_manager)
        except ApiError as error:
            raise ObjectError(ref, "apply", error) from error
        self.cache.put((ref.group, ref.kind), applied)  # before the watch event says so
        if observed.foreign and live is not None:
            action, note = Action.ADOPTED, f"it was managed by {managed_by(live)}"
        else:
            action, note = (Action.CREATED if live is None else Action.UPDATED), ""
        logger.info("action=apply result=%s kind=%s name=%s", action, ref.kind, ref.where)
        return ObjectResult(ref, action, note, applied)

    async def apply(self, desired: JsonObject) -> ObjectResult:
        """Read, then write one object."""
        return await self.write(await self.read(desired))

    async def apply_all(self, objects: Iterable[JsonObject]) -> list[ObjectResult]:
        """Apply in order; the first failure stops the sequence (later objects may depend on
        earlier ones) and is raised."""
        return [await self.apply(obj) for obj in objects]
