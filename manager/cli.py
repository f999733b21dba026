"""Command line: `python -m manager <subcommand>`.

Each subcommand lives in its own module, which exposes `register(subparsers)`; the
module adds its parser and sets `func`, a callable taking the parsed arguments and
returning the exit code.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from manager import __version__
from manager.kube import KubeconfigError

# Modules that contribute subcommands, in the order `--help` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "manager.commands.run",
    "manager.commands.generate",
    "manager.commands.render",
    "manager.commands.bundle",
    "manager.commands.uninstall",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m manager",
        description="The external-secrets operator and its tools.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module_name in SUBCOMMAND_MODULES:
        importlib.import_module(module_name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except KubeconfigError as error:  # one line with the fix, not a traceback
        print(f"error: {error}", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
