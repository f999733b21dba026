"""Real images on the simulated cluster: podman as the node's container runtime.

For an image whose entry says `runtime="podman"` (images.py), the runner does not start a
local command: it runs the pod's image itself, `podman run` in the foreground, which returns
the container's exit code and passes the signals it gets on to the container, so the
runner's lifecycle (restarts, preStop, SIGTERM then SIGKILL on deletion, logs) stays as it is
for local processes. What a kubelet would give the container, it gets:

- the image by the pod's reference, pulled if this node's store lacks it (`--pull=missing`;
  plain HTTP only for a registry on loopback, devcluster/registry.py);
- the pod's network namespace (`--network ns:`, netns.py), hostname and environment (the
  pod's variables over the image's own, from a file: no value on a command line);
- its args, and its command as the entrypoint;
- the pod's volumes as the runner writes them (the projected ServiceAccount token included,
  refreshed in place), bind-mounted at their mountPath, read-only when the mount says so;
- the securityContext: runAsUser/runAsGroup (else the image's USER), readOnlyRootFilesystem
  (`--read-only`, no extra tmpfs: only volumes are writable), capabilities drop/add,
  allowPrivilegeEscalation false (`no-new-privileges`), seccomp RuntimeDefault (podman's
  default profile) or Unconfined;
- rlimits this machine can grant (podman's defaults are refused here);
- exec probes: the probe's command run in the container (`podman exec`, exec_ok).

Each cluster has a container store of its own under its directory, empty at start, as a
fresh node's: an image runs only once pulled from a registry. A container is named after
its pod and attempt (`k8s_<container>_<pod>_<namespace>_<uid>_<attempt>`), so the runner
can stop or kill it by name; `remove_all` removes every container and image of the store
when the cluster stops, so nothing outlives it, even a runner that was killed.
"""

from __future__ import annotations

import contextlib
import hashlib
import shutil
import subprocess
from pathlib import Path

from devcluster.pods import JsonObject, Launch, LaunchError

PODMAN = "podman"
STORE = "containers"  # in the cluster's directory
# podman refuses a runroot longer than 50 characters: the run state goes here, per cluster.
RUN_ROOT = Path("/run/eso-devcluster")
LIMITS = ("--ulimit=nofile=1024:1024", "--ulimit=nproc=1024:1024")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]")


def run_root(state_dir: Path) -> Path:
    """The store's run state (a short path: podman's limit), named after the cluster."""
    key = hashlib.sha256(str(state_dir.resolve()).encode()).hexdigest()[:12]
    return RUN_ROOT / key


def podman(state_dir: Path) -> list[str]:
    """podman on this cluster's store (its own libpod state too: nothing shared with the
    host's containers)."""
    run = run_root(state_dir)
    return [PODMAN, f"--root={state_dir / STORE}", f"--runroot={run / 'run'}",
            f"--tmpdir={run / 'tmp'}", "--storage-driver=overlay"]


def available() -> bool:
    return shutil.which(PODMAN) is not None


def container_name(pod: JsonObject, container: str, attempt: int) -> str:
    meta = pod["metadata"]
    return f"k8s_{container}_{meta['name']}_{meta['namespace']}_{meta['uid']}_{attempt}"


def on_loopback(image: str) -> bool:
    """Whether `image` names a registry on loopback (served over plain HTTP here)."""
    first = image.split("/", 1)[0]
    return "/" in image and first.rsplit(":", 1)[0] in LOOPBACK_HOSTS


def write_env_file(env: dict[str, str], path: Path) -> None:
    """The variables as `--env-file` reads them (one NAME=value a line), owner-only."""
    for name, value in env.items():
        if "\n" in value:
            raise LaunchError("CreateContainerConfigError",
                              f"variable {name}: a value with a newline cannot be passed to "
                              "podman here")
    path.touch(mode=0o600)
    path.write_text("".join(f"{name}={value}\n" for name, value in env.items()))


def security_flags(spec: Launch) -> list[str]:
    context = spec.security
    flags = []
    if context.run_as_group is not None:
        flags.append(f"--user={spec.uid}:{context.run_as_group}")
    elif context.run_as_user is not None:
        flags.append(f"--user={context.run_as_user}")
    if context.read_only_root:
        flags += ["--read-only", "--read-only-tmpfs=false"]
    flags += [f"--cap-drop={cap}" for cap in context.drop]
    flags += [f"--cap-add={cap}" for cap in context.add]
    if context.no_new_privileges:
        flags.append("--security-opt=no-new-privileges")
    if context.privileged:
        flags.append("--privileged")
    if context.seccomp == "Unconfined":
        flags.append("--security-opt=seccomp=unconfined")
    return flags


def run_command(spec: Launch, *, state_dir: Path, name: str, hostname: str, netns: Path,
                volumes: Path, pid_file: Path, env_file: Path) -> list[str]:
    """`podman run` for the container `spec`, in the foreground."""
    mounts = [f"--volume={volumes / m.volume / m.sub_path}:{m.path}:{'ro' if m.read_only else 'rw'}"
              for m in spec.mounts]
    entrypoint = ([f"--entrypoint={spec.entrypoint[0]}"] if spec.entrypoint else [])
    args = [*spec.entrypoint[1:], *spec.argv]
    return [*podman(state_dir), "run", "--rm", "--quiet", f"--name={name}",
            f"--hostname={hostname}", f"--network=ns:{netns}", "--pull=missing",
            *(["--tls-verify=false"] if on_loopback(spec.image) else []),
            "--http-proxy=false", *LIMITS, *security_flags(spec), *mounts,
            f"--env-file={env_file}", f"--pidfile={pid_file}", *entrypoint, spec.image, *args]


def signal(state_dir: Path, name: str, signal_name: str) -> bool:
    """Send SIGTERM or SIGKILL (`TERM`, `KILL`) to the container's process; False when there
    is no such container running (still being pulled or created, or gone)."""
    sent = subprocess.run([*podman(state_dir), "kill", f"--signal={signal_name}", name],
                          capture_output=True, check=False, timeout=60)
    return sent.returncode == 0


def exec_ok(state_dir: Path, name: str, command: tuple[str, ...], timeout: float) -> bool:
    """An exec probe: `command` run in the container, as the container's user, succeeded
    within `timeout` seconds (a kubelet's exec probe through the runtime)."""
    if not name or not command:
        return False
    try:
        done = subprocess.run([*podman(state_dir), "exec", name, *command],
                              capture_output=True, check=False, timeout=timeout + 5)
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def remove(state_dir: Path, name: str) -> None:
    """SIGKILL the container if it runs, and remove it."""
    subprocess.run([*podman(state_dir), "rm", "--force", "--ignore", "--time=0", name],
                   capture_output=True, check=False, timeout=60)


def running(state_dir: Path) -> list[str]:
    """Names of the containers of this cluster's store (any state)."""
    if not (state_dir / STORE).exists() or not available():
        return []
    found = subprocess.run([*podman(state_dir), "ps", "--all", "--format", "{{.Names}}"],
                           capture_output=True, text=True, check=False, timeout=60)
    return found.stdout.split()


def remove_all(state_dir: Path) -> None:
    """Every container and image of this cluster's store, then the store itself."""
    store = state_dir / STORE
    if not (store.exists() or run_root(state_dir).exists()) or not available():
        return
    for action in (["rm", "--all", "--force", "--time=0"], ["rmi", "--all", "--force"]):
        subprocess.run([*podman(state_dir), *action], capture_output=True, check=False,
                       timeout=120)
    shutil.rmtree(store, ignore_errors=True)
    shutil.rmtree(run_root(state_dir), ignore_errors=True)
    with contextlib.suppress(OSError):  # the last cluster's: left only while others run
        RUN_ROOT.rmdir()
