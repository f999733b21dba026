"""`uninstall --operand [--yes] [--force]`: remove the external-secrets stack the operator
created. A dry run by default: it lists what it would delete and what it keeps, and why."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any, TextIO

from manager.client.kube import ApiError, Kube
from manager.commands import add_kubeconfig
from manager.steps.uninstall import (
    UninstallPlan,
    UninstallRefusedError,
    UninstallReport,
    execute_uninstall,
    plan_uninstall,
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "uninstall",
        help="remove what the operator created (dry run unless --yes)",
        description="Deleting the ExternalSecretsConfig leaves the operand running. This "
        "command removes it: every object labelled app.kubernetes.io/managed-by="
        "external-secrets-operator that the operator applied, in reverse install order, and "
        "the operand Namespace last when nothing else is in it. ExternalSecrets, SecretStores "
        "and Secrets the operator did not create are never deleted. See docs/uninstall.md.",
    )
    parser.add_argument("--operand", action="store_true", required=True,
                        help="remove the operand (the external-secrets stack); required")
    parser.add_argument("--yes", action="store_true",
                        help="delete; without it, only list what would be deleted")
    parser.add_argument("--force", action="store_true",
                        help="delete even though the ExternalSecretsConfig still exists (the "
                        "operator, if running, re-creates the objects)")
    parser.add_argument("--namespace", default=None,
                        help="only this operand namespace (default: the ExternalSecretsConfig's "
                        "namespace if it exists, else every namespace); cluster-scoped objects "
                        "are always included")
    add_kubeconfig(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    return asyncio.run(uninstall(args.kubeconfig, namespace=args.namespace, yes=args.yes,
                                 force=args.force, out=sys.stdout))


async def uninstall(kubeconfig: str | None, *, namespace: str | None, yes: bool, force: bool,
                    out: TextIO) -> int:
    kube = Kube.connect(kubeconfig)
    try:
        plan = await plan_uninstall(kube, namespace)
        print_plan(plan, out)
        if not yes:
            if not plan.empty:
                print("\nDry run: nothing was deleted. Run again with --yes to delete.",
                      file=out)
            return 0
        report = await execute_uninstall(kube, plan, force=force)
    except UninstallRefusedError as error:
        print(f"\nrefused: {error}", file=out)
        return 1
    except ApiError as error:
        print(f"\nerror: {error}", file=out)
        return 1
    finally:
        await kube.close()
    print_report(report, out)
    return 1 if report.errors else 0


def print_plan(plan: UninstallPlan, out: TextIO) -> None:
    scope = f"namespace {plan.namespace}" if plan.namespace else "every namespace"
    esc = "exists" if plan.esc_exists else "does not exist"
    print(f"ExternalSecretsConfig/cluster {esc}; looking in {scope} and cluster-wide.", file=out)
    if plan.empty:
        print("Nothing the operator created was found.", file=out)
    else:
        count = len(plan.objects) + len(plan.namespaces)
        print(f"\nObjects the operator created ({count}), in deletion order:", file=out)
        for candidate in (*plan.objects, *plan.namespaces):
            print(f"  {candidate.ref}", file=out)
    if plan.esc_manages and not plan.empty:
        print("\nWhile ExternalSecretsConfig/cluster exists and is Managed, the operator "
              "re-creates what is deleted: delete it first (that leaves the operand in place), "
              "or set its spec.managementState to Removed; --yes refuses otherwise, unless "
              "--force.", file=out)
    if plan.kept:
        print("\nKept:", file=out)
        for kept in plan.kept:
            print(f"  {kept.ref}: {kept.reason}", file=out)


def print_report(report: UninstallReport, out: TextIO) -> None:
    print(f"\nDeleted {len(report.deleted)} objects.", file=out)
    for skipped in report.skipped:
        print(f"  skipped {skipped.ref}: {skipped.reason}", file=out)
    for error in report.errors:
        print(f"  error: {error}", file=out)
    if any(ref.kind == "Namespace" for ref in report.deleted):
        print("Namespaces finish terminating in the background.", file=out)
