"""The operand's images (hack/operand-image.sh, `make operand-images`): external-secrets and
bitwarden-sdk-server, built here from the binaries of the pinned releases, laid out as
upstream's images are (entrypoint, user, state directory) and run as the operand's
Deployments run them on OpenShift: an arbitrary UID in group 0 with no /etc/passwd entry, a
read-only root filesystem, no capabilities, no privilege escalation.

- external-secrets: `/bin/external-secrets --help` lists the controller's commands (the
  webhook and cert-controller are the same binary);
- bitwarden-sdk-server: `serve` starts with the TLS key pair mounted at /certs, as the
  Deployment mounts its Secret, and answers /live and /ready over HTTPS with that
  certificate; nothing else is writable, and nothing it needs at start is missing.

podman runs the containers in the test's network namespace (only `lo`: hack/netns-run.sh).
The images are built before the tests (`make test-images-built`; the script here only finds
them, or builds them from the cached binaries); IMAGE_TESTS=require turns a missing podman
or image into a failure instead of a skip."""

from __future__ import annotations

import contextlib
import json
import os
import re
import ssl
import stat
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devcluster import controlplane
from devcluster import images as image_map
from manager import versions
from manager.paths import REPO_ROOT
from tests.certificates import self_signed_ca, signed_key_pair
from tests.e2e.operator_process import free_port
from tests.images.test_operator_image import USER, limits, root_is_read_only

OPERAND_IMAGE = REPO_ROOT / "hack" / "operand-image.sh"
ARBITRARY_UID = int(USER.split(":")[0])
RESTRICTED = ["--read-only", "--read-only-tmpfs=false", f"--user={USER}", "--passwd=false",
              "--cap-drop=ALL", "--security-opt=no-new-privileges"]


def required(problem: str) -> None:
    if os.environ.get("IMAGE_TESTS") == "require":
        pytest.fail(problem)
    pytest.skip(problem)


def operand_image(name: str) -> str:
    """The image's local reference (hack/operand-image.sh: cached by its inputs)."""
    if subprocess.run(["podman", "--version"], capture_output=True, check=False).returncode:
        required("podman is not installed")
    made = subprocess.run(["bash", str(OPERAND_IMAGE), name], capture_output=True, text=True,
                          check=False, timeout=900)
    if made.returncode != 0:
        required(f"no {name} image (make operand-images): {made.stderr.strip()[-2000:]}")
    return made.stdout.strip()


@pytest.fixture(scope="module")
def external_secrets() -> str:
    return operand_image("external-secrets")


@pytest.fixture(scope="module")
def bitwarden() -> str:
    return operand_image("bitwarden-sdk-server")


def inspect(image: str) -> dict[str, Any]:
    result = subprocess.run(["podman", "image", "inspect", image], capture_output=True,
                            text=True, check=True)
    found: dict[str, Any] = json.loads(result.stdout)[0]
    return found


@contextlib.contextmanager
def image_files(image: str) -> Iterator[Path]:
    """The image's root, mounted read-only for the duration."""
    mount = subprocess.run(["podman", "image", "mount", image], capture_output=True, text=True,
                           check=True).stdout.strip()
    try:
        yield Path(mount)
    finally:
        subprocess.run(["podman", "image", "unmount", image], capture_output=True, check=False)


def test_external_secrets_is_laid_out_as_upstreams(external_secrets: str) -> None:
    config = inspect(external_secrets)["Config"]
    assert config["Entrypoint"] == list(image_map.OPERAND_ENTRYPOINT) == ["/bin/external-secrets"]
    assert config["User"] == str(image_map.NOBODY) == "65534"
    assert config["Labels"]["org.opencontainers.image.version"] == \
        versions.EXTERNAL_SECRETS_VERSION
    with image_files(external_secrets) as root:
        # Nothing but the binary, what it links, the CA bundle and the user database: no
        # shell, no package manager.
        assert not (root / "bin" / "sh").exists()
        assert (root / "etc/ssl/certs/ca-certificates.crt").read_text().count(
            "BEGIN CERTIFICATE") > 100
        assert "nobody:x:65534:" in (root / "etc/passwd").read_text()


def test_external_secrets_runs_restricted_offline(external_secrets: str) -> None:
    """`--help` as an arbitrary UID in group 0, read-only root, no capabilities, no network:
    the binary's commands, the controller's flags."""
    result = subprocess.run(["podman", "run", "--rm", "--network=none", *limits(), *RESTRICTED,
                             external_secrets, "--help"],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    for command in ("webhook", "certcontroller"):
        assert re.search(rf"^\s+{command}\s", result.stdout, re.M), result.stdout
    assert "--enable-leader-election" in result.stdout, result.stdout


def test_bitwarden_is_laid_out_as_upstreams(bitwarden: str) -> None:
    config = inspect(bitwarden)["Config"]
    assert config["Entrypoint"] == list(image_map.BITWARDEN_ENTRYPOINT) == [
        "/bitwarden-sdk-server", "serve"]
    assert config["User"] == str(image_map.BITWARDEN_USER) == "65532"
    assert "BW_SECRETS_MANAGER_STATE_PATH=/state" in config["Env"]
    assert dict(image_map.BITWARDEN_ENV) == {"BW_SECRETS_MANAGER_STATE_PATH": "/state"}
    assert sorted(config["ExposedPorts"]) == ["9998/tcp"]
    assert config["Labels"]["org.opencontainers.image.version"] == \
        versions.BITWARDEN_SDK_SERVER_VERSION
    with image_files(bitwarden) as root:
        # The SDK's state directory: the image's user's, and group 0's (OpenShift's arbitrary
        # UIDs), writable where it is a volume or the root is writable.
        state = (root / "state").stat()
        assert (state.st_uid, state.st_gid) == (image_map.BITWARDEN_USER, 0)
        assert stat.S_IMODE(state.st_mode) == 0o770
        # cgo: glibc's libraries, which it links (`serve` below shows they are enough).
        libraries = {p.name for p in root.rglob("*.so*")}
        assert {"libc.so.6", "libm.so.6"} <= libraries, libraries
        assert "nonroot:x:65532:" in (root / "etc/passwd").read_text()


@pytest.fixture
def key_pair(tmp_path: Path) -> tuple[Path, bytes]:
    """cert.pem and key.pem (and the CA) as the Deployment mounts its Secret at /certs:
    readable by any UID, as a Secret volume is to the pod's."""
    ca = tmp_path / "ca"
    ca.mkdir()
    self_signed_ca(ca, "bitwarden-ca")
    cert, key = signed_key_pair(ca, "bitwarden-ca", "server", ("localhost",))
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "cert.pem").write_bytes(cert)
    (certs / "key.pem").write_bytes(key)
    for path in (certs, *certs.iterdir()):
        path.chmod(0o755 if path.is_dir() else 0o644)
    return certs, (ca / "bitwarden-ca.crt").read_bytes()


def get(port: int, path: str, ca: bytes) -> tuple[int, str] | None:
    """GET https://localhost:PORT/PATH, verified with `ca`; None while nothing answers."""
    context = ssl.create_default_context(cadata=ca.decode())
    try:
        with urllib.request.urlopen(f"https://localhost:{port}/{path}", timeout=2,
                                    context=context) as response:
            return response.status, response.read().decode()
    except (urllib.error.URLError, OSError):
        return None


def test_bitwarden_serves_restricted(bitwarden: str, key_pair: tuple[Path, bytes]) -> None:
    """`serve` (the image's entrypoint, no arguments but the address) as an arbitrary UID
    with a read-only root and only the key pair mounted: /live and /ready over HTTPS with
    the mounted certificate."""
    controlplane.require_loopback_only_network()  # --network=host is this namespace
    certs, ca = key_pair
    port = free_port()
    name = f"eso-bitwarden-smoke-{port}"
    subprocess.run(["podman", "run", "--detach", f"--name={name}", "--network=host", *limits(),
                    *RESTRICTED, f"--volume={certs}:/certs:ro", bitwarden,
                    f"--hostname=127.0.0.1:{port}"],
                   check=True, capture_output=True, timeout=60)
    try:
        deadline = time.monotonic() + 30
        while get(port, "live", ca) is None:
            state = _inspect(name)["State"]
            assert state["Running"], f"exited {state['ExitCode']}: {_logs(name)}"
            assert time.monotonic() < deadline, f"no answer in 30 s: {_logs(name)}"
            time.sleep(0.2)
        answers = [get(port, path, ca) for path in ("live", "ready")]
        assert answers == [(200, "live"), (200, "ready")], answers
        pid = _inspect(name)["State"]["Pid"]
        status = Path(f"/proc/{pid}/status").read_text()
        assert re.search(rf"^Uid:\s+{ARBITRARY_UID}\s", status, re.M), status
        assert re.search(r"^Gid:\s+0\s", status, re.M), status
        assert re.search(r"^CapEff:\s+0+$", status, re.M), status
        assert root_is_read_only(pid)
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[:2]
        assert command == [b"/bitwarden-sdk-server", b"serve"], command
    finally:
        subprocess.run(["podman", "rm", "--force", "--time=0", name], capture_output=True,
                       check=False, timeout=60)


def _inspect(name: str) -> dict[str, Any]:
    result = subprocess.run(["podman", "container", "inspect", name], capture_output=True,
                            text=True, check=True)
    found: dict[str, Any] = json.loads(result.stdout)[0]
    return found


def _logs(name: str) -> str:
    return subprocess.run(["podman", "logs", name], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False).stdout[-3000:]
