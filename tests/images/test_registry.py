"""The operator, operand, bundle and catalog images through a registry on loopback
(hack/publish-images.sh, devcluster/registry.py): each pushed and named by digest, the bundle's
CSV naming the operator image's digest and the operand images' (its RELATED_IMAGE_* variables
and relatedImages alike), the catalog naming the bundle's, and the catalog image serving as
OLM's registry pod would run it; OLM's util and opm images pushed beside them, holding the
pinned binaries. The images are pulled into a container store of the test's own, as a fresh
node would pull them. The registry listens only in the test's network namespace
(hack/netns-run.sh: only `lo`)."""

from __future__ import annotations

import hashlib
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devcluster import controlplane
from devcluster.registry import Registry
from manager.olm import bundle
from manager.paths import REPO_ROOT
from tests.e2e.operator_process import free_port
from tests.images.test_operand_images import operand_image
from tests.images.test_operator_image import IMAGE, USER, limits, podman

PUBLISH = REPO_ROOT / "hack" / "publish-images.sh"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registry]:
    controlplane.require_loopback_only_network()
    podman()  # skips (or fails under IMAGE_TESTS=require) without podman or the image
    directory = tmp_path_factory.mktemp("registry")
    with Registry(directory / "storage", f"127.0.0.1:{free_port()}",
                  directory / "registry.log") as running:
        yield running


class Node:
    """A container store of its own, as a fresh node's: what it runs, it pulls from the
    registry by digest; removed whole at the end."""

    def __init__(self, directory: Path) -> None:
        self.flags = [f"--root={directory / 'root'}", f"--runroot={directory / 'run'}",
                      "--storage-driver=overlay"]

    def podman(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(["podman", *self.flags, *args], capture_output=True, text=True,
                              check=True, timeout=timeout)

    def pull(self, reference: str) -> str:
        """Pull by digest; the image's ID."""
        self.podman("pull", "--quiet", "--tls-verify=false", reference)
        return self.podman("image", "inspect", "--format", "{{.Id}}", reference).stdout.strip()

    def image_file(self, reference: str, path: str) -> str:
        """A file of a pulled image (the store's mount of it)."""
        return self.image_bytes(reference, path).decode()

    def image_bytes(self, reference: str, path: str) -> bytes:
        mount = self.podman("image", "mount", reference).stdout.strip()
        try:
            return (Path(mount) / path.lstrip("/")).read_bytes()
        finally:
            self.podman("image", "unmount", reference)


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    fresh = Node(tmp_path_factory.mktemp("node"))
    yield fresh
    fresh.podman("system", "reset", "--force")


NAMES = ("operator", "external-secrets", "bitwarden-sdk-server", "bundle", "catalog",
         "olm-util", "opm")


@pytest.fixture(scope="module")
def published(registry: Registry) -> dict[str, str]:
    """operator, external-secrets, bitwarden-sdk-server, bundle, catalog, olm-util, opm:
    REGISTRY/REPOSITORY@sha256:..."""
    result = subprocess.run(["bash", str(PUBLISH)], env={
        **os.environ, "REGISTRY": registry.address, "IMG": IMAGE},
        capture_output=True, text=True, timeout=600, check=False)
    assert result.returncode == 0, result.stderr[-3000:]
    references = result.stdout.split()
    assert len(references) == len(NAMES), result.stdout
    return dict(zip(NAMES, references, strict=True))


def image_id(reference: str) -> str:
    return subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", reference],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_each_image_is_named_by_digest(published: dict[str, str], registry: Registry,
                                       node: Node) -> None:
    for name, reference in published.items():
        repository, _, digest = reference.partition("@sha256:")
        assert repository.startswith(f"{registry.address}/"), reference
        assert len(digest) == 64, (name, reference)
    # What the registry serves by that digest is the image `make image` built, and the
    # operand's are those of `make operand-images`.
    assert node.pull(published["operator"]) == image_id(IMAGE)
    for name in ("external-secrets", "bitwarden-sdk-server"):
        assert f"/external-secrets/{name}@sha256:" in published[name], published[name]
        assert node.pull(published[name]) == image_id(operand_image(name)), name


def test_the_bundle_names_operator_and_operand_images_by_digest(published: dict[str, str],
                                                                node: Node) -> None:
    node.pull(published["bundle"])
    text = node.image_file(published["bundle"],
                      "manifests/external-secrets-operator.clusterserviceversion.yaml")
    csv: dict[str, Any] = yaml.safe_load(text)
    operator = published["operator"]
    deployment = csv["spec"]["install"]["spec"]["deployments"][0]["spec"]["template"]["spec"]
    assert [c["image"] for c in deployment["containers"]] == [operator]
    assert csv["metadata"]["annotations"]["containerImage"] == operator
    # The operand's images, by the pushed digests, where the operator reads them (its
    # Deployment's variables, manager.config.OperatorEnvironment) and where a mirror looks.
    env = {variable["name"]: variable.get("value")
           for variable in deployment["containers"][0]["env"]}
    related = {image["name"]: image["image"] for image in csv["spec"]["relatedImages"]}
    assert related == {"external-secrets": published["external-secrets"],
                       "bitwarden-sdk-server": published["bitwarden-sdk-server"],
                       "external-secrets-operator": operator}
    assert env["RELATED_IMAGE_EXTERNAL_SECRETS"] == published["external-secrets"]
    assert env["RELATED_IMAGE_BITWARDEN_SDK_SERVER"] == published["bitwarden-sdk-server"]
    # Every image by digest: the published bundle claims what the committed one (tags)
    # cannot; tests/olm/test_mirror.py installs such a bundle from a mirror alone.
    disconnected = "features.operators.openshift.io/disconnected"
    assert csv["metadata"]["annotations"][disconnected] == "true"
    committed = yaml.safe_load((REPO_ROOT / bundle.CSV_FILE).read_text())
    assert committed["metadata"]["annotations"][disconnected] == "false"


def test_the_catalog_names_the_bundle_by_digest_and_serves(published: dict[str, str],
                                                           node: Node) -> None:
    node.pull(published["catalog"])
    documents = [json.loads(line) for line in node.image_file(
        published["catalog"], "configs/external-secrets-operator/catalog.json").splitlines()
        if line.strip()]
    bundles = [doc for doc in documents if doc["schema"] == "olm.bundle"]
    assert [bundle["image"] for bundle in bundles] == [published["bundle"]]

    # As OLM's registry pod runs it: the image's own command (another port), an arbitrary
    # UID in group 0, no capabilities. Not read-only: opm takes a lock file in its cache.
    port = free_port()
    name = f"eso-catalog-smoke-{port}"
    node.podman("run", "--detach", f"--name={name}", "--network=host", *limits(),
                f"--user={USER}", "--passwd=false", "--cap-drop=ALL", published["catalog"],
                "serve", "/configs", "--cache-dir=/tmp/cache", "--pprof-addr=",
                f"--port={port}", timeout=60)
    try:
        deadline = time.monotonic() + 60
        while not _accepts(port):
            state = json.loads(node.podman("container", "inspect", name).stdout)[0]["State"]
            assert state["Running"], _logs(node, name)
            assert time.monotonic() < deadline, _logs(node, name)
            time.sleep(0.3)
        assert "serving registry" in _logs(node, name)
    finally:
        subprocess.run(["podman", *node.flags, "rm", "--force", name], capture_output=True,
                       check=False)


def test_olm_images_hold_the_pinned_binaries(published: dict[str, str], node: Node) -> None:
    """What the simulated cluster's catalog operator unpacks bundles with
    (`--olm-util-image`, `--olm-opm-image`): OLM's cpb and opm at the pinned versions."""
    for name, repository, binary, tool in (("olm-util", "operator-framework/olm", "cpb", "olm"),
                                           ("opm", "operator-framework/opm", "opm", "opm")):
        reference = published[name]
        assert f"/{repository}@sha256:" in reference, reference
        node.pull(reference)
        built = subprocess.run(["bash", str(REPO_ROOT / "hack" / "build-tool.sh"), tool],
                               capture_output=True, text=True, check=True).stdout.strip()
        assert _sha256(node.image_bytes(reference, f"/bin/{binary}")) == _sha256(
            (Path(built) / binary).read_bytes()), (name, reference)


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _logs(node: Node, name: str) -> str:
    return subprocess.run(["podman", *node.flags, "logs", name], stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, check=False).stdout
