"""The operator image (`make image`) runs as a pod would run it: the Deployment's own
arguments, an arbitrary UID in group 0 with no /etc/passwd entry (as on a cluster whose runtime
adds none), a read-only root filesystem with /tmp as its only writable volume, no capabilities,
no privilege escalation. It starts against the session's API server, answers liveness,
serves /metrics over HTTPS with its self-signed certificate, and writes nothing outside /tmp.

podman runs it in the test's network namespace (`--network=host` here is that namespace,
whose only interface is `lo`: hack/netns-run.sh), so it reaches the simulated API server and
no packet leaves loopback. The image is built before the tests (`make test` runs `make
image`); IMAGE_TESTS=require (set by .ci/run) turns a missing podman or image into a failure
instead of a skip."""

from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from devcluster import controlplane
from manager import __version__
from manager.client.kube import Kube, install_crds
from manager.paths import REPO_ROOT
from manager.runtime.operator import CRDS_DIR, load_crds
from tests.conftest import Cluster
from tests.e2e.operator_process import assert_log_clean, free_port
from tests.metrics_scrape import get_metrics_sync

IMAGE = os.environ.get(
    "OPERATOR_IMAGE", f"quay.io/external-secrets-operator/external-secrets-operator:v{__version__}")
DEPLOYMENT = REPO_ROOT / "manifests" / "operator" / "deployment.yaml"
NAMESPACE = "eso-image-smoke"  # the container's POD_NAMESPACE: its Lease and nothing else
USER = "1000770000:0"  # an OpenShift-style arbitrary UID, group 0
FIELD_MANAGER = "image-tests"


def podman() -> str:
    tool = shutil.which("podman")
    required = os.environ.get("IMAGE_TESTS") == "require"
    problem = None
    if tool is None:
        problem = "podman is not installed"
    elif subprocess.run([tool, "image", "exists", IMAGE], check=False).returncode != 0:
        problem = f"no image {IMAGE}: run `make image`"
    if problem:
        if required:
            pytest.fail(problem)
        pytest.skip(problem)
    assert tool is not None
    return tool


def limits() -> list[str]:
    """podman's default rlimits exceed what a sandbox may grant (runc: `error setting rlimit
    type 7`): the container gets limits below this process's hard ones (nproc at the hard
    limit itself was refused too)."""
    flags = []
    for name, limit, wanted in (("nofile", resource.RLIMIT_NOFILE, 8192),
                                ("nproc", resource.RLIMIT_NPROC, 4096)):
        hard = resource.getrlimit(limit)[1]
        value = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard // 2)
        flags.append(f"--ulimit={name}={value}:{value}")
    return flags


def deployment_container() -> dict[str, Any]:
    deployment = yaml.safe_load(DEPLOYMENT.read_text())
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def container_ports() -> dict[str, int]:
    return {port["name"]: port["containerPort"] for port in deployment_container()["ports"]}


@pytest.fixture(scope="module")
def tool() -> str:
    return podman()


@pytest.fixture(scope="module")
def image_config(tool: str) -> dict[str, Any]:
    result = subprocess.run([tool, "image", "inspect", IMAGE], capture_output=True, text=True,
                            check=True)
    config: dict[str, Any] = json.loads(result.stdout)[0]["Config"]
    return config


def test_cmd_and_exposed_ports_are_the_deployments(image_config: dict[str, Any]) -> None:
    """`podman run IMAGE` serves liveness where the Deployment probes it, and EXPOSE names
    the Deployment's ports (metrics keep their default, :8080)."""
    ports = container_ports()
    assert image_config["Cmd"] == ["run", f"--liveness=http://0.0.0.0:{ports['health']}/healthz"]
    assert "--metrics-addr=:8080" in deployment_container()["args"]
    assert sorted(image_config["ExposedPorts"]) == sorted(f"{port}/tcp" for port in
                                                          ports.values())
    assert image_config["User"] == "1001"


def run_once(tool: str, *args: str, entrypoint: str | None = None,
             ) -> subprocess.CompletedProcess[str]:
    replaced = [f"--entrypoint={entrypoint}"] if entrypoint else []
    return subprocess.run([tool, "run", "--rm", "--network=none", *limits(), "--read-only",
                           f"--user={USER}", "--passwd=false", *replaced, IMAGE, *args],
                          capture_output=True, text=True, timeout=120, check=False)


def test_help_and_render_need_no_network_and_no_writable_root(tool: str) -> None:
    """--help works offline; `render` proves the operand templates are in the image."""
    result = run_once(tool, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: python -m manager" in result.stdout
    for command in ("run", "render", "gather"):
        assert command in result.stdout
    # The must-gather entry point (`oc adm must-gather --image=IMAGE` runs it).
    gather = run_once(tool, "--help", entrypoint="/usr/bin/gather")
    assert gather.returncode == 0, gather.stderr
    assert "usage: python -m manager gather" in gather.stdout
    render = subprocess.run(
        [tool, "run", "--rm", "--network=none", *limits(), "--read-only", f"--user={USER}",
         "--passwd=false", f"--volume={REPO_ROOT / 'samples'}:/samples:ro", IMAGE,
         "render", "-f", "/samples/esc-default.yaml"],
        capture_output=True, text=True, timeout=120, check=False)
    assert render.returncode == 0, render.stderr
    kinds = {doc["kind"] for doc in yaml.safe_load_all(render.stdout) if doc}
    assert {"Deployment", "ValidatingWebhookConfiguration", "Service"} <= kinds, kinds


ESM = "/apis/operator.openshift.io/v1alpha1/externalsecretsmanagers/cluster"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def smoke_namespace(kube: Kube) -> AsyncIterator[str]:
    """The container's namespace; afterwards the session's cluster is left as found (the
    operator creates ExternalSecretsManager/cluster at start when there is none)."""
    await install_crds(kube, load_crds(CRDS_DIR), field_manager=FIELD_MANAGER)
    esm_before = await kube.get(ESM)
    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        field_manager=FIELD_MANAGER)
    yield NAMESPACE
    await kube.delete(f"/api/v1/namespaces/{NAMESPACE}")
    if esm_before is None:
        esm = await kube.get(ESM)
        if esm is not None:
            await kube.delete(ESM, uid=esm["metadata"]["uid"])


class Container:
    """The operator image as the Deployment's container; `podman rm` when done."""

    def __init__(self, tool: str, kubeconfig: Path, workdir: Path) -> None:
        self.tool = tool
        self.name = f"eso-image-smoke-{os.getpid()}"
        self.liveness_port, self.metrics_port = free_port(), free_port()
        # The kubeconfig in place of the ServiceAccount token, readable by the container's
        # UID (the session's copy is the admin's own, mode 0600).
        self.kubeconfig = workdir / "kubeconfig"
        shutil.copyfile(kubeconfig, self.kubeconfig)
        self.kubeconfig.chmod(0o644)

    def arguments(self) -> list[str]:
        """The Deployment's arguments, its ports moved to free ones on loopback (the
        namespace is shared with the session's pods)."""
        moved = [argument.replace("0.0.0.0:8081", f"127.0.0.1:{self.liveness_port}")
                 .replace("=:8080", f"=127.0.0.1:{self.metrics_port}")
                 for argument in deployment_container()["args"]]
        assert f"--liveness=http://127.0.0.1:{self.liveness_port}/healthz" in moved
        assert f"--metrics-addr=127.0.0.1:{self.metrics_port}" in moved
        return moved

    def start(self) -> None:
        subprocess.run([
            self.tool, "run", "--detach", f"--name={self.name}", "--network=host", *limits(),
            "--read-only", "--read-only-tmpfs=false", "--tmpfs=/tmp:size=64m",
            f"--user={USER}", "--passwd=false", "--cap-drop=ALL",
            "--security-opt=no-new-privileges",
            f"--volume={self.kubeconfig}:/var/run/kube/config:ro",
            "--env=KUBECONFIG=/var/run/kube/config", f"--env=POD_NAMESPACE={NAMESPACE}",
            f"--env=POD_NAME={self.name}", IMAGE, *self.arguments()],
            check=True, capture_output=True, timeout=60)

    def inspect(self) -> dict[str, Any]:
        result = subprocess.run([self.tool, "container", "inspect", self.name],
                                capture_output=True, text=True, check=True)
        state: dict[str, Any] = json.loads(result.stdout)[0]
        return state

    def logs(self) -> str:
        return subprocess.run([self.tool, "logs", self.name], stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, check=False).stdout

    def live(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.liveness_port}/healthz",
                                        timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_live(self, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while not self.live():
            state = self.inspect()["State"]
            assert state["Running"], f"exited with {state['ExitCode']}:\n{self.logs()[-3000:]}"
            assert time.monotonic() < deadline, f"not live after {timeout}s:\n{self.logs()}"
            time.sleep(0.5)

    def stop(self) -> int:
        subprocess.run([self.tool, "stop", "--time=30", self.name], capture_output=True,
                       check=False, timeout=60)
        code: int = self.inspect()["State"]["ExitCode"]
        return code

    def remove(self) -> None:
        subprocess.run([self.tool, "rm", "--force", self.name], capture_output=True,
                       check=False, timeout=60)


@pytest.fixture
def container(tool: str, cluster: Cluster, smoke_namespace: str,
              tmp_path: Path) -> Iterator[Container]:
    controlplane.require_loopback_only_network()  # --network=host is this namespace
    running = Container(tool, cluster.kubeconfig, tmp_path)
    yield running
    running.remove()


def test_runs_as_the_deployment_runs_it(container: Container, cluster: Cluster) -> None:
    container.start()
    container.wait_live()
    state = container.inspect()["State"]
    status = Path(f"/proc/{state['Pid']}/status").read_text()
    assert re.search(r"^Uid:\s+1000770000\s", status, re.M), status
    assert re.search(r"^Gid:\s+0\s", status, re.M), status
    assert re.search(r"^CapEff:\s+0+$", status, re.M), status
    assert re.search(r"^NoNewPrivs:\s+1$", status, re.M), status
    assert root_is_read_only(state["Pid"])
    command = Path(f"/proc/{state['Pid']}/cmdline").read_bytes().split(b"\0")[:4]
    assert command == [b"/opt/operator/bin/python", b"-m", b"manager", b"run"], command

    token = yaml.safe_load(cluster.kubeconfig.read_text())["users"][0]["user"]["token"]
    metrics = get_metrics_sync(container.metrics_port, token)
    assert "eso_operator_api_requests_total" in metrics
    log = container.logs()
    assert "action=metrics-certificate source=self-signed " in log, log[:2000]
    assert " action=start " in log, log[-2000:]

    code = container.stop()
    log = container.logs()
    assert code == 0, log[-3000:]
    assert_log_clean(log, f"the operator image's container {container.name}")
    assert "Read-only file system" not in log  # nothing it tried to write failed


def root_is_read_only(pid: int) -> bool:
    """The container's / as its process sees it (/proc/PID/mountinfo: mount point, options)."""
    for line in Path(f"/proc/{pid}/mountinfo").read_text().splitlines():
        fields = line.split()
        if fields[4] == "/":
            return "ro" in fields[5].split(",")
    raise AssertionError("no root mount")
