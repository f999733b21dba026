"""The jinja2 side of `manager.render.templates`: the environment its rules are enforced in.

A module of its own so that jinja2 is imported when the first template renders, not when
the operator starts (templates.environment() imports it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib.resources.abc import Traversable
from typing import Any

import jinja2

from manager.render.serialize import Serialized, TemplateError, tojson


class _ResourceLoader(jinja2.BaseLoader):
    """Templates from a Traversable, so they load from a directory or a zipped package."""

    def __init__(self, root: Traversable) -> None:
        self._root = root

    def get_source(self, environment: jinja2.Environment,  # noqa: ARG002  # jinja's signature
                   template: str) -> tuple[str, str | None, Callable[[], bool] | None]:
        path = self._root.joinpath(*template.split("/"))
        if not path.is_file():
            raise jinja2.TemplateNotFound(template)
        return path.read_text(encoding="utf-8"), None, lambda: True


def _only_serialized(value: object) -> object:
    if not isinstance(value, Serialized):
        raise TemplateError(f"a template printed {value!r} without `| tojson`; every value "
                            "must go through the tojson filter")
    return value


def _tojson(value: Any) -> Serialized:
    if isinstance(value, jinja2.Undefined):
        str(value)  # StrictUndefined raises UndefinedError naming the missing value
    return tojson(value)


def _merged(labels: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """`labels` with `extra` over them (object-specific labels such as RBAC aggregation)."""
    return {**labels, **extra}


def new_environment(root: Traversable) -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_ResourceLoader(root),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # noqa: S701  # YAML, not HTML: values go through tojson instead
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        finalize=_only_serialized,
    )
    env.filters["tojson"] = _tojson
    env.filters["merged"] = _merged
    return env
