"""Subcommands of `python -m manager`, and the argument helpers they share."""

from __future__ import annotations

import argparse
from typing import Any


def command(subparsers: Any, name: str, doc: str | None, help: str,
            **options: Any) -> argparse.ArgumentParser:
    """A subcommand whose description is its module's docstring, kept as written."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        name, help=help, description=doc,
        formatter_class=argparse.RawDescriptionHelpFormatter, **options)
    return parser


def add_kubeconfig(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the "
                             "in-cluster service account)")
