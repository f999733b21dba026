"""Every file the package reads at run time travels in the wheel: a data file under manager/
that pyproject.toml's package-data does not name is missing from the installed package (the
image), while every test that runs from the source tree still passes."""

from __future__ import annotations

import glob
import os
import tomllib
from pathlib import Path

from manager.paths import REPO_ROOT

PACKAGE = REPO_ROOT / "manager"


def package_data_globs() -> list[str]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())
    globs: list[str] = project["tool"]["setuptools"]["package-data"]["manager"]
    return globs


def data_files() -> set[Path]:
    """Files under manager/ (the operand templates through their symlink) that are not code."""
    found = set()
    for directory, _, names in os.walk(PACKAGE, followlinks=True):
        if "__pycache__" in directory:
            continue
        found |= {Path(directory, name).relative_to(PACKAGE) for name in names
                  if not name.endswith((".py", ".pyc"))}
    return found


def packaged(globs: list[str]) -> set[Path]:
    """What the globs select, as setuptools expands them (recursive, through symlinks)."""
    return {Path(path).relative_to(PACKAGE) for pattern in globs
            for path in glob.glob(str(PACKAGE / pattern), recursive=True)}


def test_every_data_file_is_package_data() -> None:
    files = data_files()
    assert any(str(f).endswith(".yaml.j2") for f in files), "the templates were not found"
    # The operand templates' README documents them; nothing reads it at run time.
    missing = sorted(str(f) for f in files - packaged(package_data_globs())
                     if f.name != "README.md")
    assert missing == [], f"not in [tool.setuptools.package-data]: {missing}"
