"""Deletion of managed objects that are no longer desired.

Safety rules, each enforced here and not left to callers:
- objects are found by the server-side label selector
  `app.kubernetes.io/managed-by=external-secrets-operator`, in every namespace: what the
  operator applied in a namespace it no longer uses (the operand moved, an operating
  namespace changed) is unwanted like anything else it no longer renders;
- listings are metadata only, so no Secret data reaches the operator;
- an object is deleted only if it carries that label AND our field manager has applied it
  (an `Apply` entry in its managedFields): an object that merely copied our labels is
  never ours to delete;
- Namespaces are never deleted (that would take user Secrets, ExternalSecrets and
  SecretStores with them);
- deletion is preconditioned on the listed object's uid, so an object re-created meanwhile
  by someone else survives;
- the Secret cert-manager issued for one of our Certificates (`ownership.issued_for`: the
  managed-by label comes from the Certificate's secretTemplate, so our field manager is not
  on it) is deleted right after that Certificate, in the same pass, and only when that
  Certificate is deleted: while the Certificate is rendered its Secret stays (the webhook
  serves from `external-secrets-webhook-cm`), and a Secret no Certificate of ours names is
  never ours.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable

from manager.apply.cache import ObjectCache
from manager.apply.convergence import applied_by
from manager.apply.discovery import Discovery, Resource
from manager.apply.ownership import issued_for
from manager.apply.results import Action, ObjectError, ObjectRef, ObjectResult
from manager.client.kube import PARTIAL_METADATA, PARTIAL_METADATA_LIST, ApiError, JsonObject, Kube
from manager.names import FIELD_MANAGER, MANAGED_BY_LABEL, OPERATOR_NAME
from manager.render.state import kind_rank

logger = logging.getLogger(__name__)

MANAGED_SELECTOR = f"{MANAGED_BY_LABEL}={OPERATOR_NAME}"
NEVER_PRUNED_KINDS = frozenset({"Namespace", "CustomResourceDefinition"})


def owned_by_us(obj: JsonObject, field_manager: str = FIELD_MANAGER) -> bool:
    labels = obj.get("metadata", {}).get("labels") or {}
    ours = labels.get(MANAGED_BY_LABEL) == OPERATOR_NAME
    return ours and applied_by(obj, field_manager) is not None


class Pruner:
    def __init__(self, kube: Kube, discovery: Discovery, cache: ObjectCache,
                 field_manager: str = FIELD_MANAGER):
        self.kube = kube
        self.discovery = discovery
        self.cache = cache
        self.field_manager = field_manager

    async def find_unwanted(self, kinds: Iterable[tuple[str, str]],
                            keep: Collection[ObjectRef]) -> list[tuple[Resource, JsonObject]]:
        """Our objects of `kinds`, in any namespace, that are not in `keep`, in deletion
        order."""
        wanted = {ref.identity() for ref in keep}
        found: list[tuple[Resource, JsonObject]] = []
        for api_version, kind in sorted(set(kinds), key=lambda k: -kind_rank(k[1])):
            if kind in NEVER_PRUNED_KINDS:
                continue
            resource = await self.discovery.resolve(api_version, kind)
            if resource is None:  # the API is not served, so none can exist
                continue
            for item in await self._ours(resource, api_version, kind):
                if ObjectRef.of(item).identity() not in wanted and owned_by_us(
                        item, self.field_manager):
                    found.append((resource, item))
        certificates = [(r, item) for r, item in found if r.kind == "Certificate"]
        listed = {ObjectRef.of(item).identity() for _, item in found}
        for resource, certificate in certificates:
            issued = await self._issued_secret(resource, certificate)
            if issued is not None and ObjectRef.of(issued[1]).identity() not in (
                    wanted | listed):
                found.append(issued)
        return sorted(found, key=lambda pair: -kind_rank(pair[0].kind))  # stable

    async def _issued_secret(self, resource: Resource, certificate: JsonObject,
                             ) -> tuple[Resource, JsonObject] | None:
        """The Secret cert-manager issued for `certificate` (ours, no longer rendered), if
        it exists and is that Certificate's (`ownership.issued_for`). The Certificate is
        read whole (the listing has its metadata only), the Secret's metadata only."""
        ref = ObjectRef.of(certificate)
        try:
            whole = await self.kube.get(resource.object_path(ref.name, ref.namespace))
            name = ((whole or {}).get("spec") or {}).get("secretName")
            secrets = await self.discovery.require("v1", "Secret")
            secret = (await self.kube.get(secrets.object_path(name, ref.namespace),
                                          accept=PARTIAL_METADATA) if name else None)
        except ApiError as error:
            raise ObjectError(ref, "get", error) from error
        if whole is None or secret is None or not issued_for(secret, whole):
            return None
        secret.update(apiVersion="v1", kind="Secret")  # not PartialObjectMetadata
        return secrets, secret

    async def _ours(self, resource: Resource, api_version: str, kind: str) -> list[JsonObject]:
        """Our objects of one kind: from the cache once its watch listed them, else listed
        by the managed-by label."""
        cached = self.cache.objects((api_version.rpartition("/")[0], kind))
        if cached is not None:
            return cached
        try:
            listing = await self.kube.list(resource.collection_path(),
                                           label_selector=MANAGED_SELECTOR,
                                           accept=PARTIAL_METADATA_LIST)
        except ApiError as error:
            raise ObjectError(ObjectRef(api_version, kind, "", "*"), "list", error) from error
        items = listing.get("items") or []
        for item in items:
            item.update(apiVersion=api_version, kind=kind)  # not PartialObjectMetadata
        return list(items)

    async def delete(self, resource: Resource, obj: JsonObject) -> ObjectResult:
        ref = ObjectRef.of(obj)
        path = resource.object_path(ref.name, ref.namespace or None)
        try:
            await self.kube.delete(path, uid=obj["metadata"].get("uid"))
        except ApiError as error:
            raise ObjectError(ref, "delete", error) from error
        self.cache.remove((ref.group, ref.kind), obj)  # before the watch event says so
        logger.info("action=delete result=deleted kind=%s name=%s", ref.kind, ref.where)
        return ObjectResult(ref, Action.DELETED)
