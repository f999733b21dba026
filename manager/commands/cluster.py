"""`cluster up|down|env`: the local control plane for people (tests use a fixture)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from manager import localcluster


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "cluster",
        help="start, stop or describe the local control plane (etcd + kube-apiserver)",
        description="Run it through hack/local-cluster.sh, which provides the loopback-only "
        "network namespace the control plane must live in.",
    )
    parser.add_argument("action", choices=("up", "down", "env"))
    parser.add_argument("--dir", type=Path, default=localcluster.default_state_dir(),
                        help="state directory (default: %(default)s)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    workdir: Path = args.dir
    if args.action == "up":
        return _up(workdir)
    if args.action == "down":
        stopped = localcluster.stop_recorded(workdir)
        print("local control plane stopped" if stopped else "no local control plane was running")
        return 0
    return _env(workdir)


def _up(workdir: Path) -> int:
    if (workdir / localcluster.STATE_FILE).exists():
        print(f"already running (state in {workdir}); `cluster down` first")
        return _env(workdir)
    localcluster.require_loopback_only_network()
    plane = localcluster.LocalControlPlane(localcluster.ensure_binaries(), workdir)
    plane.start()
    print(f"kube-apiserver {plane.version} is serving at {plane.server}")
    return _env(workdir)


def _env(workdir: Path) -> int:
    state_path = workdir / localcluster.STATE_FILE
    if not state_path.exists():
        print("no local control plane is running; start one with hack/local-cluster.sh up")
        return 1
    state = json.loads(state_path.read_text())
    print(f"export KUBECONFIG={state['kubeconfig']}")
    return 0
