"""`python -m devcluster up|down|env|run|runner`: the simulated cluster for people and tools.

    up --dir DIR       start it (state in DIR) and return; print the KUBECONFIG export
    env --dir DIR      print the KUBECONFIG export of a running one
    down --dir DIR     stop it and remove DIR
    run -- CMD...      start one in a temporary directory with every CRD the operator needs
                       (its own and the operand's), run CMD with KUBECONFIG set and kubectl
                       on PATH, stop it
    runner --dir DIR   the pod runner of the cluster in DIR (started by `up` and `run`)

Run it inside a loopback-only network namespace (hack/local-cluster.sh, hack/netns-run.sh).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import yaml

from devcluster import controlplane, crds
from devcluster import images as image_map
from devcluster.api import Api
from devcluster.cluster import SimulatedCluster
from devcluster.runner import PodRunner

# Where an operator run here serves its metrics (manager run reads $METRICS_ADDR): loopback
# only, since the pods' port relays listen on <podIP>:8080 in this network namespace.
LOCAL_METRICS_ADDR = "127.0.0.1:8080"

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("up", "down", "env", "run", "runner"))
    parser.add_argument("--dir", type=Path, default=controlplane.default_state_dir())
    parser.add_argument("command", nargs="*", help="for run: the command to run")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    action = {"up": up, "down": down, "env": env, "run": run, "runner": runner}[args.action]
    return action(args)


def up(args: argparse.Namespace) -> int:
    if (args.dir / controlplane.STATE_FILE).exists():
        print(f"already running (state in {args.dir}); `down` first", file=sys.stderr)
        return env(args)
    controlplane.require_loopback_only_network()
    cluster = SimulatedCluster(args.dir, detached=True)
    cluster.start()
    crds.install(cluster.api, crds.all_crds())
    print(f"kube-apiserver {cluster.plane.version} at {cluster.plane.server}", file=sys.stderr)
    return env(args)


def down(args: argparse.Namespace) -> int:
    stopped = controlplane.stop_recorded(args.dir)
    print("simulated cluster stopped" if stopped else "no simulated cluster was running",
          file=sys.stderr)
    return 0


def env(args: argparse.Namespace) -> int:
    state_path = args.dir / controlplane.STATE_FILE
    if not state_path.exists():
        print("no simulated cluster is running; start one with hack/local-cluster.sh up",
              file=sys.stderr)
        return 1
    print(f"export KUBECONFIG={json.loads(state_path.read_text())['kubeconfig']}")
    return 0


def run(args: argparse.Namespace) -> int:
    if not args.command:
        print("usage: python -m devcluster run -- COMMAND [ARG...]", file=sys.stderr)
        return 2
    controlplane.require_loopback_only_network()
    workdir = Path(tempfile.mkdtemp(prefix="eso-sim-cluster-"))
    try:
        with SimulatedCluster(workdir) as cluster:
            crds.install(cluster.api, crds.all_crds())
            # The operator runs in the cluster's network namespace, where the pods' relays
            # listen on <podIP>:<port>: its metrics must not take port 8080 on every address.
            child_env = {"METRICS_ADDR": LOCAL_METRICS_ADDR, **os.environ,
                         "KUBECONFIG": str(cluster.kubeconfig),
                         "PATH": f"{cluster.plane.bin_dir}:{os.environ.get('PATH', '')}"}
            try:
                return subprocess.run(args.command, env=child_env, check=False).returncode
            except KeyboardInterrupt:
                return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def runner(args: argparse.Namespace) -> int:
    kubeconfig = yaml.safe_load((args.dir / "kubeconfig").read_text())
    server = kubeconfig["clusters"][0]["cluster"]["server"]
    api = Api(server, kubeconfig["users"][0]["user"]["token"], args.dir / "ca.crt")
    host, port = server.removeprefix("https://").rsplit(":", 1)
    pods = PodRunner(api, args.dir, image_map.load(args.dir / "images.json"), host, int(port))
    stop = threading.Event()
    import signal  # noqa: PLC0415 (only the runner process handles signals)

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        pods.run(stop)
    except KeyboardInterrupt:
        pods.stop_all()
    return 0


if __name__ == "__main__":
    sys.exit(main())
