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
from manager.credentials import CredentialsError

# Modules that contribute subcommands, in the order `--help` lists them.
SUBCOMMAND_MODULES: tuple[str, ...] = (
    "manager.commands.run",
    "manager.commands.generate",
    "manager.commands.render",
    "manager.commands.plan",
    "manager.commands.bundle",
    "manager.commands.uninstall",
    "manager.commands.gather",
)


CREDENTIALS_HINT = ("credentials come from --kubeconfig, else $KUBECONFIG, else ~/.kube/config, "
                    "else the pod's service account")


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
    except CredentialsError as error:  # one line with the fix, not a traceback
        print(f"error: {error} ({CREDENTIALS_HINT})", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
