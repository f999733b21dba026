"""The simulated cluster: a real control plane, real controllers, fake nodes, real operand.

    etcd ─ kube-apiserver ─┬─ kube-controller-manager   (namespaces, GC, Deployments, tokens...)
                           ├─ kube-scheduler
                           ├─ kwok                      (2 fake Nodes; pod addresses; logs)
                           └─ pod runner                (containers as local processes)

Every process runs on loopback inside the caller's network namespace, which must have `lo`
as its only interface (controlplane.require_loopback_only_network). Pod addresses come
from POD_CIDR, made local to that namespace with one route (`ip route add local ... dev lo
table local`), so processes can bind them and Services and the API server can reach them,
and still nothing leaves the namespace. One implementation serves the pytest fixture,
`hack/local-cluster.sh` and `make run`/`make demo`.
"""

from __future__ import annotations

import contextlib
import logging
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from devcluster import containers, crds, egress, olm, podlogs
from devcluster import images as image_map
from devcluster.api import Api, ApiError
from devcluster.controlplane import (
    LOOPBACK,
    ControlPlaneError,
    LocalControlPlane,
    ensure_binaries,
    ensure_tool,
    free_port,
)

logger = logging.getLogger("devcluster")

POD_CIDR = "10.244.0.0/16"
NODE_IP = "127.0.0.2"
NODES = ("sim-node-1", "sim-node-2")
ZONES = ("zone-a", "zone-b")
STAGES = Path(__file__).with_name("kwok-stages.yaml")


def add_pod_route(pod_cidr: str) -> None:
    """Make every pod address local to this (loopback-only) network namespace."""
    result = subprocess.run(["ip", "route", "add", "local", pod_cidr, "dev", "lo", "table",
                             "local"], capture_output=True, text=True, check=False)
    if result.returncode != 0 and "File exists" not in result.stderr:
        raise ControlPlaneError(f"cannot route {pod_cidr} to lo: {result.stderr.strip()}")


def node_object(name: str, zone: str) -> dict[str, object]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                     "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                                "kubernetes.io/arch": "amd64",
                                "node-role.kubernetes.io/worker": "",
                                "topology.kubernetes.io/zone": zone}},
    }


@dataclass(frozen=True)
class RunningProcess:
    """A container's process as it sees itself (from /proc)."""

    pod: str
    pid: int
    argv: tuple[str, ...]
    env: dict[str, str]


def _read_process(pod: str, pid: int) -> RunningProcess | None:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:  # it just exited
        return None
    env = dict(item.decode().split("=", 1) for item in environ if b"=" in item)
    return RunningProcess(pod, pid, tuple(a.decode() for a in argv if a), env)


@dataclass
class SimulatedCluster:
    """The control plane plus the processes that make it a cluster."""

    workdir: Path
    audit: bool = False
    detached: bool = False
    """Keep running after the starting process exits (`python -m devcluster up`)."""
    images: image_map.ImageMap = field(default_factory=dict)
    """Images the runner can run, besides the operand's."""
    olm: bool = False
    """Run OLM too (olm.py): its CRDs, olm-operator, catalog-operator, a catalog server."""
    openshift: bool = False
    """Serve OpenShift's config API too (crds.install_openshift_config), before OLM starts:
    olm-operator looks for it once at its start (then it injects the cluster proxy)."""
    olm_interval: str | None = None
    """olm-operator's wake-up interval (`--interval`; OLM's default 5m): how soon it applies
    a change of the cluster proxy to the Deployments of its CSVs."""
    olm_images: tuple[str, str] | None = None
    """OLM's util and opm images as references in a registry (the catalog operator's
    `--util-image`, `--opmImage`), run with podman; None: OLM's own, run as local commands."""
    pod_cidr: str = POD_CIDR
    """Pod addresses; two clusters in one network namespace need different ones."""
    plane: LocalControlPlane = field(init=False)

    def __post_init__(self) -> None:
        self.plane = LocalControlPlane(ensure_binaries(), self.workdir, audit=self.audit,
                                       detached=self.detached)

    @classmethod
    def attached(cls, workdir: Path) -> SimulatedCluster:
        """The cluster that `python -m devcluster up` started in `workdir`, seen from another
        process: its API, pods, containers and logs (`down` stops it)."""
        cluster = cls(workdir, detached=True)
        cluster.plane.attach()
        return cluster

    @property
    def kubeconfig(self) -> Path:
        return self.plane.kubeconfig

    @property
    def api(self) -> Api:
        return Api(self.plane.server, self.plane.admin_token, self.workdir / "ca.crt")

    @property
    def images_file(self) -> Path:
        return image_map.path(self.workdir)

    def add_egress(self, address: tuple[str, int], target: tuple[str, int]) -> None:
        """Pods started from now on reach `target` (in this network namespace) at `address`."""
        egress.add(self.workdir, address, target)

    def remove_egress(self, address: tuple[str, int]) -> None:
        """Pods started from now on no longer get `address`."""
        egress.remove(self.workdir, address)

    def start(self, timeout: float = 60.0) -> None:
        started = time.monotonic()
        add_pod_route(self.pod_cidr)
        tools = {name: ensure_tool(name)
                 for name in ("kwok", "external-secrets", "bitwarden-sdk-server")}
        self.plane.start()
        self._spawn_controllers(tools["kwok"] / "kwok")
        for name, zone in zip(NODES, ZONES, strict=True):
            self.api.apply(f"/api/v1/nodes/{name}", node_object(name, zone), "devcluster")
        image_map.save({**image_map.default_images(
            tools["external-secrets"] / "external-secrets",
            tools["bitwarden-sdk-server"] / "bitwarden-sdk-server"), **self.images},
            self.images_file)
        self.plane.spawn("pod-runner", [sys.executable, "-m", "devcluster", "runner",
                                        "--dir", str(self.workdir)])
        self._wait_working(started + timeout)
        logger.info("simulated cluster ready in %.1f s", time.monotonic() - started)
        if self.openshift:
            crds.install_openshift_config(self.api)
        if self.olm:
            self.start_olm()

    def start_olm(self, timeout: float = 60.0) -> None:
        """Install and start OLM; return when its operators are working."""
        started = time.monotonic()
        olm.install(self.api, self.images_file, self.olm_images)
        interval = ["--olm-interval", self.olm_interval] if self.olm_interval else []
        pulled = (["--olm-util-image", self.olm_images[0], "--olm-opm-image",
                   self.olm_images[1]] if self.olm_images else [])
        self.plane.spawn("olm", [sys.executable, "-m", "devcluster", "olm",
                                 "--dir", str(self.workdir), *interval, *pulled])
        olm.wait_working(self.api, self._check_processes, started + timeout)
        logger.info("OLM working in %.1f s", time.monotonic() - started)

    def stop(self) -> None:
        self.plane.stop()
        containers.remove_all(self.workdir)  # what podman ran, even if the runner was killed

    def __enter__(self) -> SimulatedCluster:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def processes(self, namespace: str, container: str) -> list[RunningProcess]:
        """The running processes of `container` in the pods of `namespace`."""
        found = []
        for pid_file in sorted((self.workdir / "pods").glob(f"{namespace}_*/{container}.pid")):
            with contextlib.suppress(OSError, ValueError):
                pod = pid_file.parent.name.split("_")[1]
                process = _read_process(pod, int(pid_file.read_text()))
                if process is not None:
                    found.append(process)
        return found

    def logs(self, namespace: str, container: str) -> dict[str, str]:
        """The output of `container` in each pod of `namespace` the runner ran, by pod name
        (also of pods that are gone)."""
        return {path.parent.name.split("_")[1]: path.read_text(errors="replace")
                for path in sorted((self.workdir / "pods").glob(f"{namespace}_*/{container}.log"))}

    def _spawn_controllers(self, kwok: Path) -> None:
        w, bins, kubeconfig = self.workdir, self.plane.bin_dir, str(self.kubeconfig)
        common = [f"--kubeconfig={kubeconfig}", "--leader-elect=false",
                  f"--bind-address={LOOPBACK}"]
        self.plane.spawn("kube-controller-manager", [
            str(bins / "kube-controller-manager"), *common,
            f"--secure-port={free_port()}", f"--cert-dir={w / 'kcm-certs'}",
            f"--service-account-private-key-file={w / 'sa.key'}",
            f"--root-ca-file={w / 'ca.crt'}",
            f"--cluster-signing-cert-file={w / 'ca.crt'}",
            f"--cluster-signing-key-file={w / 'ca.key'}",
            "--use-service-account-credentials=true", "--controllers=*",
        ])
        self.plane.spawn("kube-scheduler", [
            str(bins / "kube-scheduler"), *common, f"--secure-port={free_port()}"])
        # kwok serves the nodes' kubelet API (container logs, podlogs.py) at NODE_IP.
        crds.install(self.api, [yaml.safe_load(podlogs.logs_crd_path().read_text())])
        port = free_port()
        self.plane.spawn("kwok", [
            str(kwok), f"--kubeconfig={kubeconfig}", "--manage-all-nodes=true",
            f"--config={STAGES}", "--node-lease-duration-seconds=40", f"--cidr={self.pod_cidr}",
            f"--node-ip={NODE_IP}", f"--server-address={NODE_IP}:{port}", f"--node-port={port}",
            "--enable-crds=Logs"])

    def _wait_working(self, deadline: float) -> None:
        """Until the nodes are Ready and the controllers serve new namespaces (the default
        ServiceAccount and the root CA ConfigMap exist)."""
        checks: dict[str, Callable[[], bool]] = {
            "nodes Ready": self._nodes_ready,
            "ServiceAccount default/default": lambda: self._exists(
                "/api/v1/namespaces/default/serviceaccounts/default"),
            "ConfigMap default/kube-root-ca.crt": lambda: self._exists(
                "/api/v1/namespaces/default/configmaps/kube-root-ca.crt"),
        }
        for what, check in checks.items():
            while not check():
                self._check_processes()
                if time.monotonic() > deadline:
                    raise ControlPlaneError(f"simulated cluster: timed out waiting for {what}; "
                                            f"logs in {self.workdir}")
                time.sleep(0.1)

    def _nodes_ready(self) -> bool:
        nodes = self.api.request("GET", "/api/v1/nodes").get("items") or []
        ready = [n for n in nodes if any(c["type"] == "Ready" and c["status"] == "True"
                                         for c in n.get("status", {}).get("conditions") or [])]
        return len(ready) == len(NODES)

    def _exists(self, path: str) -> bool:
        try:
            return self.api.get(path) is not None
        except ApiError:
            return False

    def _check_processes(self) -> None:
        for name in self.plane.pids:
            if not self.plane.alive(name):
                raise ControlPlaneError(f"{name} exited; see {self.workdir / name}.log")
