"""Schema markers the pydantic models carry for the CRD generator.

They play the role of the Go `+kubebuilder:` comments: each model field can carry a
`Schema(...)` in its `Annotated[...]` metadata, and each model class can list its own
`Rule`s in `__cel_rules__`. Pydantic ignores objects it does not know in `Annotated`
metadata, so the markers cost nothing at parse time; `manager.api.crd` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal


@dataclass(frozen=True)
class Rule:
    """One `x-kubernetes-validations` entry: a CEL expression and the message it reports.

    `reason` and `field_path` are optional and passed through as `reason`/`fieldPath`.
    `origin` says where the rule comes from ("seed", "seed+guard" when a has() guard was
    added, or "added"); `note` explains guards and additions. Both only feed docs/api.md.
    """

    rule: str
    message: str
    reason: str | None = None
    field_path: str | None = None
    origin: str = "seed"
    note: str | None = None
    message_expression: str | None = None
    """A CEL expression the API server reports instead of `message` when it evaluates
    (naming the offending value); `message` stays the fallback."""
    run_time: str = ""
    """Where the operator refuses the same when it reads a stored object (`render`, objects
    stored before the rule): the functions, as `module.function` separated by commas; or
    "admission only: " and why that is safe. A transition rule (oldSelf) needs neither:
    only admission sees the old object. tests/unit/api/test_rule_policy.py holds every rule to
    it."""

    def to_schema(self) -> dict[str, str]:
        entry = {"rule": self.rule, "message": self.message}
        if self.message_expression is not None:
            entry["messageExpression"] = self.message_expression
        if self.reason is not None:
            entry["reason"] = self.reason
        if self.field_path is not None:
            entry["fieldPath"] = self.field_path
        return entry


@dataclass(frozen=True)
class Schema:
    """Per-field CRD extras that pydantic has no vocabulary for.

    core_type:     name of a core/v1 schema from the committed snapshot
                   (`ResourceRequirements`, `Affinity`, `Toleration`); the field's (or, for
                   lists, each item's) schema is taken from it instead of from Python types.
    rules:         CEL rules attached to the field's schema.
    list_type / list_map_keys / map_type: the `x-kubernetes-*` topology markers.
    required:      keep the field in `required` even though the model gives it a default
                   (the seed marks `certManagerConfig.enabled` both Required and defaulted).
    fmt:           OpenAPI `format` (int32, int64, date-time).
    """

    core_type: str | None = None
    rules: tuple[Rule, ...] = ()
    list_type: Literal["atomic", "set", "map"] | None = None
    list_map_keys: tuple[str, ...] = ()
    map_type: Literal["atomic", "granular"] | None = None
    required: bool = False
    fmt: str | None = None
    extra: dict[str, object] = field(default_factory=dict)
