"""The import map of `manager/`: boxes, arrows, levels, cycles and upward arrows.

A box is a package (`manager/passes/`) or a top-level module (`manager/names.py`); an arrow is
an import from one box into another, counted once per pair (imports under `TYPE_CHECKING`
aside: they cost nothing at run time and cannot form a cycle there). A level is a box's
longest chain of arrows down to a box that imports nothing of ours. LAYERS below is the
order docs/architecture.md draws, lowest first; an arrow into a higher layer is upward.

    .venv/bin/python hack/import-map.py [--arrows]
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "manager"

# Lowest first. Boxes in one layer may import each other (without a cycle).
LAYERS: list[set[str]] = [
    {"paths", "versions", "names", "errors", "logs"},
    {"api", "kube_values", "tls_profile", "management", "metrics"},
    {"client"},
    {"config", "metrics_endpoint"},
    {"render", "apply", "olm"},
    {"steps"},
    {"reporting"},
    {"sidetasks"},
    {"runtime", "offline"},
    {"commands"},
    {"cli", "__main__"},
]

def box_of(module: str) -> str | None:
    """`manager.passes.observe` -> `passes`; `manager` itself is no box."""
    parts = module.split(".")
    if parts[0] != "manager" or len(parts) < 2:
        return None
    return parts[1]


def module_name(path: Path) -> str:
    relative = path.relative_to(ROOT).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported(tree: ast.Module, module: str, is_package: bool) -> set[str]:
    """The modules of ours that a module imports at run time."""
    found: set[str] = set()
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and is_type_checking(node):
            skipped.update(id(child) for child in ast.walk(node))
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[: len(base) - node.level + (1 if is_package else 0)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            # `from package import module` depends on the module (and its package, as
            # every import of a submodule does).
            found.update({target, *(f"{target}.{alias.name}" for alias in node.names)})
    return {name for name in found if name.startswith("manager.")}


def module_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours it imports (a `from package import name` counts as the
    package's module when `name` is no module of its own)."""
    modules = {module_name(path): path for path in PACKAGE.rglob("*.py")}
    arrows: dict[str, set[str]] = {}
    for module, path in sorted(modules.items()):
        tree = ast.parse(path.read_text(), str(path))
        # A submodule always runs its package's __init__: no arrow of its own.
        arrows[module] = {name for name in imported(tree, module, path.name == "__init__.py")
                          if name in modules and name != module
                          and not module.startswith(f"{name}.")}
    return arrows


def graph(modules: dict[str, set[str]]) -> dict[str, set[str]]:
    """The same arrows between boxes."""
    arrows: dict[str, set[str]] = defaultdict(set)
    for module, targets in modules.items():
        source = box_of(module)
        if source is None:
            continue
        arrows.setdefault(source, set())
        for target in filter(None, map(box_of, targets)):
            if target != source:
                arrows[source].add(target)
    return arrows


def cycles(arrows: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one box (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(box: str) -> None:
        index[box] = low[box] = len(index)
        stack.append(box)
        for target in arrows.get(box, ()):
            if target not in index:
                visit(target)
                low[box] = min(low[box], low[target])
            elif target in stack:
                low[box] = min(low[box], index[target])
        if low[box] == index[box]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == box:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for box in sorted(arrows):
        if box not in index:
            visit(box)
    return found


def levels(arrows: dict[str, set[str]]) -> dict[str, int]:
    memo: dict[str, int] = {}

    def level(box: str, seen: frozenset[str]) -> int:
        if box in memo:
            return memo[box]
        below = [level(target, seen | {box})
                 for target in arrows.get(box, ()) if target not in seen]
        memo[box] = 1 + max(below, default=0)
        return memo[box]

    for box in arrows:
        level(box, frozenset())
    return memo


def layer(box: str) -> int | None:
    return next((rank for rank, members in enumerate(LAYERS) if box in members), None)


def upward(arrows: dict[str, set[str]]) -> list[tuple[str, str]]:
    found = []
    for source, targets in sorted(arrows.items()):
        for target in sorted(targets):
            low, high = layer(source), layer(target)
            if low is not None and high is not None and high > low:
                found.append((source, target))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arrows", action="store_true", help="list every arrow")
    args = parser.parse_args()
    modules = module_graph()
    arrows = graph(modules)
    module_cycles = cycles(modules)
    print(f"modules {len(modules)}, arrows {sum(len(t) for t in modules.values())}, "
          f"cycles {len(module_cycles)}, largest {max(len(t) for t in modules.values())} imports")
    for component in module_cycles:
        print(f"module cycle: {' <-> '.join(component)}")
    unplaced = sorted(box for box in arrows if layer(box) is None)
    found_cycles, found_upward, box_levels = cycles(arrows), upward(arrows), levels(arrows)
    print(f"boxes {len(arrows)}, levels {max(box_levels.values())}, "
          f"arrows {sum(len(t) for t in arrows.values())}, cycles {len(found_cycles)}, "
          f"upward arrows {len(found_upward)}, boxes in no layer {len(unplaced)}")
    for box in sorted(arrows, key=lambda b: (box_levels[b], b)):
        suffix = f" -> {', '.join(sorted(arrows[box]))}" if args.arrows and arrows[box] else ""
        print(f"  level {box_levels[box]:2d}  {box}{suffix}")
    for component in found_cycles:
        print(f"cycle: {' <-> '.join(component)}")
    for source, target in found_upward:
        print(f"upward: {source} -> {target}")
    for box in unplaced:
        print(f"in no layer: {box}")
    return 1 if found_cycles or module_cycles or found_upward or unplaced else 0


if __name__ == "__main__":
    sys.exit(main())
