"""Command line: `python -m manager <subcommand>`.

Each subcommand lives in its own module, `manager.commands.<name>`, which exposes
`register(subparsers)`; the module adds its parser and sets `func`, a callable taking the
parsed arguments and returning the exit code. When the first argument names a subcommand,
only that module is imported: `run` starts without loading the tools' code. The process's
own `run` (`python -m manager run`) first sheds what its imports would cost for nothing
(manager/commands/startup.py).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from manager import __version__
from manager.client.credentials import CredentialsError

# The subcommands, in the order `--help` lists them; each is the module of its name.
SUBCOMMANDS: tuple[str, ...] = ("run", "generate", "render", "plan", "bundle", "uninstall",
                                "gather", "convert")


CREDENTIALS_HINT = ("credentials come from --kubeconfig, else $KUBECONFIG, else ~/.kube/config, "
                    "else the pod's service account")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every subcommand, or only of `command` when it names one."""
    parser = argparse.ArgumentParser(
        prog="python -m manager",
        description="The external-secrets operator and its tools.",
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for name in (command,) if command in SUBCOMMANDS else SUBCOMMANDS:
        importlib.import_module(f"manager.commands.{name}").register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line's exit code; without `argv`, the process's own command line."""
    if argv is None:
        argv = sys.argv[1:]
        if argv[:1] == ["run"]:  # this process becomes the operator
            from manager.commands.startup import lean_process  # noqa: PLC0415

            lean_process()
    args = build_parser(argv[0] if argv else None).parse_args(argv)
    try:
        code: int = args.func(args)
    except CredentialsError as error:  # one line with the fix, not a traceback
        print(f"error: {error} ({CREDENTIALS_HINT})", file=sys.stderr)
        return 2
    return code


if __name__ == "__main__":
    sys.exit(main())
