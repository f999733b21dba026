"""The API models' field descriptions: the docstring under each field, read from the source.

Only the generators need them (the CRDs' descriptions, docs/api.md). pydantic could attach
them to every field at class creation (`use_attribute_docstrings`), but it then reads and
parses the source of each class, which cost the operator about a tenth of a second of CPU at
every start for text it never uses. Read here, the same rule applies: a string literal right
after a field's annotation, in the body of the class that declares the field.
"""

from __future__ import annotations

import ast
import functools
import inspect
import sys

from pydantic import BaseModel


def field_description(model: type[BaseModel], attr: str) -> str | None:
    """The description of field `attr` of `model`: its `Field(description=...)`, else the
    docstring in the class that declares the field (a subclass that declares it again
    without a docstring has none)."""
    explicit = model.model_fields[attr].description
    if explicit is not None:
        return explicit
    for cls in model.__mro__:
        if attr in inspect.get_annotations(cls):
            return _module_docstrings(cls.__module__).get(cls.__qualname__, {}).get(attr)
    return None


@functools.cache
def _module_docstrings(module: str) -> dict[str, dict[str, str]]:
    """Class name -> field -> docstring, for the top-level classes of a module."""
    tree = ast.parse(inspect.getsource(sys.modules[module]))
    return {node.name: _class_docstrings(node) for node in tree.body
            if isinstance(node, ast.ClassDef)}


def _class_docstrings(node: ast.ClassDef) -> dict[str, str]:
    docs: dict[str, str] = {}
    for statement, following in zip(node.body, node.body[1:], strict=False):
        if (isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)):
            docs[statement.target.id] = inspect.cleandoc(following.value.value)
    return docs
