"""What to watch: a kind, where, and which changes count. The steps of a pass name what they
depend on with it; the runtime's watches (manager/runtime/watches.py) follow it."""

from __future__ import annotations

from dataclasses import dataclass

from manager.client.kube import PARTIAL_METADATA


@dataclass(frozen=True, order=True)
class WatchSpec:
    """What to watch: one kind, optionally one namespace, narrowed by selectors."""

    api_version: str
    kind: str
    namespace: str | None = None
    label_selector: str | None = None
    field_selector: str | None = None
    any_change: bool = False
    """Also status-only changes count (a CRD becoming Established)."""
    with_status: bool = False
    """Whole objects: changes of readiness in their status count (see readiness_digest)."""
    cached: bool = False
    """The objects also feed the ObjectCache (the operator's own, label-selected ones)."""
    whole: bool = False
    """Whole objects, although only metadata changes count (the ESC and the ESM, which the
    passes read from the cache: their status is the operator's own writing)."""
    spec_field: str | None = None
    """Only this field of `spec` counts (whole objects; neither metadata nor status)."""
    spec_keys: str | None = None
    """Only the names of this field's keys count, and only they are kept: whole objects are
    read, the cache holds their names and those keys (a store's `spec.provider`, whose
    values are none of the operator's business)."""

    @property
    def accept(self) -> str:
        """What the list and the watch ask for: whole objects or their metadata."""
        whole = (self.with_status or self.whole or self.spec_field is not None
                 or self.spec_keys is not None)
        return "application/json" if whole else PARTIAL_METADATA

    @property
    def group_kind(self) -> tuple[str, str]:
        return self.api_version.rpartition("/")[0], self.kind

    def __str__(self) -> str:
        where = f" in {self.namespace}" if self.namespace else ""
        selector = ",".join(s for s in (self.label_selector, self.field_selector) if s)
        return f"{self.kind}{where} [{selector}]"
