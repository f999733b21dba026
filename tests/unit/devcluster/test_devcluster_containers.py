"""How the simulated cluster runs a real image with podman (devcluster.containers): the
pod's securityContext, volumes, environment and network namespace on podman's command line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devcluster import containers, images, pods

IMAGE = "127.0.0.1:5000/external-secrets-operator@sha256:" + "a" * 64
RESTRICTED = {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
              "runAsNonRoot": True, "capabilities": {"drop": ["ALL"]},
              "seccompProfile": {"type": "RuntimeDefault"}}


def pod(container: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {"metadata": {"name": "op-1", "namespace": "eso", "uid": "u1"},
            "spec": {"containers": [container], **spec}, "status": {"podIP": "10.244.0.9"}}


def launch(container: dict[str, Any], **spec: Any) -> pods.Launch:
    return pods.launch(pod(container, **spec), container, images.pulled(), lambda *_: None,
                       api_host="10.0.0.1", api_port=443)


def command(spec: pods.Launch, tmp_path: Path) -> list[str]:
    return containers.run_command(spec, state_dir=tmp_path, name="k8s_manager_op-1_eso_u1_0",
                                  hostname="op-1", netns=Path("/proc/7/ns/net"),
                                  volumes=tmp_path / "volumes", pid_file=tmp_path / "pid",
                                  env_file=tmp_path / "env")


def test_the_restricted_profile_becomes_podmans_flags(tmp_path: Path) -> None:
    spec = launch({"name": "manager", "image": IMAGE, "args": ["run", "--leader-elect"],
                   "securityContext": RESTRICTED, "volumeMounts": [
                       {"name": "tmp", "mountPath": "/tmp"},  # noqa: S108 (in the container)
                       {"name": "token", "mountPath": "/var/run/secrets/sa", "readOnly": True}]})
    argv = command(spec, tmp_path)
    # The image's own entrypoint and user: no --entrypoint, no --user.
    assert argv[-3:] == [IMAGE, "run", "--leader-elect"]
    assert not [a for a in argv if a.startswith(("--entrypoint", "--user"))]
    for flag in ("--read-only", "--read-only-tmpfs=false", "--cap-drop=ALL",
                 "--security-opt=no-new-privileges", "--network=ns:/proc/7/ns/net",
                 "--pull=missing", "--tls-verify=false", "--http-proxy=false",
                 f"--volume={tmp_path}/volumes/tmp:/tmp:rw",
                 f"--volume={tmp_path}/volumes/token:/var/run/secrets/sa:ro",
                 f"--env-file={tmp_path}/env", f"--pidfile={tmp_path}/pid"):
        assert flag in argv, flag
    assert "--privileged" not in argv
    assert not [a for a in argv if "seccomp" in a]  # RuntimeDefault: podman's profile


def test_user_group_command_and_an_unconfined_profile(tmp_path: Path) -> None:
    spec = launch({"name": "c", "image": "quay.io/x/y:v1", "command": ["/bin/sh", "-c"],
                   "args": ["true"], "securityContext": {"runAsGroup": 5,
                                                         "capabilities": {"add": ["NET_RAW"]}}},
                  securityContext={"runAsUser": 2000, "seccompProfile": {"type": "Unconfined"}})
    argv = command(spec, tmp_path)
    assert argv[-4:] == ["--entrypoint=/bin/sh", "quay.io/x/y:v1", "-c", "true"]
    assert "--user=2000:5" in argv
    assert "--cap-add=NET_RAW" in argv
    assert "--security-opt=seccomp=unconfined" in argv
    assert "--tls-verify=false" not in argv  # only a registry on loopback is plain HTTP
    assert "--read-only" not in argv


def test_root_under_run_as_non_root_is_refused() -> None:
    with pytest.raises(pods.LaunchError):
        launch({"name": "c", "image": IMAGE, "securityContext": {"runAsNonRoot": True,
                                                                 "runAsUser": 0}})


def test_the_environment_is_the_pods_only_and_goes_to_a_private_file(tmp_path: Path) -> None:
    spec = launch({"name": "c", "image": IMAGE, "env": [{"name": "A", "value": "1"}]})
    assert "PATH" not in spec.env  # the image's own PATH stays
    assert spec.env["A"] == "1"
    assert spec.env["KUBERNETES_SERVICE_HOST"] == "10.0.0.1"
    path = tmp_path / "env"
    containers.write_env_file(spec.env, path)
    assert "A=1\n" in path.read_text()
    assert path.stat().st_mode & 0o077 == 0
    with pytest.raises(pods.LaunchError):
        containers.write_env_file({"B": "two\nlines"}, tmp_path / "other")


def test_the_image_map_keeps_the_runtime(tmp_path: Path) -> None:
    path = tmp_path / "images.json"
    images.save({IMAGE: images.pulled()}, path)
    entry = images.find(images.load(path), IMAGE)
    assert entry is not None
    assert entry.runtime == "podman"


def test_container_names_follow_the_pod_and_attempt() -> None:
    name = containers.container_name(pod({"name": "manager"}), "manager", 2)
    assert name == "k8s_manager_op-1_eso_u1_2"
    assert containers.on_loopback("localhost:5000/a/b@sha256:1")
    assert not containers.on_loopback("registry.example/a")


def test_the_run_state_path_stays_under_podmans_limit(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 200)
    assert len(str(containers.run_root(deep) / "run")) <= 50
    assert containers.run_root(deep) != containers.run_root(tmp_path)
