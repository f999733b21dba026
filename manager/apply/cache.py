"""The operator's own objects, as its watches last saw them.

The child watches (manager.runtime.watches) select by the operator's managed-by label, so
this holds only the operator's objects: a few dozen, however large the cluster. Most are kept
as metadata (annotations and managedFields are all `is_converged` needs); the kinds whose
status decides Ready (Deployments, Certificates, webhook configurations) whole.

With it, a pass decides "nothing to write" without a GET per object, a repair reads only the
object that changed, and pruning needs no LIST. A kind counts only once its watch has listed
it (`synced`); for anything else callers ask the server, as before. A name the cache does not
hold is not proof of absence: an object of that name without the operator's label (someone
else's) is invisible to the watch, so the caller still reads it before a first apply.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from manager.apply.results import ObjectRef
from manager.client.kube import JsonObject

GroupKind = tuple[str, str]
Key = tuple[str, str]  # namespace ("" for cluster-scoped), name


def _newer(candidate: JsonObject, current: JsonObject | None) -> bool:
    """Keep the newest version: a watch event may trail the answer of our own apply.
    resourceVersions are opaque, but the API server's are etcd revisions (integers)."""
    if current is None:
        return True
    new = candidate.get("metadata", {}).get("resourceVersion", "")
    old = current.get("metadata", {}).get("resourceVersion", "")
    if new.isdigit() and old.isdigit():
        return int(new) >= int(old)
    return True


@dataclass
class ObjectCache:
    _objects: dict[GroupKind, dict[Key, JsonObject]] = field(default_factory=dict)
    _synced: set[GroupKind] = field(default_factory=set)

    @staticmethod
    def _key(obj: JsonObject) -> Key:
        metadata = obj.get("metadata", {})
        return metadata.get("namespace") or "", metadata["name"]

    def replace(self, kind: GroupKind, items: Iterable[JsonObject]) -> None:
        """Everything a watch's LIST returned: the kind is synced from now on."""
        self._objects[kind] = {self._key(item): item for item in items}
        self._synced.add(kind)

    def put(self, kind: GroupKind, obj: JsonObject) -> None:
        objects = self._objects.setdefault(kind, {})
        key = self._key(obj)
        if _newer(obj, objects.get(key)):
            objects[key] = obj

    def remove(self, kind: GroupKind, obj: JsonObject) -> None:
        self._objects.get(kind, {}).pop(self._key(obj), None)

    def forget(self, kind: GroupKind) -> None:
        """The watch stopped (or broke): the kind is no longer known."""
        self._synced.discard(kind)
        self._objects.pop(kind, None)

    def synced(self, kind: GroupKind) -> bool:
        return kind in self._synced

    def get(self, ref: ObjectRef) -> JsonObject | None:
        """The cached object (None when the cache does not hold it, or the kind is not
        synced: see `synced`)."""
        return self._objects.get((ref.group, ref.kind), {}).get((ref.namespace, ref.name))

    def objects(self, kind: GroupKind) -> list[JsonObject] | None:
        """Every cached object of `kind`, or None when the kind is not synced."""
        if kind not in self._synced:
            return None
        return list(self._objects.get(kind, {}).values())
