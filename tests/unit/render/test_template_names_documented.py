"""manifests/operand/README.md lists every name the templates read: a template change that
reads a new value of the context must say what it is there."""

from __future__ import annotations

import re
from pathlib import Path

from jinja2 import meta, nodes

from manager.paths import REPO_ROOT
from manager.render.templates import environment

OPERAND = REPO_ROOT / "manifests" / "operand"


def listed_names() -> set[str]:
    """The names of the README's table: `a.b`, and `.c` after it meaning `a.c`."""
    readme = (OPERAND / "README.md").read_text()
    table = readme[readme.index("| Name | Value |"):readme.index("Filters:")]
    listed: set[str] = set()
    for cell in re.findall(r"^\| ([^|]+) \|", table, re.MULTILINE):
        root = ""
        for written in re.findall(r"`([^`]+)`", cell):
            name = f"{root}{written}" if written.startswith(".") else written
            listed.add(name)
            root = name.split(".")[0]
    return listed


def read_names(template: Path) -> set[str]:
    """The context names a template reads: `root` and `root.attribute` (loop variables and
    names the template assigns itself aside)."""
    env = environment()
    tree = env.parse(template.read_text())
    own = {name.name for node in (*tree.find_all(nodes.For), *tree.find_all(nodes.Assign))
           for name in node.target.find_all(nodes.Name)}
    roots = meta.find_undeclared_variables(tree)
    attributes = {f"{node.node.name}.{node.attr}" for node in tree.find_all(nodes.Getattr)
                  if isinstance(node.node, nodes.Name) and node.node.name in roots - own}
    plain = {root for root in roots
             if not any(name.startswith(f"{root}.") for name in attributes)}
    return plain | attributes


def test_the_readme_lists_every_name_the_templates_read() -> None:
    templates = sorted(OPERAND.rglob("*.yaml.j2"))
    assert len(templates) > 20
    listed = listed_names()
    unlisted = {name: template.relative_to(OPERAND).as_posix()
                for template in templates for name in sorted(read_names(template))
                if name not in listed}
    assert not unlisted, f"used by templates but not in manifests/operand/README.md: {unlisted}"


def test_the_check_sees_a_name_it_was_not_told_of(tmp_path: Path) -> None:
    template = tmp_path / "x.yaml.j2"
    template.write_text("apiVersion: v1\nkind: ConfigMap\ndata: {{ brand_new.value | tojson }}\n"
                        "{% for item in pod.tolerations %}{{ item.key | tojson }}{% endfor %}\n")
    assert read_names(template) == {"brand_new.value", "pod.tolerations"}
    assert "brand_new.value" not in listed_names()
