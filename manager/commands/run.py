"""`run`: the operator in the foreground."""

from __future__ import annotations

import argparse
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the operator against $KUBECONFIG (or, with --local, a local control plane)",
    )
    parser.add_argument("--local", action="store_true",
                        help="start a local control plane first and run against it")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from manager.operator import run_operator

    return run_operator(local=args.local)
