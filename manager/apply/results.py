"""What the apply and prune steps did, object by object, for status, events and logs."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from manager.client.kube import ApiError, JsonObject
from manager.errors import PassError


@dataclass(frozen=True, order=True)
class ObjectRef:
    """One object: its kind and where it lives (namespace is "" when cluster-scoped)."""

    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: JsonObject) -> ObjectRef:
        metadata = obj.get("metadata", {})
        return cls(obj["apiVersion"], obj["kind"], metadata.get("namespace") or "",
                   metadata["name"])

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    def identity(self) -> tuple[str, str, str, str]:
        """Group, kind, namespace and name: the same object whatever version is used."""
        return (self.group, self.kind, self.namespace, self.name)

    @property
    def where(self) -> str:
        """`namespace/name`, or `name` for a cluster-scoped object (as logs print it)."""
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def __str__(self) -> str:
        return f"{self.kind} {self.where}"


class Action(enum.StrEnum):
    CREATED = "created"
    UPDATED = "updated"
    ADOPTED = "adopted"  # applied for the first time over an object someone else created
    UNCHANGED = "unchanged"
    DELETED = "deleted"


@dataclass(frozen=True)
class ObjectResult:
    ref: ObjectRef
    action: Action
    note: str = ""
    """More about the action, for its Event (who managed an adopted object)."""
    live: JsonObject | None = None
    """The object as the server has it after the step (None once deleted)."""

    @property
    def wrote(self) -> bool:
        return self.action is not Action.UNCHANGED


class ObjectError(PassError):
    """An API request about one object failed."""

    def __init__(self, ref: ObjectRef, verb: str, error: ApiError):
        super().__init__(f"{verb} {ref}: {error.status} {error.reason}: {error.message}")
        self.ref = ref
        self.verb = verb
        self.error = error

    @property
    def transient(self) -> bool:
        return self.error.transient


class TerminatingObjectError(PassError):
    """The object is being deleted; it can be applied again once it is gone."""

    def __init__(self, ref: ObjectRef):
        super().__init__(f"{ref} is being deleted; it will be re-created once it is gone")
        self.ref = ref
