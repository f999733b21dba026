"""`run`: the operator in the foreground."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from manager.commands import add_kubeconfig
from manager.commands.startup import imports_done
from manager.metrics_endpoint.server import DEFAULT_METRICS_ADDR
from manager.names import LEASE_NAME
from manager.runtime.leader import LeaseTiming
from manager.runtime.worker import DEFAULT_RESYNC_SECONDS

DEFAULT_TIMING = LeaseTiming()
TRUE_WORDS = frozenset({"1", "true", "yes", "on"})
FALSE_WORDS = frozenset({"0", "false", "no", "off"})

ENVIRONMENT = """\
environment variables it reads (OLM's Deployment sets them; none is required):
  RELATED_IMAGE_EXTERNAL_SECRETS      image of the controller, webhook and cert-controller
                                      (default: the pinned image; empty: none available)
  RELATED_IMAGE_BITWARDEN_SDK_SERVER  image of bitwarden-sdk-server (needed only when the
                                      ExternalSecretsConfig enables bitwarden)
  OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION, BITWARDEN_SDK_SERVER_IMAGE_VERSION
                                      versions for the app.kubernetes.io/version labels and
                                      status.externalSecretsVersion
  HTTP_PROXY, HTTPS_PROXY, NO_PROXY   the cluster proxy (OLM injects it); the operand gets it
                                      unless the ExternalSecretsConfig or the
                                      ExternalSecretsManager sets a proxy
  OPERATOR_IMAGE_VERSION              the operator's version, for the start-up line and the
                                      ExternalSecretsManager it creates
  POD_NAMESPACE                       the operator's own namespace (the operand may not use it)
  OPERATOR_CONDITION_NAME             OLM's OperatorCondition for the operator's CSV (OLM sets
                                      it), in POD_NAMESPACE: the operator writes Upgradeable
                                      there (docs/olm.md, "The upgrade gate"); absent: no gate
  POD_NAME                            reportingInstance of its Events and the start of its
                                      leader-election identity (default: the host name)
  LEADER_ELECT                        --leader-elect when the flag is not given (true/1/yes/on;
                                      the operator's Deployment sets the flag)
  METRICS_ADDR                        --metrics-addr when the flag is not given (the
                                      simulated cluster sets 127.0.0.1:8080: there the
                                      operator shares a network namespace with the pods'
                                      port relays)
  METRICS_SECURE                      --metrics-secure when the flag is not given (`make
                                      run` sets false: plain HTTP on loopback)
  KUBECONFIG                          credentials when --kubeconfig is not given (files
                                      separated by ":", merged as kubectl does)
  KUBERNETES_SERVICE_HOST, KUBERNETES_SERVICE_PORT
                                      the API server in a pod (set by the kubelet), with the
                                      service account's token

The first two log lines (action=start, action=settings) say what is in effect. Events about
ExternalSecretsConfig/cluster are in the namespace `default`: kubectl describe esc cluster.
"""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "run",
        help="run the operator against $KUBECONFIG (or the in-cluster service account)",
        description="Run the operator in the foreground until SIGINT or SIGTERM. It watches\n"
        "ExternalSecretsConfig/cluster and ExternalSecretsManager/cluster and keeps the\n"
        "external-secrets operand as they say (docs/operations.md).",
        epilog=ENVIRONMENT,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_kubeconfig(parser)
    parser.add_argument("--liveness", metavar="URL", default=None,
                        help="serve a liveness probe, e.g. http://0.0.0.0:8080/healthz")
    _add_metrics(parser)
    parser.add_argument("--resync-seconds", type=float, default=DEFAULT_RESYNC_SECONDS,
                        help="periodic full reconcile, a safety net against missed events "
                        "(default: %(default)s)")
    _add_leader_election(parser)
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="debug logging, including kopf's")
    parser.set_defaults(func=run)


def boolean(value: str) -> bool:
    """true/1/yes/on or false/0/no/off, as Go's boolean flags take them."""
    word = value.strip().lower()
    if word not in TRUE_WORDS | FALSE_WORDS:
        raise argparse.ArgumentTypeError(f"not a boolean: {value!r}")
    return word in TRUE_WORDS


def _add_metrics(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "metrics",
        "GET /metrics in the Prometheus text format (docs/operations.md, \"Metrics\").")
    group.add_argument("--metrics-addr", metavar="ADDR",
                       default=os.environ.get("METRICS_ADDR") or DEFAULT_METRICS_ADDR,
                       help="where to serve them, HOST:PORT or :PORT; 'off' serves none "
                       f"(default: $METRICS_ADDR, else {DEFAULT_METRICS_ADDR})")
    group.add_argument("--metrics-secure", metavar="BOOL", nargs="?", const=True, type=boolean,
                       default=os.environ.get("METRICS_SECURE") or "true",  # via boolean()
                       help="HTTPS, only to bearer tokens allowed to get /metrics (checked "
                       "with TokenReview and SubjectAccessReview); false: plain HTTP, open to "
                       "anyone who reaches the port, for local runs (default: "
                       "$METRICS_SECURE, else true)")
    group.add_argument("--metrics-cert-file", metavar="FILE", default=None,
                       help="serving certificate (PEM), read again when it changes; until "
                       "it and the key exist, a self-signed certificate made at start")
    group.add_argument("--metrics-key-file", metavar="FILE", default=None,
                       help="the certificate's private key (PEM)")


def _add_leader_election(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "leader election",
        f"One instance reconciles at a time: the holder of the Lease {LEASE_NAME}\n"
        "in the operator's namespace; the others wait and write nothing (docs/operations.md).")
    group.add_argument("--leader-elect", action=argparse.BooleanOptionalAction,
                       default=os.environ.get("LEADER_ELECT", "").lower() in TRUE_WORDS,
                       help="reconcile only while holding the Lease (default: $LEADER_ELECT, "
                       "else off; the operator's Deployment turns it on)")
    group.add_argument("--leader-elect-namespace", metavar="NAMESPACE", default=None,
                       help="namespace of the Lease (default: $POD_NAMESPACE, else the pod's "
                       "service account namespace)")
    for name, value, meaning in (
            ("lease-duration", DEFAULT_TIMING.lease_duration,
             "how long a Lease not renewed stays valid: a crashed leader is replaced after it"),
            ("renew-deadline", DEFAULT_TIMING.renew_deadline,
             "how long the leader keeps trying to renew before it exits (status 1)"),
            ("retry-period", DEFAULT_TIMING.retry_period,
             "how often the leader renews and a waiting instance reads the Lease")):
        group.add_argument(f"--leader-elect-{name}", type=float, default=value,
                           metavar="SECONDS", help=f"{meaning} (default: %(default)g)")


def run(args: argparse.Namespace) -> int:
    from manager.runtime.operator import LeaderElectionError, OperatorOptions, run_operator  # noqa: PLC0415 (kopf loads slowly; only `run` needs it)

    imports_done()  # the operator's modules are loaded (manager/commands/startup.py)
    if bool(args.metrics_cert_file) != bool(args.metrics_key_file):
        print("error: --metrics-cert-file and --metrics-key-file go together", file=sys.stderr)
        return 2
    try:
        timing = LeaseTiming(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                             args.leader_elect_retry_period) if args.leader_elect else None
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    options = OperatorOptions(
        kubeconfig=args.kubeconfig, liveness_endpoint=args.liveness,
        resync_seconds=args.resync_seconds,
        metrics_addr=None if args.metrics_addr == "off" else args.metrics_addr,
        metrics_secure=args.metrics_secure, metrics_cert_file=args.metrics_cert_file,
        metrics_key_file=args.metrics_key_file,
        leader_election=timing, leader_election_namespace=args.leader_elect_namespace)
    try:
        return run_operator(options, verbose=args.verbose)
    except LeaderElectionError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
