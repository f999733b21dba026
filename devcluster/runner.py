"""The pod runner: the simulated cluster's stand-in for a kubelet's container runtime.

kwok gives each pod on a fake node an address (its pod-start stage) and nothing more. The
runner watches those pods and, for every container whose image it knows (images.py), runs
the image's entrypoint as a local process (pods.py decides the command line, environment,
user and mounts) in the pod's own network namespace (netns.py). Init containers run first,
one after the other, each to completion. It reports what a kubelet would: containers
waiting, running or terminated, restarts, the pod Succeeded or Failed once every container
of a pod that is not restarted has ended (so Jobs complete), and **Ready only while the
real process answers its readiness probe** (a container without one is ready while its
process runs). A pod's deletion stops its processes (SIGTERM, then SIGKILL after the grace
period) before the pod object goes.

Each process gets a private mount namespace with a root of its own: the host's top-level
directories, fresh `/tmp` and `/run`, the image's files and the pod's volumes bind-mounted at
their paths (a missing directory is created at the top level of that root, or in an overlay
of its nearest existing parent, so the host's files never change).
The image's files are the host's, so every process may read any host file, whatever its
user (CAP_DAC_READ_SEARCH; it cannot write them). Its /etc/hosts names the cluster's
Services, and its network namespace relays their ClusterIPs to ready endpoints, as cluster
DNS and kube-proxy would (services.py, netns.py). The ServiceAccount token is a real bound
token from the TokenRequest API, refreshed before it expires, so the process has exactly the
permissions its RBAC grants. Probes run at most a second apart and their initial delays are
ten times shorter than declared, so tests do not wait 20 s for a webhook's first probe; the
order of events is unchanged.

This is test infrastructure: it is not part of the operator and never ships in its image.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import pwd
import shlex
import signal
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from devcluster import containers, egress
from devcluster import images as image_map
from devcluster.api import Api, ApiError, JsonObject
from devcluster.controlplane import KUBERNETES_SERVICE, SERVICE_CIDR
from devcluster.netns import PodNetwork
from devcluster.podlogs import CriLog, logs_object
from devcluster.pods import (
    ImageEntry,
    Launch,
    LaunchError,
    Probe,
    container_status,
    launch,
    pod_conditions,
)
from devcluster.services import ClusterServices

logger = logging.getLogger("devcluster.runner")

INITIAL_DELAY_SCALE = 0.1
# preStop sleeps are shorter too, but less: a sleep covers the endpoints' propagation to the
# API server, which is not compressed here (at 0.1, 0.5 s, a loaded CI machine let 1 of 574
# admissions reach a webhook that had closed). 0.3 keeps the cluster's order: a replacement
# webhook becomes Ready (2 s here, 20 s on a cluster) after an old one's sleep ends (1.5 s;
# 5 s).
PRE_STOP_SCALE = 0.3
MAX_PROBE_PERIOD = 1.0
VOLUME_REFRESH_SECONDS = 1.0
MAX_GRACE_SECONDS = 10.0
BACKOFF_SECONDS = (1.0, 30.0)  # a kubelet's are 10 s and 5 min: scaled down, as probes are
BACKOFF_RESET_SECONDS = 60.0  # a run this long ends a crash loop (a kubelet forgets after 10 min)
FIELD_MANAGER = "devcluster-runner"
HOSTS_FILE = "pod-hosts"  # in the cluster's directory: every container's /etc/hosts
SERVICES_PERIOD = 1.0  # seconds between two looks at the Services (names and ClusterIPs)


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def exit_code(returncode: int) -> int:
    """The exit code a container runtime reports: 128 + N for a process killed by signal N
    (Popen gives -N)."""
    return 128 - returncode if returncode < 0 else returncode


def restart_delay(crashes_in_a_row: int) -> float:
    """How long a kubelet waits before restarting a container that crashed: at once after
    the first crash of a loop, then twice as long after each further crash in a row."""
    if crashes_in_a_row <= 1:
        return 0.0
    doubled: float = BACKOFF_SECONDS[0] * 2.0 ** (crashes_in_a_row - 2)
    return min(BACKOFF_SECONDS[1], doubled)


def pre_stop_sleep(container: JsonObject) -> float:
    """Seconds of the container's `preStop: {sleep: ...}` hook (0 without one)."""
    hook = ((container.get("lifecycle") or {}).get("preStop") or {}).get("sleep") or {}
    return float(hook.get("seconds") or 0)


def _initial_delay(probe: Probe) -> float:
    return probe.initial_delay * INITIAL_DELAY_SCALE


def probe_ok(probe: Probe, pod_ip: str) -> bool:
    """One probe attempt against the pod's address."""
    try:
        if probe.kind == "tcp":
            with socket.create_connection((pod_ip, probe.port), timeout=1):
                return True
        url = f"{probe.kind}://{pod_ip}:{probe.port}{probe.path}"
        context = ssl._create_unverified_context()  # noqa: S323 (a kubelet does not verify)
        with urllib.request.urlopen(url, timeout=1, context=context) as response:  # noqa: S310
            return bool(200 <= response.status < 400)
    except OSError:
        return False


# --- volumes --------------------------------------------------------------------------------


@dataclass
class Volumes:
    """The pod's volumes as directories under `root`, kept up to date."""

    api: Api
    pod: JsonObject
    root: Path
    token_due: float = 0.0
    missing: str = ""  # why a volume cannot be written yet ("" when all are there)
    complete: bool = False  # every volume was written once

    def refresh(self) -> bool:
        """Write every volume; False (and `missing` says why) if one cannot be written.
        While the API server cannot be reached the volumes keep what they hold, as a
        kubelet's do: ready if they were complete once."""
        self.missing = ""
        for volume in self.pod["spec"].get("volumes") or []:
            try:
                files = self._files(volume)
            except LookupError as error:
                self.missing = str(error)
                return False
            except (OSError, ApiError) as error:
                if isinstance(error, ApiError) and error.status < 500 and error.status != 429:
                    raise
                # Unreachable, or shutting down (503) or overloaded: not the pod's problem.
                self.missing = f"the API server cannot be reached: {error}"
                return self.complete
            if files is not None:
                self._write(self.root / volume["name"], files)
        self.complete = True
        return True

    def _files(self, volume: JsonObject) -> dict[str, bytes] | None:
        if "emptyDir" in volume:  # writable by every user, as a kubelet makes it
            directory = self.root / volume["name"]
            directory.mkdir(parents=True, exist_ok=True)
            directory.chmod(0o777)
            return None
        if "secret" in volume:
            source = volume["secret"]
            return self._keys("Secret", source.get("secretName"), source)
        if "configMap" in volume:
            return self._keys("ConfigMap", volume["configMap"].get("name"), volume["configMap"])
        if "downwardAPI" in volume:
            return self._downward(volume["downwardAPI"])
        if "projected" in volume:
            files: dict[str, bytes] = {}
            for source in volume["projected"].get("sources") or []:
                files.update(self._projected(source))
            return files
        raise LookupError(f"volume {volume['name']}: this kind of volume is not simulated")

    def _projected(self, source: JsonObject) -> dict[str, bytes]:
        if "serviceAccountToken" in source:
            token = source["serviceAccountToken"]
            return {token["path"]: self._token(token)}
        if "secret" in source:
            return self._keys("Secret", source["secret"].get("name"), source["secret"]) or {}
        if "configMap" in source:
            return self._keys("ConfigMap", source["configMap"].get("name"),
                              source["configMap"]) or {}
        if "downwardAPI" in source:
            return self._downward(source["downwardAPI"])
        return {}

    def _keys(self, kind: str, name: str | None, source: JsonObject) -> dict[str, bytes] | None:
        namespace = self.pod["metadata"]["namespace"]
        plural = "secrets" if kind == "Secret" else "configmaps"
        found = self.api.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}")
        if found is None:
            if source.get("optional"):
                return {}
            raise LookupError(f'{kind.lower()} "{name}" not found')
        if kind == "Secret":
            data = {k: base64.b64decode(v) for k, v in (found.get("data") or {}).items()}
        else:
            data = {k: v.encode() for k, v in (found.get("data") or {}).items()}
            data.update({k: base64.b64decode(v)
                         for k, v in (found.get("binaryData") or {}).items()})
        items = source.get("items")
        if not items:
            return data
        return {item["path"]: data[item["key"]] for item in items if item["key"] in data}

    def _downward(self, source: JsonObject) -> dict[str, bytes]:
        files = {}
        for item in source.get("items") or []:
            value: Any = self.pod
            for part in item.get("fieldRef", {}).get("fieldPath", "").split("."):
                value = value.get(part, "") if isinstance(value, dict) else ""
            files[item["path"]] = str(value).encode()
        return files

    def _token(self, source: JsonObject) -> bytes:
        """A bound token for the pod's ServiceAccount, re-requested at 80% of its life."""
        path = self.root / ".token-cache" / source["path"]
        if path.exists() and time.monotonic() < self.token_due:
            cached: bytes = path.read_bytes()
            return cached
        meta = self.pod["metadata"]
        account = self.pod["spec"].get("serviceAccountName") or "default"
        seconds = int(source.get("expirationSeconds", 3607))
        spec: JsonObject = {"expirationSeconds": seconds,
                            "boundObjectRef": {"kind": "Pod", "apiVersion": "v1",
                                               "name": meta["name"], "uid": meta["uid"]}}
        if source.get("audience"):
            spec["audiences"] = [source["audience"]]
        try:
            answer = self.api.request(
                "POST", f"/api/v1/namespaces/{meta['namespace']}/serviceaccounts/{account}/token",
                body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                      "spec": spec})
        except ApiError as error:
            raise LookupError(f'serviceaccount "{account}": {error}') from None
        token: bytes = answer["status"]["token"].encode()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(token)
        self.token_due = time.monotonic() + 0.8 * seconds
        return token

    @staticmethod
    def _write(directory: Path, files: dict[str, bytes]) -> None:
        """Write changed files atomically (a reader never sees half a certificate)."""
        directory.mkdir(mode=0o755, parents=True, exist_ok=True)
        for name, content in files.items():
            target = directory / name
            if target.exists() and target.read_bytes() == content:
                continue
            target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.tmp")
            partial.write_bytes(content)
            partial.chmod(0o644)
            os.replace(partial, target)


# --- one container ----------------------------------------------------------------------------


ROOT = "/mnt"  # where the container's root is built, in its private mount namespace
FRESH = {"tmp": "1777", "run": "755"}  # each container's own, empty: name -> mode


def _fresh(path: Path) -> bool:
    """Whether `path` lies where the pod gets fresh directories (/tmp, /run)."""
    return len(path.parts) > 1 and path.parts[1] in FRESH


def host_paths(launch_: Launch) -> list[Path]:
    """Host directories the local command itself needs (those of its executable and of any
    file it names, such as the cpb that OLM's util image copies; the source trees on
    PYTHONPATH) that the pod's fresh /tmp and /run would hide: they are bound back."""
    words = launch_.command or launch_.argv[:1]
    needed = [Path(word).parent for word in words if word.startswith("/")]
    needed += [Path(p) for p in launch_.env.get("PYTHONPATH", "").split(":") if p.startswith("/")]
    return [path for path in dict.fromkeys(needed) if _fresh(path) and path.exists()]


def mount_script(launch_: Launch, volumes: Path, hosts: Path | None = None) -> str:
    """Shell that builds the container's root in the private mount namespace, then runs the
    process in it as its user.

    The root is a tmpfs holding the host's top-level directories (bound, with whatever is
    mounted below them), a fresh /tmp and /run, `hosts` (the cluster's Services) at
    /etc/hosts, read-only, the host paths the command needs (host_paths: bound back at their
    own paths), the image's files and the pod's volumes.
    A directory a mount needs is made at the top level of that root, or in an overlay of its
    nearest existing parent, so the host's files never change.
    """
    lines = ["set -e", f"mount -t tmpfs -o mode=755 tmpfs {ROOT}"]
    for top in sorted(Path("/").iterdir()):
        where = shlex.quote(f"{ROOT}/{top.name}")
        if top.is_symlink():
            lines.append(f"ln -s {shlex.quote(os.readlink(top))} {where}")
        elif top.name in FRESH or f"/{top.name}" == ROOT:
            lines.append(f"mkdir {where}")
        elif top.is_dir():
            lines += [f"mkdir {where}", f"mount --rbind {shlex.quote(str(top))} {where}"]
    lines += [f"mount -t tmpfs -o mode={mode} tmpfs {ROOT}/{name}" for name, mode in FRESH.items()]
    overlaid: set[Path] = set()
    try:
        pwd.getpwuid(launch_.uid)
    except KeyError:  # as CRI-O does, the user gets an entry (Python's getpass needs one)
        user = f"{launch_.uid}:x:{launch_.uid}:{launch_.gid}::/:/sbin/nologin"
        lines += [*_overlay(Path("/etc"), overlaid), f"echo {user} >> {ROOT}/etc/passwd"]
    if hosts is not None:
        lines += [f"mount --bind {shlex.quote(str(hosts))} {ROOT}/etc/hosts",
                  f"mount -o remount,bind,ro {ROOT}/etc/hosts"]
    for source, path, read_only in [
            *((str(host), str(host), True) for host in host_paths(launch_)),
            *((host, path, True) for host, path in launch_.image_files),
            *((str(volumes / m.volume / m.sub_path), m.path, m.read_only)
              for m in launch_.mounts)]:
        # As the container will see it: /var/run/... is /run/..., the root's own /run.
        target = Path(os.path.realpath(path))
        if not _fresh(target) and not target.exists():
            parent = next(p for p in target.parents if p.exists())
            if parent != Path("/"):
                lines += _overlay(parent, overlaid)
        inside = shlex.quote(f"{ROOT}{target}")
        lines += [f"mkdir -p {inside}", f"mount --bind {shlex.quote(source)} {inside}"]
        if read_only:
            lines.append(f"mount -o remount,bind,ro {inside}")
    lines.append(f"exec chroot {ROOT} setpriv --reuid={launch_.uid} --regid={launch_.gid} "
                 "--clear-groups --inh-caps=+dac_read_search --ambient-caps=+dac_read_search "
                 '--pdeathsig=KILL -- "$@"')
    return "\n".join(lines)


def _overlay(directory: Path, overlaid: set[Path]) -> list[str]:
    """Shell lines making the root's `directory` writable in an overlay (once)."""
    if directory in overlaid:
        return []
    overlaid.add(directory)
    work = shlex.quote(f"{ROOT}/run/.overlay{directory}")
    lower = shlex.quote(f"{ROOT}{directory}")
    return [f"mkdir -p {work}/upper {work}/work",
            f"mount -t overlay overlay -o lowerdir={lower},upperdir={work}/upper,"
            f"workdir={work}/work {lower}"]


@dataclass
class Container:
    spec: JsonObject
    init: bool = False  # an init container: runs to completion before the next one starts
    launch: Launch | None = None
    process: subprocess.Popen[bytes] | None = None
    state: JsonObject = field(default_factory=lambda: {"waiting": {"reason": "ContainerCreating"}})
    last_state: JsonObject | None = None
    restarts: int = 0
    crashes_in_a_row: int = 0
    ready: bool = False
    started_at: float = 0.0
    next_probe: float = 0.0
    liveness_failures: int = 0
    started_up: bool = False  # its startup probe succeeded (or it has none)
    startup_failures: int = 0
    restart_at: float = 0.0
    log: CriLog | None = None  # what `kubectl logs` serves (podlogs.py)
    podman_name: str = ""  # the podman container of the current run ("": a local process)

    def waiting(self, reason: str, message: str = "") -> None:
        self.state = {"waiting": {"reason": reason, **({"message": message} if message else {})}}
        self.ready = False

    def running(self, spec: Launch) -> None:
        """A new process of this container runs: as a kubelet's probe worker for a new
        container, the probes start over (initial delays, no failures counted: a process
        restarted by its liveness probe gets the full threshold again, not one failure)."""
        self.launch = spec
        self.started_at = time.monotonic()
        self.next_probe = self.started_at + _initial_delay(
            spec.startup if spec.startup.kind != "none" else spec.readiness)
        self.liveness_failures = 0
        self.started_up, self.startup_failures = spec.startup.kind == "none", 0
        self.state = {"running": {"startedAt": now()}}
        self.ready = not self.init and spec.readiness.kind == "none"

    def crashed(self, moment: float) -> float:
        """Count the end of a run that will be restarted; the back-off before the restart.
        A run that never reached running (podman could not create the container) lasted no
        time: it continues the crash loop, it does not end it."""
        ran = moment - self.started_at if "running" in self.state else 0.0
        self.restarts += 1
        self.crashes_in_a_row = (1 if ran >= BACKOFF_RESET_SECONDS
                                 else self.crashes_in_a_row + 1)
        return restart_delay(self.crashes_in_a_row)

    @property
    def succeeded(self) -> bool:
        return bool(self.state.get("terminated", {}).get("exitCode") == 0)

    @property
    def failed_for_good(self) -> bool:
        """Ended with an error and will not be restarted."""
        return "terminated" in self.state and not self.succeeded


# --- one pod ------------------------------------------------------------------------------------


class PodSupervisor(threading.Thread):
    """Runs one pod's containers until the pod goes away (the thread owns the processes, so
    their parent-death signal fires only when it ends)."""

    def __init__(self, runner: PodRunner, pod: JsonObject):
        meta = pod["metadata"]
        super().__init__(name=f"pod {meta['namespace']}/{meta['name']}", daemon=True)
        self.runner = runner
        self.pod = pod
        pod_dir = f"{meta['namespace']}_{meta['name']}_{meta['uid']}"
        self.directory = runner.state_dir / "pods" / pod_dir
        self.volumes = Volumes(runner.api, pod, self.directory / "volumes")
        self.network = PodNetwork(pod["status"]["podIP"], (runner.api_host, runner.api_port),
                                  KUBERNETES_SERVICE, egress.load(runner.state_dir),
                                  SERVICE_CIDR, runner.services.endpoint)
        self._exposed: set[int] = set()
        self.init_containers = [Container(c, init=True)
                                for c in pod["spec"].get("initContainers") or []]
        self.containers = [Container(c) for c in pod["spec"]["containers"]]
        for container in self.init_containers + self.containers:
            container.log = CriLog(self.directory, container.spec["name"])
        self.stopping = threading.Event()
        self.delete_pod = False
        self._reported: JsonObject | None = None

    def stop(self, delete: bool) -> None:
        """Stop the processes; with `delete`, then remove the pod (it is being deleted)."""
        self.delete_pod = self.delete_pod or delete
        self.stopping.set()

    def lookup(self, kind: str, name: str, key: str | None) -> Any:
        """A key of a Secret or ConfigMap of the pod's namespace (all keys when `key` is
        None); None when absent. Values go to the process environment only."""
        namespace = self.pod["metadata"]["namespace"]
        plural = "secrets" if kind == "Secret" else "configmaps"
        found = self.runner.api.get(f"/api/v1/namespaces/{namespace}/{plural}/{name}")
        if found is None:
            return None
        data = found.get("data") or {}
        if kind == "Secret":
            data = {k: base64.b64decode(v).decode() for k, v in data.items()}
        return data if key is None else data.get(key)

    @property
    def key(self) -> str:
        return f"{self.pod['metadata']['namespace']}/{self.pod['metadata']['name']}"

    def run(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        self._publish_logs()
        try:
            self._supervise()
        except Exception:  # a runner bug must not leave processes behind
            logger.exception("pod %s: supervisor failed", self.key)
        finally:
            self._stop_processes()
            self.network.stop()
            self.runner.finished(self)

    def _publish_logs(self) -> None:
        """Point kwok at this pod's log files (podlogs.py), so the API server serves them."""
        names = [c.spec["name"] for c in self.init_containers + self.containers]
        meta = self.pod["metadata"]
        try:
            self.runner.api.apply(f"/apis/kwok.x-k8s.io/v1alpha1/namespaces/{meta['namespace']}"
                                  f"/logs/{meta['name']}",
                                  logs_object(self.pod, self.directory, names), FIELD_MANAGER)
        except (ApiError, OSError) as error:  # kwok's Logs API not served: no `kubectl logs`
            logger.info("pod %s: logs not served: %s", self.key, error)

    def _supervise(self) -> None:
        try:
            self.network.start()
        except OSError as error:
            for container in self.containers:
                container.waiting("CreatePodSandboxError", str(error))
            self._report()
            raise
        next_refresh = 0.0
        while not self.stopping.is_set():
            if time.monotonic() >= next_refresh:
                volumes_ready = self.volumes.refresh()
                next_refresh = time.monotonic() + VOLUME_REFRESH_SECONDS
            for container in self._due():
                self._tend(container, volumes_ready)
                if container.log is not None:
                    container.log.pump()
            self._report()
            self.stopping.wait(0.1)

    def _due(self) -> list[Container]:
        """The containers to run now: the first init container that has not succeeded, else
        the pod's containers."""
        pending = [c for c in self.init_containers if not c.succeeded]
        return pending[:1] or self.containers

    def _tend(self, container: Container, volumes_ready: bool) -> None:
        moment = time.monotonic()
        if container.process is None:
            if moment < container.restart_at:
                return
            if not volumes_ready:
                container.waiting("ContainerCreating", self.volumes.missing)
                return
            self._start(container)
            return
        code = container.process.poll()
        if code is not None:
            self._exited(container, code)
            return
        if container.podman_name and "waiting" in container.state:  # pulling or creating
            if container.launch is None or not self._pid_file(container).exists():
                return
            container.running(container.launch)  # as a kubelet, probes start from here
            logger.info("pod %s: %s: container %s started", self.key, container.spec["name"],
                        container.podman_name)
        self._probe(container, moment)

    def _start(self, container: Container) -> None:
        entry = self.runner.image(container.spec["image"])
        if entry is None:
            container.waiting("NoLocalBinary", f"the simulated cluster has no binary for image "
                              f"{container.spec['image']}")
            container.restart_at = float("inf")
            logger.info("pod %s: %s", self.key, container.state["waiting"]["message"])
            return
        try:
            spec = launch(self.pod, container.spec, entry, self.lookup,
                          api_host=KUBERNETES_SERVICE[0], api_port=KUBERNETES_SERVICE[1])
            argv = (self._podman_run(container, spec) if spec.runtime == "podman" else
                    ["nsenter", f"--net={self.network.path}", "--", "unshare", "--mount",
                     "--propagation", "private", "--", "sh", "-c",
                     mount_script(spec, self.volumes.root, self.runner.services.hosts), "sh",
                     *spec.argv])
        except LaunchError as error:
            logger.info("pod %s: %s cannot start: %s", self.key, container.spec["name"], error)
            container.waiting(error.reason, error.message)
            container.restart_at = time.monotonic() + BACKOFF_SECONDS[1]
            return
        except OSError as error:  # the API server is down: its environment cannot be read
            container.waiting("ContainerCreating", f"the API server cannot be reached: {error}")
            container.restart_at = time.monotonic() + BACKOFF_SECONDS[0]
            return
        for port in set(spec.ports) - self._exposed:
            self.network.expose(port)
            self._exposed.add(port)
        if container.log is not None:
            container.log.start_run()
        log = (self.directory / f"{spec.container}.log").open("ab")
        # podman's own environment is the runner's: the pod's goes in its env file.
        container.process = subprocess.Popen(
            argv, env=os.environ.copy() if container.podman_name else spec.env, stdout=log,
            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd="/")
        log.close()
        if container.podman_name:  # running once podman wrote the container's pid (--pidfile)
            container.launch = spec
            container.waiting("ContainerCreating")
        else:
            self._pid_file(container).write_text(str(container.process.pid))
            container.running(spec)
        logger.info("pod %s: started %s (pid %d%s)", self.key, spec.container,
                    container.process.pid,
                    f", podman run {spec.image}" if container.podman_name else "")

    def _podman_run(self, container: Container, spec: Launch) -> list[str]:
        """`podman run` of the pod's image (containers.py); the container's name is kept to
        signal it."""
        if not containers.available():
            raise LaunchError("CreateContainerError", "podman is not installed")
        name = containers.container_name(self.pod, spec.container, container.restarts)
        env_file = self.directory / f"{spec.container}.env"
        containers.write_env_file(spec.env, env_file)
        containers.remove(self.runner.state_dir, name)  # a leftover of a killed runner
        container.podman_name = name
        return containers.run_command(
            spec, state_dir=self.runner.state_dir, name=name,
            hostname=self.pod["metadata"]["name"], netns=self.network.path,
            volumes=self.volumes.root, pid_file=self._pid_file(container), env_file=env_file)

    def _signal(self, container: Container, signal_: signal.Signals) -> None:
        """SIGTERM or SIGKILL to the container's process: a local process's group, or the
        podman container (its client, while there is no container yet, is what runs)."""
        if container.process is None:
            return
        if container.podman_name and containers.signal(
                self.runner.state_dir, container.podman_name, signal_.name[3:]):
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(container.process.pid, signal_)

    def _ended(self, container: Container) -> None:
        """The run is over: its pid file goes, and a podman container with it."""
        self._pid_file(container).unlink(missing_ok=True)
        if container.podman_name:
            containers.remove(self.runner.state_dir, container.podman_name)
            container.podman_name = ""

    def _pid_file(self, container: Container) -> Path:
        """Where the running process's pid is, for tests that look at what it was given."""
        return self.directory / f"{container.spec['name']}.pid"

    def _exited(self, container: Container, code: int) -> None:
        code = exit_code(code)
        if container.log is not None:
            container.log.pump(final=True)
        terminated = {"exitCode": code, "reason": "Completed" if code == 0 else "Error",
                      **container.state.get("running", {}), "finishedAt": now()}
        container.process = None
        self._ended(container)
        logger.info("pod %s: %s exited with %d", self.key, container.spec["name"], code)
        policy = self.pod["spec"].get("restartPolicy", "Always")
        if container.init:  # done when it succeeded; after a failure, restarted unless Never
            finished = code == 0 or policy == "Never"
        else:
            finished = policy == "Never" or (policy == "OnFailure" and code == 0)
        if finished:
            container.state = {"terminated": terminated}
            container.ready = container.init and code == 0
            container.restart_at = float("inf")
            return
        delay = container.crashed(time.monotonic())
        container.last_state = {"terminated": terminated}
        container.restart_at = time.monotonic() + delay
        if delay:
            container.waiting("CrashLoopBackOff",
                              f"back-off {delay:.0f}s restarting failed container")
        else:
            container.waiting("ContainerCreating")

    def _probe(self, container: Container, moment: float) -> None:
        spec = container.launch
        if spec is None or moment < container.next_probe:
            return
        # The same check (an exec probe's command, say) runs once per round for all probes.
        answers: dict[tuple[str, int, str, tuple[str, ...]], bool] = {}

        def ok(probe: Probe) -> bool:
            check = (probe.kind, probe.port, probe.path, probe.command)
            if check not in answers:
                answers[check] = self._probe_ok(container, probe)
            return answers[check]

        periods = [p.period for p in (spec.readiness, spec.liveness, spec.startup)
                   if p.kind != "none"]
        container.next_probe = moment + min([MAX_PROBE_PERIOD, *periods])
        if not container.started_up:  # a startup probe holds the others back
            container.started_up = ok(spec.startup)
            container.startup_failures = 0 if container.started_up else (
                container.startup_failures + 1)
            if container.startup_failures >= spec.startup.failure_threshold:
                logger.info("pod %s: %s failed its startup probe; restarting", self.key,
                            spec.container)
                self._kill(container)
            if not container.started_up:
                return
            logger.info("pod %s: %s passed its startup probe (%s %s)", self.key,
                        spec.container, spec.startup.kind,
                        " ".join(spec.startup.command) or spec.startup.port)
        if spec.readiness.kind != "none":
            container.ready = ok(spec.readiness)
        if spec.liveness.kind != "none" and moment >= container.started_at + _initial_delay(
                spec.liveness):
            alive = ok(spec.liveness)
            container.liveness_failures = 0 if alive else container.liveness_failures + 1
            if container.liveness_failures >= spec.liveness.failure_threshold:
                logger.info("pod %s: %s failed its liveness probe; restarting", self.key,
                            spec.container)
                self._kill(container)

    def _probe_ok(self, container: Container, probe: Probe) -> bool:
        """One attempt of `probe`: an exec probe runs its command in the container."""
        if probe.kind == "exec":
            return containers.exec_ok(self.runner.state_dir, container.podman_name,
                                      probe.command, probe.timeout)
        return probe_ok(probe, self.pod["status"]["podIP"])

    def _report(self) -> None:
        """Patch the pod's status when what a kubelet would report changed."""
        def statuses(containers: list[Container]) -> list[JsonObject]:
            return [container_status(c.spec, c.state, c.ready, c.restarts, c.last_state)
                    for c in containers]

        ready = all(c.ready for c in self.containers)
        initialized = all(c.succeeded for c in self.init_containers)
        terminal = [c.state.get("terminated") for c in self.containers]
        phase = "Running" if any("running" in c.state for c in self.containers) else "Pending"
        if any(c.failed_for_good for c in self.init_containers):
            phase = "Failed"
        elif all(terminal):
            phase = "Succeeded" if all(t["exitCode"] == 0 for t in terminal if t) else "Failed"
        unready = ", ".join(c.spec["name"] for c in self.containers if not c.ready)
        wanted = {"phase": phase, "containerStatuses": statuses(self.containers),
                  "initContainerStatuses": statuses(self.init_containers), "ready": ready}
        if wanted == self._reported:
            return
        status = {"phase": phase, "containerStatuses": wanted["containerStatuses"],
                  "conditions": pod_conditions(ready, f"containers with unready status: "
                                                      f"[{unready}]", now(), initialized)}
        if self.init_containers:
            status["initContainerStatuses"] = wanted["initContainerStatuses"]
        meta = self.pod["metadata"]
        try:
            self.runner.api.request(
                "PATCH", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status",
                body={"status": status}, content_type="application/strategic-merge-patch+json")
            self._reported = wanted
        except ApiError as error:
            if error.status == 404:
                self.stop(delete=False)
            else:
                logger.warning("pod %s: status update failed: %s", self.key, error)
        except OSError as error:  # the API server is down; a kubelet keeps its pods running
            logger.warning("pod %s: status update failed, retrying: %s", self.key, error)

    def _pre_stop(self, running: list[Container], deadline: float) -> None:
        """The `sleep` preStop hooks of the running containers (a kubelet runs them in
        parallel, within the grace period); the processes keep serving meanwhile, while the
        endpoint controllers take the terminating pod out of its Services. Exec and HTTP hooks
        are not run."""
        seconds = max((pre_stop_sleep(c.spec) for c in running), default=0.0) * PRE_STOP_SCALE
        if seconds:
            logger.info("pod %s: preStop sleep %.1f s", self.key, seconds)
            time.sleep(max(0.0, min(seconds, deadline - time.monotonic())))

    def _kill(self, container: Container) -> None:
        self._signal(container, signal.SIGKILL)

    def _stop_processes(self) -> None:
        running = [c for c in self.init_containers + self.containers if c.process is not None]
        grace = min(MAX_GRACE_SECONDS,
                    float(self.pod["spec"].get("terminationGracePeriodSeconds", 30)))
        deadline = time.monotonic() + grace
        if self.delete_pod:  # a pod being deleted: its preStop hooks first, as a kubelet runs them
            self._pre_stop(running, deadline)
        for container in running:
            self._signal(container, signal.SIGTERM)
        for container in running:
            assert container.process is not None
            try:
                container.process.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self._kill(container)
                try:
                    container.process.wait(30)
                except subprocess.TimeoutExpired:  # a podman client that hangs
                    os.killpg(container.process.pid, signal.SIGKILL)
                    container.process.wait()
            container.process = None
            self._ended(container)
            if container.log is not None:
                container.log.pump(final=True)


# --- the runner ---------------------------------------------------------------------------------


class PodRunner:
    """Watches every pod of the cluster and supervises those kwok gave an address."""

    def __init__(self, api: Api, state_dir: Path, images_file: Path,
                 api_host: str, api_port: int):
        self.api = api
        self.state_dir = state_dir
        self.images_file = images_file
        self._images: tuple[float, image_map.ImageMap] = (-1.0, {})
        self.api_host = api_host
        self.api_port = api_port
        self._pods: dict[str, PodSupervisor] = {}
        self._lock = threading.Lock()
        self.services = ClusterServices(api, state_dir / HOSTS_FILE)

    def image(self, name: str) -> ImageEntry | None:
        """How image `name` runs here, from the image map as it is now (images.add)."""
        with self._lock:
            changed = self.images_file.stat().st_mtime
            if changed != self._images[0]:
                self._images = (changed, image_map.load(self.images_file))
            return image_map.find(self._images[1], name)

    def run(self, stop: threading.Event) -> None:
        self.services.sync()  # the first containers' /etc/hosts already names the Services
        threading.Thread(target=self.services.run, args=(stop, SERVICES_PERIOD), daemon=True,
                         name="services").start()
        version = ""
        while not stop.is_set():
            try:
                if not version:
                    listing = self.api.request("GET", "/api/v1/pods")
                    for pod in listing.get("items") or []:
                        self._handle(pod)
                    version = listing["metadata"]["resourceVersion"]
                for event in self.api.watch("/api/v1/pods", {"resourceVersion": version}):
                    if stop.is_set():
                        break
                    pod = event["object"]
                    if event["type"] == "ERROR":
                        version = ""
                        break
                    version = pod["metadata"].get("resourceVersion", version)
                    if event["type"] == "DELETED":
                        self._forget(pod)
                    elif event["type"] != "BOOKMARK":
                        self._handle(pod)
            except (ApiError, OSError) as error:
                logger.warning("pod watch failed, listing again: %s", error)
                version = ""
                stop.wait(1.0)
        self.stop_all()

    def _handle(self, pod: JsonObject) -> None:
        meta = pod["metadata"]
        uid = meta["uid"]
        with self._lock:
            supervisor = self._pods.get(uid)
        if meta.get("deletionTimestamp"):
            if supervisor is not None:
                supervisor.stop(delete=True)
            else:
                self._delete(pod)
            return
        status = pod.get("status") or {}
        if supervisor is None and status.get("podIP") and status.get("phase") not in (
                "Succeeded", "Failed") and pod["spec"].get("nodeName"):
            supervisor = PodSupervisor(self, pod)
            with self._lock:
                self._pods[uid] = supervisor
            supervisor.start()

    def _forget(self, pod: JsonObject) -> None:
        with self._lock:
            supervisor = self._pods.get(pod["metadata"]["uid"])
        if supervisor is not None:
            supervisor.stop(delete=False)

    def finished(self, supervisor: PodSupervisor) -> None:
        """The supervisor stopped its processes: a pod being deleted may go now."""
        with self._lock:
            self._pods.pop(supervisor.pod["metadata"]["uid"], None)
        if supervisor.delete_pod:
            self._delete(supervisor.pod)

    def _delete(self, pod: JsonObject) -> None:
        meta = pod["metadata"]
        with contextlib.suppress(ApiError, OSError):  # the watch sees the pod again if it stays
            self.api.request(
                "DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}",
                body={"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0,
                      "preconditions": {"uid": meta["uid"]}})

    def stop_all(self) -> None:
        with self._lock:
            supervisors = list(self._pods.values())
        for supervisor in supervisors:
            supervisor.stop(delete=False)
        for supervisor in supervisors:
            supervisor.join(MAX_GRACE_SECONDS + 5)
