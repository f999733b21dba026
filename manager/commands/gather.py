"""`gather [-o FILE.tar.gz | --dest-dir DIR]`: a support bundle of the operator and its
operand, with no secret value in it (manager/offline/gather.py says what it holds,
manager/offline/redact.py what it never shows). Nothing in the cluster is changed.

The operator image runs it as `/usr/bin/gather` (hack/gather), the must-gather convention:
`oc adm must-gather --image=<operator image>` collects `/must-gather`, with a `version` file
(product and version). Logs go back as far as `--since` (a duration: 2h, 1h30m0s) or
`--since-time` (an RFC 3339 time) say, or where neither is given, as far as the variables
MUST_GATHER_SINCE and MUST_GATHER_SINCE_TIME say (what `oc adm must-gather --since` and
`--since-time` set); otherwise every line the log API keeps.

Exit status: 0 when the bundle was written (parts that could not be read are listed in its
manifest.yaml, with the reason), 2 when there is no bundle (no credentials, the API server
unreachable, the destination not writable, a since value that does not parse).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import sys
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from manager.client.kube import ApiError, Kube
from manager.commands import add_kubeconfig, command
from manager.offline.gather import gather
from manager.offline.logwindow import (
    SINCE_TIME_VARIABLE,
    SINCE_VARIABLE,
    LogWindow,
    LogWindowError,
    from_environ,
    log_window,
)


def register(subparsers: Any) -> None:
    parser = command(subparsers, "gather", __doc__,
                     "write a support bundle without secret values (must-gather)")
    where = parser.add_mutually_exclusive_group()
    where.add_argument("-o", "--output", type=Path, default=None,
                       help="the archive to write (default: eso-gather-<time>.tar.gz)")
    where.add_argument("--dest-dir", type=Path, default=None,
                       help="write the files into this directory instead of an archive "
                            "(the image's gather writes to /must-gather)")
    parser.add_argument("--operator-namespace", default=None,
                        help="where the operator's Deployment runs (default: found by name)")
    since = parser.add_mutually_exclusive_group()
    since.add_argument("--since", default=None, metavar="DURATION",
                       help=f"only log lines newer than this (2h, 30m, 1h30m0s; default: "
                            f"${SINCE_VARIABLE})")
    since.add_argument("--since-time", default=None, metavar="TIME",
                       help=f"only log lines since this RFC 3339 time (2025-06-01T10:00:00Z; "
                            f"default: ${SINCE_TIME_VARIABLE})")
    add_kubeconfig(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        window = requested_window(args.since, args.since_time, os.environ)
    except LogWindowError as error:
        print(f"error: no bundle: {error}", file=sys.stderr)
        return 2
    try:
        files = asyncio.run(_collect(args.kubeconfig, args.operator_namespace, window))
    except ApiError as error:
        print(f"error: no bundle: the API server cannot be read: {error}", file=sys.stderr)
        return 2
    try:
        if args.dest_dir is not None:
            where = write_directory(files, args.dest_dir)
        else:
            where = write_archive(files, args.output or Path(
                time.strftime("eso-gather-%Y%m%dT%H%M%S.tar.gz")))
    except OSError as error:
        print(f"error: no bundle: {error}", file=sys.stderr)
        return 2
    print(f"wrote {len(files)} files to {where} (see manifest.yaml: what is in it, what "
          f"could not be collected)")
    return 0


def requested_window(since: str | None, since_time: str | None,
                     environ: Mapping[str, str]) -> LogWindow:
    """The flags' window when either is given, else the must-gather variables'."""
    if since is None and since_time is None:
        return from_environ(environ)
    return log_window(since, since_time, since_source="--since",
                      since_time_source="--since-time")


async def _collect(kubeconfig: str | None, operator_namespace: str | None,
                   window: LogWindow) -> dict[str, bytes]:
    kube = Kube.connect(kubeconfig)
    try:
        return await gather(kube, operator_namespace, window)
    finally:
        await kube.close()


def write_archive(files: dict[str, bytes], output: Path) -> Path:
    """A gzipped tar whose members sit under one directory named after the archive."""
    top = output.name.removesuffix(".gz").removesuffix(".tgz").removesuffix(".tar")
    with tarfile.open(output, "w:gz") as archive:
        for path, content in sorted(files.items()):
            member = tarfile.TarInfo(f"{top}/{path}")
            member.size, member.mtime, member.mode = len(content), int(time.time()), 0o644
            archive.addfile(member, io.BytesIO(content))
    return output


def write_directory(files: dict[str, bytes], directory: Path) -> Path:
    for path, content in files.items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    return directory
