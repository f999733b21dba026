"""Server-side apply of desired objects, sending a write only when one is needed."""

from __future__ import annotations

import logging
from collections.abc import Iterable

from manager.apply.convergence import is_converged, prepare_for_apply
from manager.apply.discovery import Discovery
from manager.apply.results import (
    Action,
    ObjectError,
    ObjectRef,
    ObjectResult,
    TerminatingObjectError,
)
from manager.constants import FIELD_MANAGER
from manager.kube import ApiError, JsonObject, Kube

logger = logging.getLogger(__name__)


class Applier:
    """Applies manifests with one field manager (`external-secrets-operator`), forcing
    ownership of the fields it sets, in the order given."""

    def __init__(self, kube: Kube, discovery: Discovery, field_manager: str = FIELD_MANAGER):
        self.kube = kube
        self.discovery = discovery
        self.field_manager = field_manager

    async def apply(self, desired: JsonObject) -> ObjectResult:
        """Make the object in the cluster match `desired`: GET it, and apply only if it is
        missing, out of date or drifted (see manager.apply.convergence)."""
        ref = ObjectRef.of(desired)
        try:
            resource = await self.discovery.require(ref.api_version, ref.kind)
            path = resource.object_path(ref.name, ref.namespace or None)
            body = prepare_for_apply(desired)
            live = await self.kube.get(path)
            if live is not None and live["metadata"].get("deletionTimestamp"):
                raise TerminatingObjectError(ref)
            if is_converged(body, live, self.field_manager):
                return ObjectResult(ref, Action.UNCHANGED, live)
            applied = await self.kube.apply(path, body, field_manager=self.field_manager)
        except ApiError as error:
            raise ObjectError(ref, "apply", error) from error
        action = Action.CREATED if live is None else Action.UPDATED
        logger.info("action=apply result=%s kind=%s name=%s", action, ref.kind, ref.where)
        return ObjectResult(ref, action, applied)

    async def apply_all(self, objects: Iterable[JsonObject]) -> list[ObjectResult]:
        """Apply in order; the first failure stops the sequence (later objects may depend on
        earlier ones) and is raised."""
        return [await self.apply(obj) for obj in objects]
