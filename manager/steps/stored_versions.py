"""Operand CRD versions that still hold stored objects but are no longer served.

A CRD's `status.storedVersions` lists every version objects may still be stored in. When the
installed CRD no longer serves one of them (`served: false`), the next release may drop it
altogether, which the API server refuses while it is stored (and OLM fails that upgrade): the
objects must first be rewritten in the storage version. The upgrade gate reports such
versions (manager/sidetasks/upgrade_gate.py).

The operand CRDs are large (SecretStore's schema alone is about 600 KB), so each is read
whole only when its resourceVersion moved since it was last read; a pass lists their
metadata only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from manager.client.kube import PARTIAL_METADATA_LIST, JsonObject, Kube
from manager.names import CRD_COLLECTION, OPERAND_CRD_LABEL, is_operand_crd


@dataclass(frozen=True)
class Unserved:
    crd: str
    versions: tuple[str, ...]


def unserved_versions(crd: JsonObject) -> tuple[str, ...]:
    """The stored versions of `crd` that it does not serve."""
    served = {v.get("name") for v in (crd.get("spec") or {}).get("versions") or []
              if v.get("served")}
    stored = (crd.get("status") or {}).get("storedVersions") or []
    return tuple(version for version in stored if version not in served)


class StoredVersions:
    def __init__(self, kube: Kube):
        self._kube = kube
        self._seen: dict[str, tuple[str, tuple[str, ...]]] = {}  # name -> (rv, unserved)

    async def unserved(self, listed: Mapping[str, str] | None = None) -> list[Unserved]:
        """The operand CRDs' unserved stored versions; `listed`: their names and
        resourceVersions as this pass already listed them (the CRD annotator), else they are
        listed here."""
        current = dict(listed) if listed is not None else await self._listed()
        for name in set(self._seen) - set(current):
            del self._seen[name]
        for name, version in sorted(current.items()):
            if self._seen.get(name, ("", ()))[0] != version:
                crd = await self._kube.get(f"{CRD_COLLECTION}/{name}")
                if crd is not None:  # deleted meanwhile: the next listing drops it
                    self._seen[name] = (version, unserved_versions(crd))
        return [Unserved(name, versions) for name, (_, versions) in sorted(self._seen.items())
                if versions]

    async def _listed(self) -> dict[str, str]:
        listing = await self._kube.list(CRD_COLLECTION, label_selector=OPERAND_CRD_LABEL,
                                        accept=PARTIAL_METADATA_LIST)
        return {item["metadata"]["name"]: str(item["metadata"].get("resourceVersion"))
                for item in listing.get("items") or []
                if is_operand_crd(item["metadata"]["name"])}
