"""How the simulated cluster turns a pod's container into a process (devcluster.pods)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster import images, pods
from devcluster.api import ApiError
from devcluster.runner import (
    BACKOFF_RESET_SECONDS,
    Container,
    Volumes,
    exit_code,
    host_paths,
    mount_script,
    pre_stop_sleep,
    restart_delay,
)

OPERAND = pods.ImageEntry(("/bin/external-secrets",), ("/cache/external-secrets",), 65534)


def pod(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "webhook-1", "namespace": "es", "uid": "u1"},
            "spec": {"serviceAccountName": "sa", "containers": [container], **spec},
            "status": {"podIP": "10.244.0.7"}}


def lookup(kind: str, name: str, key: str | None) -> Any:
    values = {("Secret", "creds"): {"token": "s3cr3t"}, ("ConfigMap", "cfg"): {"level": "info"}}
    data = values.get((kind, name))
    return data if key is None or data is None else data.get(key)


def launch(container: dict[str, Any], **spec: Any) -> pods.Launch:
    return pods.launch(pod(container, **spec), container, OPERAND, lookup,
                       api_host="127.0.0.1", api_port=6443)


def test_the_arguments_reach_the_process_unchanged_after_the_local_entrypoint() -> None:
    started = launch({"name": "webhook", "image": "x", "args": ["webhook", "--port=10250",
                                                                "--metrics-addr=:8080"]})
    assert started.argv == ("/cache/external-secrets", "webhook", "--port=10250",
                            "--metrics-addr=:8080")


def test_a_command_naming_the_entrypoint_runs_locally_and_others_are_refused() -> None:
    started = launch({"name": "c", "image": "x", "command": ["/bin/external-secrets", "webhook"],
                      "args": ["--port=1"]})
    assert started.argv == ("/cache/external-secrets", "webhook", "--port=1")
    with pytest.raises(pods.LaunchError) as refused:
        launch({"name": "c", "image": "x", "command": ["/bin/sh", "-c", "true"]})
    assert refused.value.reason == "NoLocalBinary"


def test_environment_from_fields_secrets_and_config_maps_with_expansion() -> None:
    started = launch({"name": "c", "image": "x", "args": ["--ns=$(NS)", "$$(NS)"], "env": [
        {"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
        {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "level"}}},
        {"name": "URL", "value": "https://$(IP):1"}]})
    assert started.argv[1:] == ("--ns=es", "$(NS)")
    assert started.env["NS"] == "es"
    assert started.env["URL"] == "https://10.244.0.7:1"
    assert started.env["TOKEN"] == "s3cr3t"
    assert started.env["LEVEL"] == "info"
    assert started.env["KUBERNETES_SERVICE_HOST"] == "127.0.0.1"
    assert started.env["KUBERNETES_SERVICE_PORT"] == "6443"
    assert started.secret_env == frozenset({"TOKEN"})


def test_a_missing_secret_key_is_a_config_error_unless_optional() -> None:
    missing = {"name": "T", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "nope"}}}
    with pytest.raises(pods.LaunchError) as refused:
        launch({"name": "c", "image": "x", "env": [missing]})
    assert refused.value.reason == "CreateContainerConfigError"
    missing["valueFrom"]["secretKeyRef"]["optional"] = True  # type: ignore[index]
    assert "T" not in launch({"name": "c", "image": "x", "env": [missing]}).env


def test_declared_and_probe_ports_are_exposed_and_named_ports_resolve() -> None:
    started = launch({"name": "c", "image": "x",
                      "ports": [{"name": "ready", "containerPort": 8081},
                                {"containerPort": 53, "protocol": "UDP"}],
                      "readinessProbe": {"httpGet": {"path": "/readyz", "port": "ready"},
                                         "initialDelaySeconds": 20, "periodSeconds": 5},
                      "livenessProbe": {"tcpSocket": {"port": 9000}}})
    assert started.ports == (8081, 9000)
    assert started.readiness == pods.Probe("http", 8081, "/readyz", 5.0, 20.0, 3)
    assert started.liveness.kind == "tcp"


def test_the_user_comes_from_the_container_then_the_pod_then_the_image() -> None:
    assert launch({"name": "c", "image": "x"}).uid == 65534
    assert launch({"name": "c", "image": "x"}, securityContext={"runAsUser": 1000}).uid == 1000
    assert launch({"name": "c", "image": "x", "securityContext": {"runAsUser": 7}},
                  securityContext={"runAsUser": 1000}).uid == 7
    with pytest.raises(pods.LaunchError):
        launch({"name": "c", "image": "x", "securityContext": {"runAsUser": 0,
                                                               "runAsNonRoot": True}})


@pytest.mark.parametrize(("image", "repository"), [
    ("ghcr.io/external-secrets/external-secrets:v1.3.2", images.OPERAND_REPOSITORY),
    ("ghcr.io/external-secrets/external-secrets@sha256:abc", images.OPERAND_REPOSITORY),
    ("localhost:5000/team/app:1", "localhost:5000/team/app"),
])
def test_images_match_by_repository(image: str, repository: str) -> None:
    assert images.repository(image) == repository


def test_host_paths_the_command_needs_survive_the_fresh_tmp(tmp_path: Path) -> None:
    """A cache or source tree under /tmp (a CI home, a release worktree) would be hidden by the
    pod's fresh /tmp: it is bound back at its own path in the pod's root, before the volumes."""
    binary = tmp_path / "bin" / "external-secrets"
    binary.parent.mkdir()
    binary.touch()
    source = tmp_path / "release"
    source.mkdir()
    started = pods.Launch("c", (str(binary), "--flag"), {"PYTHONPATH": f"{source}:relative"},
                          (pods.Mount("certs", "/tmp/certs"),), 65534, 65534,  # noqa: S108
                          pods.Probe("none"), pods.Probe("none"), ())
    assert host_paths(started) == [binary.parent, source]
    script = mount_script(started, tmp_path / "volumes")
    lines = script.splitlines()
    fresh_tmp = lines.index("mount -t tmpfs -o mode=1777 tmpfs /mnt/tmp")
    assert lines.index(f"mount --bind {binary.parent} /mnt{binary.parent}") > fresh_tmp
    assert lines.index(f"mount --bind {source} /mnt{source}") > fresh_tmp
    assert lines.index(f"mount --bind {tmp_path}/volumes/certs /mnt/tmp/certs") > lines.index(
        f"mount --bind {source} /mnt{source}")
    assert lines[-1].startswith("exec chroot /mnt ")


def test_a_file_the_local_command_names_survives_the_fresh_tmp(tmp_path: Path) -> None:
    """OLM's util image runs `cp -Rv CACHE/cpb /util/cpb` here: the cache is kept, the
    container's own argument (/util/cpb) is not a host path."""
    cpb = tmp_path / "olm" / "bin" / "cpb"
    cpb.parent.mkdir(parents=True)
    cpb.touch()
    util = pods.ImageEntry(("/bin/cp", "-Rv", "/bin/cpb"), ("cp", "-Rv", str(cpb)), 0)
    pod = {"metadata": {"name": "unpack", "namespace": "olm"}, "spec": {}}
    container = {"name": "util", "image": "quay.io/operator-framework/olm:v0.42.0",
                 "command": ["/bin/cp", "-Rv", "/bin/cpb", "/util/cpb"]}
    started = pods.launch(pod, container, util, lambda *_: None, api_host="127.0.0.1",
                          api_port=6443)
    assert started.argv == ("cp", "-Rv", str(cpb), "/util/cpb")
    assert host_paths(started) == [cpb.parent]


def test_nothing_is_bound_back_for_commands_outside_tmp_and_run() -> None:
    started = pods.Launch("c", ("/usr/bin/env",), {}, (), 0, 0, pods.Probe("none"),
                          pods.Probe("none"), ())
    assert host_paths(started) == []


def test_a_killed_process_reports_128_plus_the_signal_as_a_runtime_does() -> None:
    assert exit_code(-9) == 137
    assert exit_code(-15) == 143
    assert exit_code(0) == 0
    assert exit_code(2) == 2


def test_the_first_crash_restarts_at_once_and_a_loop_backs_off_as_a_kubelet_does() -> None:
    assert [restart_delay(n) for n in range(1, 9)] == [0.0, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]


def test_a_container_that_never_starts_backs_off_too() -> None:
    """podman failing to create the container ends each run before it was running: a loop
    of those backs off like any crash loop (it used to count as a long run, restarting at
    once, hundreds of times a minute)."""
    never = Container({"name": "registry-server"})
    assert [never.crashed(moment) for moment in (1000.0, 1001.0, 1003.0)] == [0.0, 1.0, 2.0]
    assert never.restarts == 3


def test_a_long_run_ends_the_crash_loop() -> None:
    long_lived = Container({"name": "webhook"}, crashes_in_a_row=5, started_at=100.0,
                           state={"running": {"startedAt": "then"}})
    assert long_lived.crashed(100.0 + BACKOFF_RESET_SECONDS) == 0.0
    short_lived = Container({"name": "webhook"}, crashes_in_a_row=5, started_at=100.0,
                            state={"running": {"startedAt": "then"}})
    assert short_lived.crashed(101.0) == restart_delay(6)


def test_a_pre_stop_sleep_is_read_and_other_hooks_are_not() -> None:
    assert pre_stop_sleep({"lifecycle": {"preStop": {"sleep": {"seconds": 5}}}}) == 5.0
    assert pre_stop_sleep({"lifecycle": {"preStop": {"exec": {"command": ["sleep", "5"]}}}}) == 0
    assert pre_stop_sleep({"name": "x"}) == 0


class _FlakyApi:
    """An API server that answers until `down` is set, then fails as `failure` says: a
    fake, because the real one cannot be made to answer the runner's next read so on cue."""

    down = False

    def __init__(self, failure: Exception) -> None:
        self.failure = failure

    def get(self, _path: str) -> dict[str, Any] | None:
        if self.down:
            raise self.failure
        return {"data": {"ca.crt": "Q0E="}}


@pytest.mark.parametrize("failure", [
    ConnectionRefusedError(111, "Connection refused"),  # stopped
    ApiError(503, "apiserver is shutting down"),  # stopping (CI emulation 10 met it)
])
def test_volumes_keep_their_files_while_the_api_server_is_down(tmp_path: Path,
                                                                failure: Exception) -> None:
    api = _FlakyApi(failure)
    volumes = Volumes(api, pod({"name": "x"}, volumes=[  # type: ignore[arg-type] (a fake Api)
        {"name": "certs", "secret": {"secretName": "tls"}}]), tmp_path)
    api.down = True
    assert volumes.refresh() is False, "never written: not ready"
    api.down = False
    assert volumes.refresh() is True
    api.down = True
    assert volumes.refresh() is True, "written once: the container keeps running"
    assert "cannot be reached" in volumes.missing
    assert (tmp_path / "certs" / "ca.crt").read_bytes() == b"CA"


def test_a_restarted_container_gets_the_whole_liveness_threshold_again() -> None:
    """A process killed by its liveness probe (3 failures) starts over: one failed probe of
    the new process must not kill it again (before, every restart died at its first probe,
    a crash loop a kubelet does not have: the OLM upgrade to a rebuilt release found it)."""
    spec = launch({"name": "c", "image": "x", "livenessProbe": {
        "httpGet": {"path": "/healthz", "port": 8081}, "initialDelaySeconds": 15}})
    container = Container({"name": "c"})
    container.running(spec)
    first = container.started_at
    container.liveness_failures = spec.liveness.failure_threshold  # killed for it
    container.running(spec)
    assert container.liveness_failures == 0
    assert "running" in container.state
    assert container.started_at >= first  # the liveness delay counts from the new start


GRPC_PROBE = {"exec": {"command": ["grpc_health_probe", "-addr=:50051", "-rpc-timeout=5s"]},
              "timeoutSeconds": 5}
REGISTRY_SERVER = {"name": "registry-server", "image": "r/catalog@sha256:1",
                   "ports": [{"name": "grpc", "containerPort": 50051}],
                   "readinessProbe": {**GRPC_PROBE, "initialDelaySeconds": 5},
                   "livenessProbe": {**GRPC_PROBE, "initialDelaySeconds": 10},
                   "startupProbe": {**GRPC_PROBE, "failureThreshold": 10, "periodSeconds": 10}}


def test_exec_probes_run_in_a_real_image_only() -> None:
    """OLM's registry pod: its exec probes run in the podman container (the command is the
    image's); a local process has no image to run them in, so they are not run."""
    real = pods.launch(pod(REGISTRY_SERVER), REGISTRY_SERVER, images.pulled(1001), lookup,
                       api_host="127.0.0.1", api_port=6443)
    command = ("grpc_health_probe", "-addr=:50051", "-rpc-timeout=5s")
    assert real.readiness == pods.Probe("exec", 0, "", 10.0, 5.0, 3, command, 5.0)
    assert real.liveness.command == command
    assert real.startup == pods.Probe("exec", 0, "", 10.0, 0.0, 10, command, 5.0)
    assert real.ports == (50051,)
    local = launch(REGISTRY_SERVER)
    assert {local.readiness.kind, local.liveness.kind, local.startup.kind} == {"none"}


def test_a_startup_probe_holds_the_others_back_until_it_succeeds() -> None:
    real = pods.launch(pod(REGISTRY_SERVER), REGISTRY_SERVER, images.pulled(1001), lookup,
                       api_host="127.0.0.1", api_port=6443)
    container = Container(REGISTRY_SERVER)
    container.running(real)
    assert not container.started_up
    assert not container.ready
    container.running(launch({"name": "c", "image": "x"}))  # no startup probe: started
    assert container.started_up
