"""The one way a value enters a template: `{{ value | tojson }}`.

JSON is YAML, so a value serialised as JSON lands in the rendered YAML as exactly one scalar,
list or map, whatever it contains: quotes, newlines, `{{ }}`, `: `, `---` or any Unicode.
The output is strict JSON that YAML 1.1 loaders (PyYAML, libyaml) read back unchanged:

- strings keep printable Unicode as is (a `\\uXXXX` escape of a character outside the Basic
  Multilingual Plane would reach PyYAML as two lone surrogates) and escape everything YAML
  must not see raw: control characters, DEL and C1 controls, and the characters YAML 1.1
  treats as line breaks (NEL, LINE SEPARATOR, PARAGRAPH SEPARATOR), the BOM and non-characters;
- floats always carry a decimal point, because YAML 1.1 reads `1e+20` as a string.

Templates cannot print anything else: `Serialized` marks the filter's output, and the
template environment refuses any other value in `{{ }}` (see `manager.render.templates`).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

# Characters JSON may leave raw but YAML 1.1 must not see raw (see the module docstring).
_YAML_UNSAFE = re.compile("[\u007f-\u009f\u2028\u2029\ufeff\ufffe\uffff]")
_SURROGATE = re.compile("[\ud800-\udfff]")


class TemplateError(RuntimeError):
    """A template broke one of the rules of manager.render.templates, this one's included (a
    bug in the template, not in the spec)."""


class Serialized(str):
    """Text produced by `tojson`: safe to place anywhere a YAML flow value may stand."""

    __slots__ = ()


def _escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def _string(value: str) -> str:
    if _SURROGATE.search(value):
        raise ValueError("strings with lone surrogates cannot be serialised")
    return _YAML_UNSAFE.sub(_escape, json.dumps(value, ensure_ascii=False))


def _number(value: float) -> str:
    if not math.isfinite(value):
        raise ValueError(f"{value} cannot be serialised")
    text = repr(value)
    if "e" in text and "." not in text:
        mantissa, exponent = text.split("e")
        text = f"{mantissa}.0e{exponent}"
    return text


def _serialise(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return json.dumps(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, Mapping):
        items = []
        for key, item in value.items():
            if not isinstance(key, str):
                raise TypeError(f"map keys must be strings, not {type(key).__name__}")
            items.append(f"{_string(key)}: {_serialise(item)}")
        return "{" + ", ".join(items) + "}"
    if isinstance(value, Sequence):
        return "[" + ", ".join(_serialise(item) for item in value) + "]"
    raise TypeError(f"cannot serialise {type(value).__name__}")


def tojson(value: Any) -> Serialized:
    """`value` as one JSON (and therefore YAML) flow value on a single line."""
    return Serialized(_serialise(value))
