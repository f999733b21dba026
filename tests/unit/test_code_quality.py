"""The project's own checks run with the tests, so CI enforces them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from manager.paths import REPO_ROOT as ROOT

BIN = Path(sys.executable).parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, check=False)


def lint_paths() -> list[str]:
    """The folders `make lint` checks with ruff; the test below checks the same ones."""
    found = re.search(r"^\t\$\(VENV\)/bin/ruff check (.+)$", (ROOT / "Makefile").read_text(),
                      re.MULTILINE)
    assert found, "no `ruff check` in the Makefile's lint target"
    return found.group(1).split()


def test_ruff_covers_every_folder_with_python() -> None:
    """No tracked Python file escapes ruff (devcluster/ once did)."""
    tracked = run("git", "ls-files", "*.py").stdout.split()
    if not tracked:  # not a git checkout (an sdist): the folders are all that is known
        tracked = [str(path.relative_to(ROOT)) for path in ROOT.glob("*/**/*.py")
                   if not path.relative_to(ROOT).parts[0].startswith(".")]
    folders = {Path(path).parts[0] for path in tracked if len(Path(path).parts) > 1}
    assert folders, "found no Python files"
    assert folders <= set(lint_paths()), sorted(folders - set(lint_paths()))


def test_ruff_finds_nothing() -> None:
    result = run(str(BIN / "ruff"), "check", *lint_paths())
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_strict_finds_nothing() -> None:
    result = run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr
