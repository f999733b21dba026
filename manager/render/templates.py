"""Loading and rendering the operand templates (`manifests/operand/<component>/*.yaml.j2`).

Where the templates live: the repository keeps them in `manifests/operand/`, and the package
reaches the same directory as the resource `manager/render/operand` (a symbolic link into
`manifests/operand`, which setuptools copies as plain files into wheels, so the operator
image carries them; pyproject.toml lists them as package data). Reading through
`importlib.resources` works the same from a checkout, an editable install and a wheel.

Rules every template follows (enforced here, not by convention):

- a template renders exactly one object with apiVersion, kind and metadata.name;
- `{{ }}` may only print the output of the `tojson` filter; anything else is an error, so
  no value can reach the YAML unserialised (see `manager.render.serialize`);
- undefined names are errors (StrictUndefined);
- a key whose value renders as null is left out of the object (`nodeSelector: null`,
  an `env:` list with no items), so a template can state a field that is only sometimes set.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from collections.abc import Callable, Iterator, Mapping
from importlib.resources.abc import Traversable
from typing import Any

import jinja2
import yaml

from manager.render.serialize import Serialized, tojson

TEMPLATE_SUFFIX = ".yaml.j2"
_HEADER = re.compile(r"^apiVersion: (?P<api_version>\S+)\nkind: (?P<kind>\S+)$", re.MULTILINE)
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class TemplateError(RuntimeError):
    """A template broke one of the rules above (a bug in the template, not in the spec)."""


def template_root() -> Traversable:
    return importlib.resources.files("manager.render").joinpath("operand")


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


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=_ResourceLoader(template_root()),
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


def _walk(directory: Traversable, prefix: str) -> Iterator[str]:
    for entry in sorted(directory.iterdir(), key=lambda item: item.name):
        if entry.is_dir():
            yield from _walk(entry, f"{prefix}{entry.name}/")
        elif entry.name.endswith(TEMPLATE_SUFFIX):
            yield f"{prefix}{entry.name}"


@functools.cache
def component_templates(component: str) -> tuple[str, ...]:
    """The template names of one component, in file-name order."""
    directory = template_root().joinpath(component)
    if not directory.is_dir():
        raise TemplateError(f"no template directory for component {component!r}")
    return tuple(_walk(directory, f"{component}/"))


@functools.cache
def template_kinds() -> frozenset[tuple[str, str]]:
    """(apiVersion, kind) of every template, read from its static header lines."""
    kinds = set()
    for name in _walk(template_root(), ""):
        text = template_root().joinpath(*name.split("/")).read_text(encoding="utf-8")
        header = _HEADER.search(text)
        if header is None:
            raise TemplateError(f"{name} does not start with static apiVersion and kind lines")
        kinds.add((header["api_version"], header["kind"]))
    return frozenset(kinds)


def _without_nulls(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _without_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_without_nulls(item) for item in value]
    return value


def render_template(name: str, context: Mapping[str, Any]) -> dict[str, Any]:
    """Render one template into its object."""
    text = environment().get_template(name).render(context)
    documents = [document for document in yaml.load_all(text, Loader=_Loader)
                 if document is not None]
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise TemplateError(f"{name} rendered {len(documents)} documents instead of one object")
    obj: dict[str, Any] = _without_nulls(documents[0])
    if not (obj.get("apiVersion") and obj.get("kind") and obj.get("metadata", {}).get("name")):
        raise TemplateError(f"{name} rendered an object without apiVersion, kind or name")
    return obj
