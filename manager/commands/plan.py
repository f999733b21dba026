"""`plan -f esc.yaml [--esm esm.yaml]`: what the operator would create, change (field by field)
and delete if these specs were applied, worked out against the live cluster with server-side
dry runs; nothing is changed.

Exit status: 0 when the API server and the operator would accept the specs, 1 when either
would refuse them (the reason is printed) or the pass would end Degraded on a missing
dependency (the plan is printed: what it would still apply, what it would hold back and why),
2 when no plan could be made (unreadable file, no credentials, the API server unreachable).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

from manager.client.kube import ApiError, Kube
from manager.commands import add_kubeconfig, command
from manager.commands.render import (
    InputError,
    add_spec_arguments,
    environment_pairs,
    load_document,
)
from manager.names import ESC_KIND, ESM_KIND, OPERATOR_NAMESPACE
from manager.offline.plan import PlanRefusedError, make_plan, print_plan


def register(subparsers: Any) -> None:
    parser = command(subparsers, "plan", __doc__, "show what applying an "
                     "ExternalSecretsConfig would change (server-side dry run)")
    add_spec_arguments(parser,
                       esm_help="an ExternalSecretsManager to plan with (default: the live one)",
                       env_help="a variable of the operator's environment, over those of its "
                                "Deployment in the cluster (repeatable)")
    parser.add_argument("--operator-namespace", default=OPERATOR_NAMESPACE,
                        help="where the operator's Deployment runs, for its environment "
                             "(default: %(default)s)")
    add_kubeconfig(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        esc = load_document(args.filename, ESC_KIND)
        esm = load_document(args.esm, ESM_KIND) if args.esm else None
        overrides = environment_pairs(args.env)
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return asyncio.run(plan(args.kubeconfig, esc, esm, overrides=overrides,
                            operator_namespace=args.operator_namespace, out=sys.stdout))


async def plan(kubeconfig: str | None, esc: dict[str, Any], esm: dict[str, Any] | None, *,
               overrides: dict[str, str], operator_namespace: str, out: TextIO) -> int:
    kube = Kube.connect(kubeconfig)
    try:
        result = await make_plan(kube, esc, esm, overrides=overrides,
                                 operator_namespace=operator_namespace)
    except PlanRefusedError as refusal:
        print(f"refused: {refusal}", file=out)
        return 1
    except ApiError as error:
        print(f"error: the plan could not be made: {error}", file=out)
        return 2
    finally:
        await kube.close()
    print_plan(result, out)
    return 1 if result.degraded else 0
