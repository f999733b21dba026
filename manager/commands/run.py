"""`run`: the operator in the foreground."""

from __future__ import annotations

import argparse
from typing import Any

from manager.controllers.runtime import DEFAULT_RESYNC_SECONDS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the operator against $KUBECONFIG (or the in-cluster service account)",
    )
    parser.add_argument("--kubeconfig", default=None,
                        help="kubeconfig to use (default: $KUBECONFIG, ~/.kube/config, or the "
                        "in-cluster service account)")
    parser.add_argument("--liveness", metavar="URL", default=None,
                        help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz")
    parser.add_argument("--resync-seconds", type=float, default=DEFAULT_RESYNC_SECONDS,
                        help="periodic full reconcile, a safety net against missed events "
                        "(default: %(default)s)")
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug logging, including kopf's")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from manager.operator import run_operator  # noqa: PLC0415 (kopf loads slowly; only `run` needs it)

    return run_operator(kubeconfig=args.kubeconfig,
                        liveness_endpoint=args.liveness, verbose=args.verbose,
                        resync_seconds=args.resync_seconds)
