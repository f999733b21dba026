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
from collections.abc import Iterator, Mapping
from importlib.resources.abc import Traversable
from typing import TYPE_CHECKING, Any

import yaml

from manager.render.serialize import TemplateError

if TYPE_CHECKING:
    import jinja2

TEMPLATE_SUFFIX = ".yaml.j2"
_HEADER = re.compile(r"^apiVersion: (?P<api_version>\S+)\nkind: (?P<kind>\S+)$", re.MULTILINE)
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def template_root() -> Traversable:
    return importlib.resources.files("manager.render").joinpath("operand")


@functools.cache
def environment() -> jinja2.Environment:
    # jinja2 loads with the first template rendered, not at start-up: a pass with no
    # ExternalSecretsConfig renders none.
    from manager.render.engine import new_environment  # noqa: PLC0415

    return new_environment(template_root())


def warm_up() -> tuple[str, ...]:
    """Load jinja2 and compile every template, as the first render would (about 0.2 s of
    CPU, most of an install's pass): the runtime calls it once its first pass is over, so
    that an ExternalSecretsConfig created later does not wait for it. The names compiled."""
    env = environment()
    names = tuple(_walk(template_root(), ""))
    for name in names:
        env.get_template(name)
    return names


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
