"""How a pod's container becomes a local process: pure functions from the Pod object.

The simulated cluster has no container runtime. For each container whose image it knows
(`images.ImageMap`), the pod runner starts the image's entrypoint as a local process with the
pod's own arguments (unchanged), environment, volumes and user, in the pod's own network
namespace (netns.py). Everything that differs from a kubelet is decided here, in one place:

1. **The API server is behind the `kubernetes` Service, as on a cluster.**
   `KUBERNETES_SERVICE_HOST`/`_PORT` name its ClusterIP (10.0.0.1:443), which the runner
   relays inside the pod to the API server, as kube-proxy would (netns.py); so a proxy in
   the environment captures API traffic here exactly when it would on a cluster.
2. **Volumes are directories.** Secret, ConfigMap, downward-API and projected volumes are
   written to a staging directory and bind-mounted at their `mountPath` inside a private
   mount namespace (see runner.py); `/tmp` and `/run` are fresh per pod, as in a container.
3. **Only declared ports are reachable** from outside the pod (container ports and probe
   ports). HTTP and TCP probes are run; **exec probes only in a real image** (podman: the
   command runs in the container, `podman exec`), not for a local process, which has no
   image to run the command from. A startup probe holds the other two back until it
   succeeds, and restarts the container after its failure threshold, as a kubelet's does.

An image whose entry says `runtime="podman"` is not a local command: the runner runs the
real image with podman (devcluster/containers.py), in the pod's network namespace, with the
same environment and volumes, and the container's securityContext (`security`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

JsonObject = dict[str, Any]


@dataclass(frozen=True)
class ImageEntry:
    """How an image runs here: its entrypoint as the image declares it (or, for an image
    that pods always run with a command of their own, that command), the local command that
    stands in for it, the image's default user and environment, and the image's files: host
    directories bind-mounted read-only at their paths in the container (a source tree).
    """

    entrypoint: tuple[str, ...]
    local: tuple[str, ...]
    user: int = 65534
    env: tuple[tuple[str, str], ...] = ()
    files: tuple[tuple[str, str], ...] = ()  # (host directory, path in the container)
    runtime: str = "local"
    """"local": `local` stands in for the image; "podman": the pod's image itself runs
    (pulled by its reference; `entrypoint`, `local` and `files` are unused)."""

VARIABLE = re.compile(r"\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)|\$\$")
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


@dataclass(frozen=True)
class Mount:
    volume: str
    path: str
    sub_path: str = ""
    read_only: bool = False


@dataclass(frozen=True)
class Probe:
    kind: str  # "http", "https", "tcp", "exec" or "none"
    port: int = 0
    path: str = "/"
    period: float = 10.0
    initial_delay: float = 0.0
    failure_threshold: int = 3
    command: tuple[str, ...] = ()  # an exec probe's command
    timeout: float = 1.0


@dataclass(frozen=True)
class Security:
    """The container's securityContext (over the pod's) as a container runtime applies it."""

    run_as_user: int | None = None  # None: the image's USER
    run_as_group: int | None = None
    read_only_root: bool = False
    drop: tuple[str, ...] = ()
    add: tuple[str, ...] = ()
    no_new_privileges: bool = False  # allowPrivilegeEscalation: false
    privileged: bool = False
    seccomp: str = "RuntimeDefault"  # RuntimeDefault, Unconfined or Localhost


@dataclass(frozen=True)
class Launch:
    """One container as a local process."""

    container: str
    argv: tuple[str, ...]
    env: dict[str, str]
    mounts: tuple[Mount, ...]
    uid: int
    gid: int
    readiness: Probe
    liveness: Probe
    ports: tuple[int, ...]
    """Ports reachable from outside the pod: declared container ports and probe ports."""
    secret_env: frozenset[str] = field(default_factory=frozenset)
    """Names of variables whose values come from Secrets (never logged)."""
    image_files: tuple[tuple[str, str], ...] = ()
    """The image's files: (host directory, path in the container)."""
    command: tuple[str, ...] = ()
    """The local command that stands in for the image's entrypoint (argv starts with it)."""
    runtime: str = "local"
    """"podman": `image` runs with podman; argv is the pod's args, `entrypoint` its command."""
    image: str = ""
    entrypoint: tuple[str, ...] = ()
    security: Security = field(default_factory=Security)
    startup: Probe = field(default_factory=lambda: Probe("none"))
    """Until it succeeds, neither readiness nor liveness is probed."""


class LaunchError(Exception):
    """The container cannot start as given: `reason` and `message` go to its status."""

    def __init__(self, reason: str, message: str):
        super().__init__(f"{reason}: {message}")
        self.reason = reason
        self.message = message


def expand(text: str, env: dict[str, str]) -> str:
    """Kubernetes `$(VAR)` expansion: unknown references stay as written, `$$` escapes."""
    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))
    return VARIABLE.sub(substitute, text)


def _field_value(pod: JsonObject, path: str) -> str:
    value: Any = pod
    for part in re.findall(r"[^.\[\]']+", path):
        value = value.get(part, "") if isinstance(value, dict) else ""
    return str(value)


def container_env(pod: JsonObject, container: JsonObject, lookup: Any, api_host: str,
                  api_port: int, *, image_env: tuple[tuple[str, str], ...] | None = (),
                  ) -> tuple[dict[str, str], frozenset[str]]:
    """The environment of `container` over the image's; `lookup(kind, name, key)` reads
    Secret and ConfigMap keys (None when absent). Returns the variables and the names that
    hold secret values. `image_env=None`: a real image's runtime adds the image's own."""
    # HOME as a container runtime sets it for a user the image's /etc/passwd lacks.
    base = {} if image_env is None else {"PATH": BASE_PATH, "HOME": "/", **dict(image_env)}
    env = {**base, "HOSTNAME": pod["metadata"]["name"],
           "KUBERNETES_SERVICE_HOST": api_host, "KUBERNETES_SERVICE_PORT": str(api_port),
           "KUBERNETES_SERVICE_PORT_HTTPS": str(api_port)}
    secret_names: set[str] = set()
    for source in container.get("envFrom") or []:
        kind = "Secret" if "secretRef" in source else "ConfigMap"
        ref = source.get("secretRef") or source.get("configMapRef") or {}
        for key, value in (lookup(kind, ref.get("name"), None) or {}).items():
            env[source.get("prefix", "") + key] = value
            if kind == "Secret":
                secret_names.add(source.get("prefix", "") + key)
    for variable in container.get("env") or []:
        name = variable["name"]
        if "value" in variable:
            env[name] = expand(variable["value"], env)
            continue
        source = variable.get("valueFrom") or {}
        if "fieldRef" in source:
            env[name] = _field_value(pod, source["fieldRef"]["fieldPath"])
        elif "secretKeyRef" in source or "configMapKeyRef" in source:
            kind = "Secret" if "secretKeyRef" in source else "ConfigMap"
            ref = source.get("secretKeyRef") or source.get("configMapKeyRef") or {}
            value = lookup(kind, ref["name"], ref["key"])
            if value is None and not ref.get("optional"):
                raise LaunchError("CreateContainerConfigError",
                                  f'{kind.lower()} "{ref["name"]}" key "{ref["key"]}" not found')
            if value is not None:
                env[name] = value
                if kind == "Secret":
                    secret_names.add(name)
    return env, frozenset(secret_names)


def _port(container: JsonObject, port: int | str) -> int:
    if isinstance(port, int) or str(port).isdigit():
        return int(port)
    for declared in container.get("ports") or []:
        if declared.get("name") == port:
            return int(declared["containerPort"])
    raise LaunchError("CreateContainerConfigError", f"probe names unknown port {port!r}")


def probe(container: JsonObject, which: str) -> Probe:
    spec = container.get(which)
    if not spec:
        return Probe("none")
    if "httpGet" in spec:
        get = spec["httpGet"]
        kind, port, path = get.get("scheme", "HTTP").lower(), get["port"], get.get("path", "/")
    elif "tcpSocket" in spec:
        kind, port, path = "tcp", spec["tcpSocket"]["port"], ""
    elif "exec" in spec:
        return Probe("exec", 0, "", float(spec.get("periodSeconds", 10)),
                     float(spec.get("initialDelaySeconds", 0)),
                     int(spec.get("failureThreshold", 3)),
                     tuple(spec["exec"].get("command") or ()),
                     float(spec.get("timeoutSeconds", 1)))
    else:
        return Probe("none")
    return Probe(kind, _port(container, port), path, float(spec.get("periodSeconds", 10)),
                 float(spec.get("initialDelaySeconds", 0)), int(spec.get("failureThreshold", 3)))


def _no_exec(probe_: Probe) -> Probe:
    """A local process has no image to exec a command in: its exec probes are not run."""
    return Probe("none") if probe_.kind == "exec" else probe_


def user(pod: JsonObject, container: JsonObject, image_user: int) -> tuple[int, int]:
    """runAsUser/runAsGroup of the container, else the pod's, else the image's user."""
    pod_context = pod["spec"].get("securityContext") or {}
    context = container.get("securityContext") or {}
    uid = context.get("runAsUser", pod_context.get("runAsUser", image_user))
    gid = context.get("runAsGroup", pod_context.get("runAsGroup", uid))
    non_root = context.get("runAsNonRoot", pod_context.get("runAsNonRoot", False))
    if non_root and uid == 0:
        raise LaunchError("CreateContainerConfigError",
                          "container has runAsNonRoot and image will run as root")
    return int(uid), int(gid)


def security(pod: JsonObject, container: JsonObject, image_user: int) -> Security:
    """The container's securityContext over the pod's; runAsNonRoot checked against the user
    the container will have (`image_user` when neither sets runAsUser)."""
    pod_context = pod["spec"].get("securityContext") or {}
    context = container.get("securityContext") or {}
    user(pod, container, image_user)  # refuses root under runAsNonRoot
    capabilities = context.get("capabilities") or {}
    seccomp = (context.get("seccompProfile") or pod_context.get("seccompProfile") or {})
    return Security(
        run_as_user=context.get("runAsUser", pod_context.get("runAsUser")),
        run_as_group=context.get("runAsGroup", pod_context.get("runAsGroup")),
        read_only_root=bool(context.get("readOnlyRootFilesystem", False)),
        drop=tuple(capabilities.get("drop") or ()), add=tuple(capabilities.get("add") or ()),
        no_new_privileges=context.get("allowPrivilegeEscalation") is False,
        privileged=bool(context.get("privileged", False)),
        seccomp=str(seccomp.get("type", "RuntimeDefault")))


def launch(pod: JsonObject, container: JsonObject, image: ImageEntry, lookup: Any, *,
           api_host: str, api_port: int) -> Launch:
    """The process for `container`, whose image runs here as `image` says."""
    real = image.runtime == "podman"
    env, secret_env = container_env(pod, container, lookup, api_host, api_port,
                                    image_env=None if real else image.env)
    command = tuple(expand(part, env) for part in container.get("command") or ())
    args = [expand(part, env) for part in container.get("args") or ()]
    if real:  # the image's own entrypoint, or the pod's command in its place
        return _launch(pod, container, env=env, secret_env=secret_env, argv=tuple(args),
                       image=image, entrypoint=command,
                       security=security(pod, container, image.user))
    if command:  # it replaces the entrypoint: only the image's own entrypoint can run here
        if command[:len(image.entrypoint)] != image.entrypoint:
            raise LaunchError("NoLocalBinary", f"command {' '.join(command)!r} of image "
                              f"{container['image']} has no local equivalent")
        args = [*command[len(image.entrypoint):], *args]
    return _launch(pod, container, env=env, secret_env=secret_env,
                   argv=(*image.local, *args), image=image)


def _launch(pod: JsonObject, container: JsonObject, *, env: dict[str, str],
            secret_env: frozenset[str], argv: tuple[str, ...], image: ImageEntry,
            **real: Any) -> Launch:
    mounts = tuple(Mount(m["name"], m["mountPath"], m.get("subPath", ""),
                         bool(m.get("readOnly", False)))
                   for m in container.get("volumeMounts") or [])
    uid, gid = user(pod, container, image.user)
    readiness, liveness, startup = (probe(container, which) for which in (
        "readinessProbe", "livenessProbe", "startupProbe"))
    if not real:
        readiness, liveness, startup = _no_exec(readiness), _no_exec(liveness), _no_exec(startup)
    declared = {int(p["containerPort"]) for p in container.get("ports") or []
                if p.get("protocol", "TCP") == "TCP"}
    ports = declared | {p.port for p in (readiness, liveness, startup)
                        if p.kind not in ("none", "exec")}
    if real:
        return Launch(container["name"], argv, env, mounts, uid, gid, readiness, liveness,
                      tuple(sorted(ports)), secret_env, runtime=image.runtime,
                      image=container["image"], startup=startup, **real)
    return Launch(container["name"], argv, env, mounts, uid, gid, readiness, liveness,
                  tuple(sorted(ports)), secret_env, image.files, image.local, startup=startup)


# --- status, as a kubelet would report it ---------------------------------------------------


def container_status(container: JsonObject, state: JsonObject, ready: bool, restarts: int,
                     last_state: JsonObject | None = None) -> JsonObject:
    status: JsonObject = {"name": container["name"], "image": container["image"],
                          "imageID": "", "ready": ready, "restartCount": restarts,
                          "started": "running" in state, "state": state}
    if last_state:
        status["lastState"] = last_state
    return status


def pod_conditions(ready: bool, message: str, now: str, initialized: bool = True,
                   ) -> list[JsonObject]:
    reason = "" if ready else "ContainersNotReady"
    text = "" if ready else message
    flag = "True" if ready else "False"
    return [{"type": "Initialized", "status": "True" if initialized else "False",
             "reason": "" if initialized else "ContainersNotInitialized",
             "lastTransitionTime": now},
            {"type": "ContainersReady", "status": flag, "reason": reason, "message": text,
             "lastTransitionTime": now},
            {"type": "Ready", "status": flag, "reason": reason, "message": text,
             "lastTransitionTime": now}]
