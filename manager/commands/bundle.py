"""`bundle`: generate the operator's manifests and the OLM bundle.

  python -m manager bundle            write manifests/operator/*.yaml (but rbac.yaml) and
                                      bundle/, including the operand CRDs (not committed)
  python -m manager bundle --check    write nothing; exit 1 when a committed file is stale

The operand CRDs come from hack/fetch-crds.sh (the Go module proxy on first use, then a
cache outside the repository) unless --operand-crds names a directory of them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from manager.commands import command
from manager.olm import bundle, crds, identity, rbac
from manager.paths import REPO_ROOT


def register(subparsers: Any) -> None:
    parser = command(subparsers, "bundle", __doc__,
                     "generate manifests/operator/ and the OLM bundle in bundle/")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 when a committed file is missing or stale")
    parser.add_argument("--image", default=identity.OPERATOR_IMAGE,
                        help="operator image in the Deployment and CSV (default: %(default)s)")
    parser.add_argument("--operand-crds", type=Path, default=None,
                        help="directory of the operand CRDs (default: hack/fetch-crds.sh)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT,
                        help="repository root (default: %(default)s)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    root: Path = args.root
    try:
        operand_dir = args.operand_crds or crds.fetch_operand_crds(root)
        files = bundle.generate(bundle.BundleSources(root, operand_dir, args.image))
    except (rbac.RbacError, crds.CrdError) as error:
        print(f"bundle: {error}", file=sys.stderr)
        return 1
    if args.check:
        return _check(root, files)
    _write(root, files)
    return 0


def _check(root: Path, files: bundle.GeneratedFiles) -> int:
    problems = bundle.stale_files(root, files)
    for problem in problems:
        print(problem, file=sys.stderr)
    if problems:
        print("bundle: generated files are out of date; run `make bundle` (python -m manager "
              "bundle) and commit the result", file=sys.stderr)
        return 1
    print(f"bundle: {len(files.committed)} committed files are up to date")
    return 0


def _write(root: Path, files: bundle.GeneratedFiles) -> None:
    written = 0
    for relative, content in sorted(files.all().items()):
        target = root / relative
        if target.exists() and target.read_text() == content:
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        written += 1
        print(f"wrote {relative}")
    for leftover in bundle.leftovers(root, files):
        (root / leftover).unlink()
        print(f"removed {leftover}")
    print(f"bundle: {len(files.all())} files ({len(files.build_time)} operand CRDs, not "
          f"committed), {written} changed")
