"""`generate`: write the generated API artefacts (CRDs, docs/api.md) from manager/api.

  python -m manager generate                        write manifests/crds/*.yaml and docs/api.md
  python -m manager generate --check                exit 1 when a committed file is stale
  python -m manager generate --refresh-core-schemas refresh manager/api/core_v1_schemas.json
                                                    from a control plane, then write
  python -m manager generate --refresh-operand-flags refresh manager/api/operand_flags.json
                                                    from the pinned operand's source, then write

--refresh-core-schemas reads the OpenAPI of the cluster in $KUBECONFIG (`make
refresh-core-schemas` runs it against a throw-away simulated cluster).
--refresh-operand-flags reads the flags of external-secrets EXTERNAL_SECRETS_VERSION from its
release tree (hack/upstream-tree.sh: the tarball hack/upstream-sources.txt pins).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from manager import versions
from manager.api import artefacts, core_schemas, operand_flags
from manager.commands import command
from manager.paths import REPO_ROOT


def register(subparsers: Any) -> None:
    parser = command(subparsers, "generate", __doc__,
                     "generate the CRDs and docs/api.md from the API models")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true",
                      help="write nothing; exit 1 when a generated file is missing or stale")
    mode.add_argument("--refresh-core-schemas", action="store_true",
                      help="re-extract the core/v1 schemas from a kube-apiserver first")
    mode.add_argument("--refresh-operand-flags", action="store_true",
                      help="re-read the operand release's flags from its source first")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="repository root (default: %(default)s)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root: Path = args.root
    if args.refresh_core_schemas:
        path = _refresh_core_schemas()
        print(f"refreshed {path}")
    if args.refresh_operand_flags:
        path = operand_flags.refresh_snapshot(versions.EXTERNAL_SECRETS_VERSION)
        print(f"refreshed {path}")
    files = artefacts.generated_files()
    if args.check:
        return _check(root, files)
    for relative, content in sorted(files.items()):
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists() or target.read_text() != content:
            target.write_text(content)
            print(f"wrote {relative}")
        else:
            print(f"unchanged {relative}")
    return 0


def _check(root: Path, files: dict[Path, str]) -> int:
    stale = 0
    for relative, content in sorted(files.items()):
        target = root / relative
        current = target.read_text() if target.exists() else ""
        if current != content:
            stale += 1
            diff = difflib.unified_diff(current.splitlines(keepends=True),
                                        content.splitlines(keepends=True),
                                        f"{relative} (committed)", f"{relative} (generated)")
            sys.stdout.writelines(list(diff)[:40])
            print(f"STALE {relative}")
    if stale:
        print(f"{stale} generated file(s) are stale; run `python -m manager generate`")
        return 1
    print(f"{len(files)} generated files are up to date")
    return 0


def _refresh_core_schemas() -> Path:
    kubeconfig = os.environ.get("KUBECONFIG")
    if not kubeconfig:  # `make refresh-core-schemas` runs this inside `devcluster run`
        raise SystemExit("--refresh-core-schemas reads the API server in $KUBECONFIG; "
                         "run `make refresh-core-schemas` for a local one")
    return core_schemas.refresh_snapshot(*_kubectl_source(kubeconfig))


def _kubectl_source(kubeconfig: str) -> tuple[Any, str]:
    kubectl = os.environ.get("KUBECTL", "kubectl")

    def get_json(path: str) -> dict[str, Any]:
        out = subprocess.run([kubectl, f"--kubeconfig={kubeconfig}", "get", "--raw", path],
                             capture_output=True, text=True, check=True, timeout=60).stdout
        body: dict[str, Any] = json.loads(out)
        return body

    version = str(get_json("/version")["gitVersion"])
    return get_json, version
