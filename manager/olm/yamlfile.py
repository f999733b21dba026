"""Deterministic YAML for generated files: block style, keys in insertion order."""

from __future__ import annotations

from typing import Any

import yaml


class _Dumper(yaml.SafeDumper):
    """SafeDumper that indents lists under their key and keeps multi-line text readable."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        del indentless  # always indent block sequences, as kubectl does
        super().increase_indent(flow, False)


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _represent_str)


def dump(document: Any, header: str = "") -> str:
    """One YAML document, preceded by `header` comment lines (if any)."""
    body = yaml.dump(document, Dumper=_Dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)
    return _comment(header) + body


def dump_all(documents: list[Any], header: str = "") -> str:
    """Several documents in one file, separated by `---`."""
    return _comment(header) + "---\n".join(dump(document) for document in documents)


def dump_large(document: Any, header: str = "") -> str:
    """Like `dump`, through libyaml when present: for megabyte CRDs nobody reads in a diff."""
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    body = yaml.dump(document, Dumper=dumper, sort_keys=False, default_flow_style=False,
                     allow_unicode=True, width=100)
    return _comment(header) + body


# libyaml when present: the operand CRDs are megabytes of YAML.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load(text: str) -> Any:
    return yaml.load(text, Loader=_Loader)  # noqa: S506 (a safe loader)


def load_all(text: str) -> list[Any]:
    return [document for document in yaml.load_all(text, Loader=_Loader)
            if document is not None]


def _comment(header: str) -> str:
    return "".join(f"# {line}\n".replace("# \n", "#\n") for line in header.splitlines())
