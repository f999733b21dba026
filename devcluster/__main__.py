"""`python -m devcluster up|down|env|run|runner`: the simulated cluster for people and tools.

    up --dir DIR       start it (state in DIR) with every CRD the operator needs and
                       return; print the KUBECONFIG export; with --olm, start OLM
                       (devcluster/olm.py) instead of installing the CRDs; with --olm
                       --images, OLM installs from images: a registry in the cluster,
                       hack/publish-images.sh's five images in it, OLM running its util
                       and opm images and the catalog image (devcluster/published.py); with
                       --openshift, serve OpenShift's config API (APIServer, Proxy and
                       their `cluster` objects) too (before OLM starts); --olm-interval
                       as for olm
    env --dir DIR      print the KUBECONFIG export of a running one
    down --dir DIR     stop it and remove DIR
    run -- CMD...      start one in a temporary directory with every CRD the operator needs
                       (its own and the operand's), run CMD with KUBECONFIG set and kubectl
                       on PATH, stop it
    runner --dir DIR   the pod runner of the cluster in DIR (started by `up` and `run`)
    olm --dir DIR      OLM's processes of the cluster in DIR (started by `up --olm`);
                       --olm-interval: olm-operator's wake-up interval (its default: 5m)
    catalog --dir DIR SOURCE...
                       serve OLM a catalog of the releases in these source trees (oldest
                       first; devcluster/catalog.py), replacing the one it serves

Run it inside a loopback-only network namespace (hack/local-cluster.sh, hack/netns-run.sh).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

from devcluster import catalog, controlplane, crds, olm, published
from devcluster import images as image_map
from devcluster.api import Api
from devcluster.cluster import POD_CIDR, SimulatedCluster
from devcluster.runner import PodRunner

# Where an operator run here serves its metrics (manager run reads $METRICS_ADDR): loopback
# only, since the pods' port relays listen on <podIP>:8080 in this network namespace.
LOCAL_METRICS_ADDR = "127.0.0.1:8080"
# Plain HTTP ($METRICS_SECURE), so `curl http://127.0.0.1:8080/metrics` works; set
# METRICS_SECURE=true to serve them as the Deployment does.
LOCAL_METRICS_SECURE = "false"

def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m devcluster", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("action", choices=("up", "down", "env", "run", "runner", "olm",
                                           "catalog"))
    parser.add_argument("--dir", type=Path, default=controlplane.default_state_dir())
    parser.add_argument("--olm", action="store_true", help="for up: start OLM too")
    parser.add_argument("--images", action="store_true",
                        help="for up --olm: OLM installs from the images that "
                             "hack/publish-images.sh pushes to a registry in the cluster")
    parser.add_argument("--pod-cidr", default=POD_CIDR,
                        help="for up: the pods' addresses (two clusters in one network "
                             "namespace need different ones)")
    parser.add_argument("--openshift", action="store_true",
                        help="for up: serve OpenShift's config API (config.openshift.io/v1)")
    parser.add_argument("--olm-interval", default=None,
                        help="for up and olm: olm-operator's --interval (e.g. 15s; default 5m)")
    parser.add_argument("--olm-util-image", default=olm.UTIL_IMAGE,
                        help="for olm: the catalog operator's util image (cpb)")
    parser.add_argument("--olm-opm-image", default=olm.OPM_IMAGE,
                        help="for olm: the catalog operator's opm image (bundle extract)")
    parser.add_argument("command", nargs="*",
                        help="for run: the command to run; for catalog: the source trees")
    args = parser.parse_intermixed_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s %(message)s")
    action = {"up": up, "down": down, "env": env, "run": run, "runner": runner,
              "olm": olm_host, "catalog": serve_catalog}[args.action]
    return action(args)


def up(args: argparse.Namespace) -> int:
    if args.images and not args.olm:
        print("--images is for --olm: OLM installs from the images", file=sys.stderr)
        return 2
    if (args.dir / controlplane.STATE_FILE).exists():
        print(f"already running (state in {args.dir}); `down` first", file=sys.stderr)
        return env(args)
    controlplane.require_loopback_only_network()
    # With --images, OLM starts once the images it runs are in the registry (published.py).
    cluster = SimulatedCluster(args.dir, detached=True, olm=args.olm and not args.images,
                               openshift=args.openshift, olm_interval=args.olm_interval,
                               pod_cidr=args.pod_cidr)
    cluster.start()
    if not args.olm:  # with OLM, the CRDs come from the bundle
        crds.install(cluster.api, crds.all_crds())
    if args.images and not _serve_images(cluster):
        return 1
    print(f"kube-apiserver {cluster.plane.version} at {cluster.plane.server}", file=sys.stderr)
    return env(args)


def _serve_images(cluster: SimulatedCluster) -> bool:
    """The registry, the published images and OLM installing from them; on a failure,
    nothing of the cluster is left running (False)."""
    try:
        served = published.serve(cluster)
    except published.PublishError as error:
        controlplane.stop_recorded(cluster.workdir)
        print(f"up --images: {error}; the cluster is stopped", file=sys.stderr)
        return False
    except BaseException:  # Ctrl-C or a bug: a half-made cluster is of no use either
        controlplane.stop_recorded(cluster.workdir)
        raise
    print(f"OLM installs from these images (registry {published.REGISTRY}):\n"
          f"{served.describe()}", file=sys.stderr)
    return True


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
            child_env = {"METRICS_ADDR": LOCAL_METRICS_ADDR,
                         "METRICS_SECURE": LOCAL_METRICS_SECURE, **os.environ,
                         "KUBECONFIG": str(cluster.kubeconfig),
                         "PATH": f"{cluster.plane.bin_dir}:{os.environ.get('PATH', '')}"}
            try:
                return subprocess.run(args.command, env=child_env, check=False).returncode
            except KeyboardInterrupt:
                return 130
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def runner(args: argparse.Namespace) -> int:
    api = _admin(args.dir)
    pods = PodRunner(api, args.dir, image_map.path(args.dir), *api.address)
    import signal  # noqa: PLC0415 (only the runner process handles signals)

    # SIGTERM interrupts the pod watch's blocking read as Ctrl-C does; an event set by a
    # handler would be seen only at the next pod event, and `stop` would wait its 15 s out.
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    try:
        pods.run(threading.Event())
    except KeyboardInterrupt:
        pods.stop_all()
    return 0


def serve_catalog(args: argparse.Namespace) -> int:
    if not args.command:
        print("usage: python -m devcluster catalog --dir DIR SOURCE...", file=sys.stderr)
        return 2
    api = _admin(args.dir)
    work = Path(tempfile.mkdtemp(prefix="catalog-", dir=args.dir))
    releases = [catalog.prepare(Path(source).resolve(), work / "bundles" / str(number))
                for number, source in enumerate(args.command)]
    catalog.write(releases, work / "catalog", olm.binaries()[1] / "opm")
    image_map.add(image_map.path(args.dir), catalog.images(releases))
    olm.publish(api, args.dir, work / "catalog")
    print(f"serving {', '.join(r.name for r in releases)} as CatalogSource "
          f"{olm.NAMESPACE}/{olm.CATALOG_SOURCE}", file=sys.stderr)
    return 0


def olm_host(args: argparse.Namespace) -> int:
    stop = threading.Event()
    import signal  # noqa: PLC0415 (only the host process handles signals)

    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with contextlib.suppress(KeyboardInterrupt):
        olm.host(args.dir, _admin(args.dir), stop, args.olm_interval,
                 (args.olm_util_image, args.olm_opm_image))
    return 1 if not stop.is_set() else 0


def _admin(directory: Path) -> Api:
    """The admin's client of the cluster whose state is in `directory`."""
    return Api(*controlplane.recorded_admin(directory), directory / "ca.crt")


if __name__ == "__main__":
    sys.exit(main())
