"""Every file generated from the API models, by path relative to the repository root."""

from __future__ import annotations

from pathlib import Path

from manager.api import crd, docs


def generated_files() -> dict[Path, str]:
    files = crd.rendered()
    files[docs.DOCS_PATH] = docs.render()
    return files
