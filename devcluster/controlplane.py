"""A real, local Kubernetes control plane: etcd and kube-apiserver on loopback.

The simulated cluster (cluster.py) adds controllers, a scheduler, nodes and a pod runner
around it; `manager generate --refresh-core-schemas` uses it alone. The binaries are built
from the published Go modules by `hack/build-control-plane.sh` and cached outside the
repository. Everything listens on 127.0.0.1, and the caller must run inside a network
namespace whose only interface is `lo` (see docs/development.md, "No packet leaves
loopback"): the API server dials webhook Services on its own, and there nothing can leave
the machine.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import shutil
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from devcluster import containers
from manager.paths import REPO_ROOT

BUILD_SCRIPT = REPO_ROOT / "hack" / "build-control-plane.sh"
BUILD_TOOL = REPO_ROOT / "hack" / "build-tool.sh"
LOOPBACK = "127.0.0.1"
SERVICE_CIDR = "10.0.0.0/24"
# The `kubernetes` Service's ClusterIP (the first address of SERVICE_CIDR) and port: pods reach
# the API server there, as on a cluster (netns.PodNetwork relays it as kube-proxy would).
KUBERNETES_SERVICE = ("10.0.0.1", 443)
ADMIN_USER = "admin"
STATE_FILE = "state.json"
# One line of metadata per request, written when the response is complete.
# Readers count audit entries from a byte offset (tests, bench), so the log must never rotate.
# With no --audit-log-maxsize the API server rotates it at 100 MB, which one test session's
# shared cluster passes (CI emulation 13: the resilience suite then read nothing); 1 TB is
# never reached.
AUDIT_LOG_MAX_MB = 1_000_000
AUDIT_POLICY = """apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived", "ResponseStarted"]
rules:
  - level: Metadata
"""


# Forks every attached process; its one thread lives until the interpreter exits.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="devcluster-spawner")


class ControlPlaneError(RuntimeError):
    """The local control plane could not be built, started or reached."""


def ensure_binaries() -> Path:
    """Return the directory with kube-apiserver, kubectl and etcd, building them once."""
    override = os.environ.get("KUBE_BINS_DIR")
    if override:
        return Path(override)
    result = subprocess.run(["bash", str(BUILD_SCRIPT)], stdout=subprocess.PIPE, check=False)
    if result.returncode != 0:
        raise ControlPlaneError(f"{BUILD_SCRIPT} failed with exit code {result.returncode}")
    return Path(result.stdout.decode().strip().splitlines()[-1])


def ensure_tool(name: str) -> Path:
    """The directory of a tool built by hack/build-tool.sh (built once per pin)."""
    result = subprocess.run(["bash", str(BUILD_TOOL), name], stdout=subprocess.PIPE,
                            check=False)
    if result.returncode != 0:
        raise ControlPlaneError(f"{BUILD_TOOL} {name} failed with exit code "
                                f"{result.returncode}")
    return Path(result.stdout.decode().strip().splitlines()[-1])


def network_interfaces() -> list[str]:
    """Names of the network interfaces of this process's network namespace.

    /proc/self/net is per namespace; /sys/class/net shows the namespace sysfs was mounted in.
    """
    lines = Path("/proc/self/net/dev").read_text().splitlines()[2:]
    return sorted(line.split(":", 1)[0].strip() for line in lines)


def require_loopback_only_network() -> None:
    """Refuse to start unless the only interface here is `lo` (nothing can leave)."""
    interfaces = network_interfaces()
    if interfaces != ["lo"]:
        raise ControlPlaneError(
            "the local control plane runs only inside a loopback-only network namespace, "
            f"but this one has {interfaces}; start it through hack/netns-run.sh "
            "(make test, make run) or hack/local-cluster.sh"
        )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _make_pki(directory: Path) -> None:
    """A throw-away CA, a serving certificate for 127.0.0.1 and the `kubernetes` Service, and
    a service-account key."""
    ec = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")
    _openssl("req", "-x509", *ec, "-keyout", f"{directory}/ca.key", "-out", f"{directory}/ca.crt",
             "-days", "3650", "-subj", "/CN=eso-local-ca")
    _openssl("req", *ec, "-keyout", f"{directory}/serving.key", "-out", f"{directory}/serving.csr",
             "-subj", "/CN=kube-apiserver")
    ext = directory / "serving.ext"
    names = ",".join((f"IP:{LOOPBACK}", f"IP:{KUBERNETES_SERVICE[0]}", "DNS:localhost",
                      "DNS:kubernetes", "DNS:kubernetes.default", "DNS:kubernetes.default.svc"))
    ext.write_text(f"subjectAltName={names}\nextendedKeyUsage=serverAuth\n")
    _openssl("x509", "-req", "-in", f"{directory}/serving.csr", "-CA", f"{directory}/ca.crt",
             "-CAkey", f"{directory}/ca.key", "-CAcreateserial", "-days", "3650",
             "-extfile", str(ext), "-out", f"{directory}/serving.crt")
    _openssl("ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", f"{directory}/sa.key")


@dataclass
class LocalControlPlane:
    """etcd + kube-apiserver in `workdir`, reachable through `kubeconfig`."""

    bin_dir: Path
    workdir: Path
    etcd_port: int = field(default_factory=free_port)
    peer_port: int = field(default_factory=free_port)
    api_port: int = field(default_factory=free_port)
    admin_token: str = field(default_factory=lambda: secrets.token_hex(24))
    audit: bool = False  # log every request's metadata to `audit_log` (benchmarks, write counts)
    detached: bool = False
    """Outlive the starting process (`up`); otherwise its processes die with it, so that a
    killed test session leaves nothing running."""
    pids: dict[str, int] = field(default_factory=dict)
    version: str = ""

    @property
    def audit_log(self) -> Path:
        return self.workdir / "audit.log"

    @property
    def server(self) -> str:
        return f"https://{LOOPBACK}:{self.api_port}"

    @property
    def kubeconfig(self) -> Path:
        return self.workdir / "kubeconfig"

    @property
    def kubectl(self) -> Path:
        return self.bin_dir / "kubectl"

    def start(self, timeout: float = 90.0) -> None:
        """Start etcd and kube-apiserver; return when the API server is ready."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        _make_pki(self.workdir)
        (self.workdir / "tokens.csv").write_text(
            f"{self.admin_token},{ADMIN_USER},admin-uid,system:masters\n"
        )
        if self.audit:
            (self.workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        deadline = time.monotonic() + timeout
        self.spawn("etcd", self._etcd_args())
        self._wait(f"http://{LOOPBACK}:{self.etcd_port}/health", "etcd", deadline)
        self.spawn("kube-apiserver", self._apiserver_args())
        self._wait(f"{self.server}/readyz", "kube-apiserver", deadline)
        self._write_kubeconfig()
        self.version = self.get_json("/version")["gitVersion"]
        self.write_state()

    def stop(self, timeout: float = 15.0) -> None:
        """Stop every process this control plane started, the last started first."""
        for name in reversed(list(self.pids)):
            _terminate(self.pids.pop(name), timeout)

    def restart_apiserver(self, downtime: float = 0.0, grace: float = 15.0,
                          timeout: float = 60.0) -> None:
        """Stop kube-apiserver (SIGTERM, SIGKILL after `grace` seconds), wait `downtime`
        seconds, start it again on the same port and etcd (fault tests); a changed `audit`
        setting takes effect."""
        pid = self.pids.pop("kube-apiserver", None)
        if pid is not None:
            _terminate(pid, grace)
        time.sleep(downtime)
        if self.audit:
            (self.workdir / "audit-policy.yaml").write_text(AUDIT_POLICY)
        self.spawn("kube-apiserver", self._apiserver_args())
        self._wait(f"{self.server}/readyz", "kube-apiserver", time.monotonic() + timeout)
        self.write_state()

    def attach(self) -> None:
        """Take on the control plane that another process started in `workdir` (`up`): its
        port, admin token and processes, as its kubeconfig and state file record them."""
        server, self.admin_token = recorded_admin(self.workdir)
        self.api_port = int(urlsplit(server).port or 443)
        state = json.loads((self.workdir / STATE_FILE).read_text())
        self.pids, self.version = dict(state["pids"]), str(state["version"])

    def __enter__(self) -> LocalControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def get_json(self, path: str) -> dict[str, Any]:
        """GET `path` as the admin (used for readiness and version)."""
        status, body = self._get(self.server + path, timeout=5)
        if status != 200:
            raise ControlPlaneError(f"GET {path} answered {status}")
        document: dict[str, Any] = json.loads(body)
        return document

    def _get(self, url: str, timeout: float) -> tuple[int, bytes]:
        """GET one of our own loopback http(s) URLs, trusting only our CA."""
        if not url.startswith((f"https://{LOOPBACK}:", f"http://{LOOPBACK}:")):
            raise ValueError(f"not a local control-plane URL: {url}")
        headers = {"Authorization": f"Bearer {self.admin_token}"}
        request = urllib.request.Request(url, headers=headers)  # noqa: S310 (checked above)
        context = ssl.create_default_context(cafile=str(self.workdir / "ca.crt"))
        # The scheme and host are checked above, so no file: or remote URL is opened.
        with urllib.request.urlopen(request, context=context, timeout=timeout) as response:  # noqa: S310
            return response.status, response.read()

    def _etcd_args(self) -> list[str]:
        client = f"http://{LOOPBACK}:{self.etcd_port}"
        peer = f"http://{LOOPBACK}:{self.peer_port}"
        return [
            str(self.bin_dir / "etcd"),
            "--name=local",
            f"--data-dir={self.workdir / 'etcd-data'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=local={peer}",
            "--unsafe-no-fsync",
            "--log-level=warn",
        ]

    def _apiserver_args(self) -> list[str]:
        d = self.workdir
        audit = [f"--audit-policy-file={d / 'audit-policy.yaml'}",
                 f"--audit-log-path={self.audit_log}", "--audit-log-mode=blocking",
                 f"--audit-log-maxsize={AUDIT_LOG_MAX_MB}",
                 "--audit-log-maxbackup=0"] if self.audit else []
        return [
            str(self.bin_dir / "kube-apiserver"),
            *audit,
            f"--etcd-servers=http://{LOOPBACK}:{self.etcd_port}",
            f"--secure-port={self.api_port}",
            f"--bind-address={LOOPBACK}",
            f"--advertise-address={LOOPBACK}",
            f"--cert-dir={d / 'certs'}",
            f"--tls-cert-file={d / 'serving.crt'}",
            f"--tls-private-key-file={d / 'serving.key'}",
            f"--token-auth-file={d / 'tokens.csv'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--authorization-mode=RBAC",
            f"--service-account-issuer=https://{LOOPBACK}:{self.api_port}",
            f"--service-account-key-file={d / 'sa.key'}",
            f"--service-account-signing-key-file={d / 'sa.key'}",
            # Webhook and aggregated API calls go to endpoint IPs, never to ClusterIPs.
            "--enable-aggregator-routing=true",
            # The fake nodes' Hostname addresses resolve nowhere; kwok serves logs at the IP.
            "--kubelet-preferred-address-types=InternalIP",
        ]

    def spawn(self, name: str, args: list[str], env: dict[str, str] | None = None) -> None:
        """Start `args` as process `name` (its own session, output to `<name>.log`)."""
        log = (self.workdir / f"{name}.log").open("ab")
        # setpriv sets the parent-death signal and execs (the pid stays the process's own).
        # The signal fires when the *thread* that forked ends, so one long-lived thread forks.
        prefix = [] if self.detached else ["setpriv", "--pdeathsig=KILL", "--"]
        process = _SPAWNER.submit(
            subprocess.Popen, [*prefix, *args], stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True, env=env).result()
        self.pids[name] = process.pid
        self.write_state()

    def alive(self, name: str) -> bool:
        return _alive(self.pids[name])

    def _wait(self, url: str, name: str, deadline: float) -> None:
        while time.monotonic() < deadline:
            if not self.alive(name):
                raise ControlPlaneError(f"{name} exited; see {self.workdir / name}.log")
            try:
                if self._get(url, timeout=2)[0] == 200:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.2)
        raise ControlPlaneError(f"{name} not ready at {url}; see {self.workdir / name}.log")

    def _write_kubeconfig(self) -> None:
        ca_data = base64.b64encode((self.workdir / "ca.crt").read_bytes()).decode()
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "local", "cluster": {
                "server": self.server, "certificate-authority-data": ca_data}}],
            "users": [{"name": ADMIN_USER, "user": {"token": self.admin_token}}],
            "contexts": [{"name": "local", "context": {"cluster": "local", "user": ADMIN_USER}}],
            "current-context": "local",
        }
        self.kubeconfig.write_text(yaml.safe_dump(config))
        self.kubeconfig.chmod(0o600)

    def write_state(self) -> None:
        state = {"pids": self.pids, "server": self.server, "version": self.version,
                 "kubeconfig": str(self.kubeconfig)}
        (self.workdir / STATE_FILE).write_text(json.dumps(state, indent=2))


def _alive(pid: int) -> bool:
    try:
        finished, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not our child (a detached `cluster up`): probe it
        return _running(pid)
    return finished == 0


def _running(pid: int) -> bool:
    """Whether `pid` exists and has not exited. An exited process whose new parent does not
    reap it (an init that is no init, as in some sandboxes) stays a zombie: it has ended."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # the state follows "(comm)"


def _terminate(pid: int, timeout: float) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        time.sleep(0.1)
    if _alive(pid):
        os.killpg(pid, signal.SIGKILL)
        while _alive(pid):
            time.sleep(0.05)


def default_state_dir() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "eso-operator" / "local-cluster"


def recorded_admin(workdir: Path) -> tuple[str, str]:
    """The API server's URL and the admin's token of the control plane in `workdir`."""
    kubeconfig = yaml.safe_load((workdir / "kubeconfig").read_text())
    return (str(kubeconfig["clusters"][0]["cluster"]["server"]),
            str(kubeconfig["users"][0]["user"]["token"]))


def stop_recorded(workdir: Path) -> bool:
    """Stop a control plane started by another process (`cluster up`); True if one ran."""
    state_path = workdir / STATE_FILE
    if not state_path.exists():
        return False
    state = json.loads(state_path.read_text())
    for pid in reversed(list(state["pids"].values())):
        _terminate(pid, 15.0)
    containers.remove_all(workdir)  # what podman ran for its pods
    shutil.rmtree(workdir, ignore_errors=True)
    return True


def temporary_workdir() -> Path:
    return Path(tempfile.mkdtemp(prefix="eso-local-cluster-"))
