"""A pinned release tree of an upstream project, read straight from its tarball.

The tarballs are in UPSTREAM_SRC (default `../shared/upstream-src`, as hack/build-tool.sh
reads them), each checked against its digest in hack/upstream-sources.txt, so a test reads
exactly the release the operator ships or moves to.
"""

from __future__ import annotations

import hashlib
import os
import tarfile
from pathlib import Path

from manager.paths import REPO_ROOT

UPSTREAM_SRC = Path(os.environ.get("UPSTREAM_SRC", REPO_ROOT.parent / "shared" / "upstream-src"))


class UpstreamTree:
    """The release `version` of `project` (a name of hack/upstream-sources.txt)."""

    def __init__(self, version: str, project: str = "external-secrets"):
        archive = UPSTREAM_SRC / f"{project}-{version}.tar.gz"
        assert archive.exists(), f"{archive} is not here: set UPSTREAM_SRC"
        pins = [line.split() for line in
                (REPO_ROOT / "hack" / "upstream-sources.txt").read_text().splitlines()
                if line and not line.startswith("#")]
        [digest] = [pin[2] for pin in pins if pin[:2] == [project, version]]
        assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest, archive
        self.archive, self.prefix = archive, f"{project}-{version}/"
        with tarfile.open(archive) as tar:
            self.names = frozenset(tar.getnames())

    def has(self, path: str) -> bool:
        return f"{self.prefix}{path}" in self.names

    def read(self, path: str) -> str:
        with tarfile.open(self.archive) as tar:
            member = tar.extractfile(f"{self.prefix}{path}")
            assert member is not None, path
            return member.read().decode()
