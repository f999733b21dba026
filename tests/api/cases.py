"""Loads the data-driven API validation suites (`tests/api/*.yaml`).

A suite file:

    kind: ExternalSecretsConfig            # the CRD under test
    tests:
      onCreate:
      - name: what the case shows
        resourceName: cluster              # optional, default 'cluster'
        initial: {spec: {...}}             # the object without apiVersion/kind/metadata
        expected: {spec: {...}}            # the object as stored, defaults included
        # or
        expectedError: "spec.x: Invalid value: ...: message"   # substring of the server's error,
                                                               # starting with the field path
      onUpdate:
      - name: ...
        initial: {spec: {...}}             # created for real first (must be accepted)
        updated: {spec: {...}}             # then sent as an update of that object
        expected: {...}  or  expectedError: "..."

`expected` is compared with the whole stored object minus apiVersion, kind and metadata, so
an unexpected default or a pruned field fails the case. `expectedError` starts with the field
path the server names (`spec.a.b[0].c: `, `metadata.name: `, or `<nil>: ` for a rule on the
whole object), so a case cannot pass on the right message about the wrong field; the loader
refuses a case without one. Long strings are written with the
`!expand` tag: `!expand "{a*253}.example.com"` repeats `a` 253 times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SUITE_DIR = Path(__file__).resolve().parent
_REPEAT = re.compile(r"\{(?P<text>[^{}*]+)\*(?P<times>[0-9]+)\}")
# A field path as the API server prints it in front of a field error: `spec.a.b[0].c[key]`,
# or `<nil>` for the object itself (a rule on the root without a fieldPath).
FIELD_PATH = re.compile(
    r"(?P<path><nil>|(?:metadata|spec|status)(?:\.[^.\[\]:\s]+|\[[^\]]+\])*): ")
# The kinds the suites may test, with their resource plurals.
PLURALS = {
    "ExternalSecretsConfig": "externalsecretsconfigs",
    "ExternalSecretsManager": "externalsecretsmanagers",
}


def expand(template: str) -> str:
    """`{TEXT*N}` -> TEXT repeated N times."""
    return _REPEAT.sub(lambda m: m["text"] * int(m["times"]), template)


class _SuiteLoader(yaml.SafeLoader):
    """SafeLoader plus the `!expand` tag."""


_SuiteLoader.add_constructor(
    "!expand", lambda loader, node: expand(loader.construct_scalar(node))  # type: ignore[arg-type]
)


@dataclass(frozen=True)
class Case:
    suite: str
    kind: str
    operation: str  # "onCreate" | "onUpdate"
    name: str
    resource_name: str
    initial: dict[str, Any]
    updated: dict[str, Any] | None
    expected: dict[str, Any] | None
    expected_error: str | None

    @property
    def plural(self) -> str:
        return PLURALS[self.kind]

    @property
    def id(self) -> str:
        return f"{self.kind}/{self.operation}/{self.name}"

    def manifest(self, body: dict[str, Any]) -> dict[str, Any]:
        return {"apiVersion": "operator.openshift.io/v1alpha1", "kind": self.kind,
                "metadata": {"name": self.resource_name}, **body}


_KNOWN_KEYS = {"name", "resourceName", "initial", "updated", "expected", "expectedError"}


def _case(suite: str, kind: str, operation: str, raw: dict[str, Any]) -> Case:
    unknown = set(raw) - _KNOWN_KEYS
    if unknown:
        raise ValueError(f"{suite}: case {raw.get('name')!r} has unknown keys {sorted(unknown)}")
    if ("expected" in raw) == ("expectedError" in raw):
        raise ValueError(f"{suite}: case {raw['name']!r} needs exactly one of "
                         "expected/expectedError")
    if (operation == "onUpdate") != ("updated" in raw):
        raise ValueError(f"{suite}: case {raw['name']!r}: 'updated' belongs to onUpdate cases")
    if "expectedError" in raw and error_path(raw["expectedError"]) is None:
        raise ValueError(f"{suite}: case {raw['name']!r}: expectedError must start with the "
                         f"field path the server names, such as 'spec.x: ' or '<nil>: '; "
                         f"got {raw['expectedError']!r}")
    return Case(
        suite=suite, kind=kind, operation=operation, name=raw["name"],
        resource_name=raw.get("resourceName", "cluster"),
        initial=raw.get("initial") or {}, updated=raw.get("updated"),
        expected=raw.get("expected"), expected_error=raw.get("expectedError"),
    )


def error_path(expected_error: str) -> str | None:
    """The field path an expected error starts with, None when it starts with none."""
    match = FIELD_PATH.match(expected_error)
    return match["path"] if match else None


def load_cases(directory: Path = SUITE_DIR) -> list[Case]:
    cases: list[Case] = []
    for path in sorted(directory.glob("*.yaml")):
        document = yaml.load(path.read_text(), Loader=_SuiteLoader)  # noqa: S506 (SafeLoader)
        kind = document["kind"]
        if kind not in PLURALS:
            raise ValueError(f"{path.name}: unknown kind {kind!r}")
        for operation in ("onCreate", "onUpdate"):
            for raw in document.get("tests", {}).get(operation, []):
                cases.append(_case(path.name, kind, operation, raw))
    ids = [c.id for c in cases]
    duplicates = {i for i in ids if ids.count(i) > 1}
    if duplicates:
        raise ValueError(f"duplicate case names: {sorted(duplicates)}")
    return cases


def stored_body(obj: dict[str, Any]) -> dict[str, Any]:
    """What `expected` describes: the stored object without apiVersion, kind and metadata."""
    return {k: v for k, v in obj.items() if k not in ("apiVersion", "kind", "metadata")}
