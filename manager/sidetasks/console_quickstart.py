"""The operator's ConsoleQuickStart (manager/olm/quickstart.py), applied where the console
serves the kind.

It cannot ship in the bundle: OLM fails the whole install when a bundle object's API is not
served, which is so off OpenShift and on OpenShift clusters without the Console capability
(openshift/cert-manager-operator moved its QuickStart and samples out of its bundle for that,
OCPBUGS-85579). So every pass applies it here once console.openshift.io/v1 serves
ConsoleQuickStart, and does nothing where it does not (a watch of its CRD, `QUICKSTART_CRD_WATCH`,
wakes a pass when the console's API arrives and vouches for its absence until then, so a
cluster without it costs no discovery request).

Ownership as for the operator's monitoring objects: written only by server-side apply with
the operator's field manager and only when it differs (a steady pass reads one object and
writes nothing); an object of that name someone else made is left alone and reported. No
managed-by label: it is not the operand's, so neither pruning nor `uninstall --operand`
touches it. Its owner is the ExternalSecretsConfig CRD (cluster-scoped, as a cluster-scoped
object's owner must be): the tour is about that API and goes when the API is deleted
(docs/uninstall.md). The owner's uid is read when the object is written, never kept, so a CRD
deleted and created again gets a QuickStart owned by the new one.
"""

from __future__ import annotations

import logging
from typing import Final

from manager.apply.convergence import applied_by, is_converged, prepare_for_apply
from manager.apply.discovery import Discovery
from manager.apply.ownership import managed_by
from manager.client.kube import CRD_COLLECTION, PARTIAL_METADATA, JsonObject, Kube
from manager.names import CRD_API_VERSION, CRD_KIND, ESC_PLURAL, FIELD_MANAGER, GROUP
from manager.olm.quickstart import CRD, NAME, QUICKSTART_API, QUICKSTART_KIND, quickstart
from manager.steps.preflight import crd_watch

logger = logging.getLogger(__name__)

ESC_CRD: Final = f"{ESC_PLURAL}.{GROUP}"
QUICKSTART_CRD_WATCH: Final = crd_watch(CRD)
"""Standing: the console's API arriving (or going) wakes a pass."""


def desired(owner_uid: str | None) -> JsonObject:
    """The QuickStart, owned by the ExternalSecretsConfig CRD of `owner_uid` (when read)."""
    obj = quickstart()
    obj["metadata"]["labels"] = {"app.kubernetes.io/name": NAME,
                                 "app.kubernetes.io/part-of": FIELD_MANAGER}
    if owner_uid:
        obj["metadata"]["ownerReferences"] = [{
            "apiVersion": CRD_API_VERSION, "kind": CRD_KIND, "name": ESC_CRD,
            "uid": owner_uid}]
    return obj


class ConsoleQuickStart:
    def __init__(self, kube: Kube, discovery: Discovery):
        self._kube = kube
        self._discovery = discovery
        self._said: str | None = None  # the last note logged, so that each is logged once

    async def reconcile(self) -> str | None:
        """Apply the QuickStart where the kind is served. Returns why it was not (an object
        of its name that is not the operator's; logged when it changes), else None; raises
        ApiError."""
        note = await self._reconcile()
        if note != self._said and note is not None:
            logger.warning("action=console-quickstart result=skipped reason=%r", note)
        self._said = note
        return note

    async def _reconcile(self) -> str | None:
        resource = await self._discovery.resolve(QUICKSTART_API, QUICKSTART_KIND)
        if resource is None:  # not OpenShift, or its console is not installed
            return None
        path = resource.object_path(NAME)
        live = await self._kube.get(path)
        if live is not None and applied_by(live, FIELD_MANAGER) is None:
            return (f"{QUICKSTART_KIND} {NAME} exists and is managed by {managed_by(live)}: "
                    "the operator leaves it alone")
        body = prepare_for_apply(desired(_uid(live)))
        if live is not None and is_converged(body, live, FIELD_MANAGER):
            return None
        owner = await self._kube.get(f"{CRD_COLLECTION}/{ESC_CRD}", accept=PARTIAL_METADATA)
        body = prepare_for_apply(desired(((owner or {}).get("metadata") or {}).get("uid")))
        await self._kube.apply(path, body, field_manager=FIELD_MANAGER)
        logger.info("action=apply result=%s kind=%s name=%s",
                    "created" if live is None else "updated", QUICKSTART_KIND, NAME)
        return None


def _uid(live: JsonObject | None) -> str | None:
    """The owner's uid the live object names: a steady pass compares against it instead of
    reading the CRD."""
    for reference in ((live or {}).get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("kind") == CRD_KIND and reference.get("name") == ESC_CRD:
            return str(reference.get("uid"))
    return None
