"""Every flag the operator renders exists in the operand release it ships.

The simulated cluster runs external-secrets EXTERNAL_SECRETS_VERSION, built from that
release's source tree (hack/build-tool.sh, the tree's digest pinned in
hack/upstream-sources.txt); a flag missing from it would make the real pod exit at start.
The flags are read twice: from the built binary's `--help`, and from the release's source
(`cmd/controller/` of the same release tree, hack/upstream-tree.sh), the reader that also
writes the snapshot below.

The same reader writes manager/api/operand_flags.json, the flags overrideArgs may name; the
snapshot must be what the shipped release's source says, and the operator's table of the
flags it owns must be exactly the flags it renders.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from devcluster.controlplane import ensure_tool
from manager import versions
from manager.api import operand_flags
from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import UNSAFE_ALLOW_GENERIC_TARGETS, OperatorEnvironment, effective_config
from manager.paths import REPO_ROOT
from manager.render import render_operand

COMMANDS = tuple(operand_flags.COMMANDS.values())
FLAG_IN_HELP = re.compile(r"^\s+(?:-\w, )?--([\w-]+)", re.MULTILINE)
# Specs (ExternalSecretsConfig, ExternalSecretsManager) that together render every flag the
# operator can produce.
GENERIC_TARGETS = {"features": [{"name": UNSAFE_ALLOW_GENERIC_TARGETS, "enabled": "true"}]}
SPECS: tuple[tuple[dict[str, Any], dict[str, Any] | None], ...] = (
    ({}, None),
    ({"appConfig": {"operatingNamespace": "team-a", "logLevel": 5}}, None),
    ({}, GENERIC_TARGETS),
    ({"appConfig": {"certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"}}}},
     None),
    # componentConfigs: every tuning flag, and the cert-controller's leader election.
    ({"controllerConfig": {"componentConfigs": [
        {"componentName": "ExternalSecretsCoreController",
         "tuning": {"concurrent": 4, "clientQPS": 100, "clientBurst": 200,
                    "enableSecretsCaching": "true", "enableConfigMapsCaching": "true",
                    "enableManagedSecretsCaching": "false", "storeRequeueInterval": "90s"}},
        {"componentName": "CertController", "deploymentConfigs": {"replicas": 2}}]}}, None),
)


def rendered_flags() -> dict[str, set[str]]:
    """Flag names by subcommand, over every operand container of every spec above."""
    flags: dict[str, set[str]] = {}
    environment = OperatorEnvironment.from_environ({})
    for esc, esm in SPECS:
        config = effective_config(ExternalSecretsConfigSpec.model_validate(esc),
                                  ExternalSecretsManagerSpec.model_validate(esm)
                                  if esm is not None else None, environment)
        for obj in render_operand(config).objects():
            if obj["kind"] != "Deployment":
                continue
            for container in obj["spec"]["template"]["spec"]["containers"]:
                if "external-secrets/external-secrets" not in container["image"]:
                    continue
                args = container.get("args") or []
                command = args[0] if args and not args[0].startswith("-") else ""
                flags.setdefault(command, set()).update(
                    arg[2:].split("=", 1)[0] for arg in args if arg.startswith("--"))
    return flags


def source_flags(version: str) -> dict[str, set[str]]:
    found = operand_flags.source_flags(operand_flags.module_dir(version))
    return {command: set(flags) for command, flags in found.items()}


def help_flags(binary: Path, command: str) -> set[str]:
    text = subprocess.run([str(binary), *([command] if command else []), "--help"],
                          capture_output=True, text=True, check=True, timeout=60).stdout
    return set(FLAG_IN_HELP.findall(text))


@pytest.fixture(scope="module")
def rendered() -> dict[str, set[str]]:
    flags = rendered_flags()
    assert set(flags) == {"", "webhook", "certcontroller"}, flags
    assert {"namespace", "enable-cluster-store-reconciler", "client-qps",
            "store-requeue-interval", "unsafe-allow-generic-targets"} <= flags[""]
    assert "enable-leader-election" in flags["certcontroller"]
    assert {"check-interval", "lookahead-interval"} <= flags["webhook"]
    return flags


@pytest.fixture(scope="module")
def binary() -> Path:
    """The operand binary the simulated cluster runs, checked to be the shipped release's."""
    bin_dir = ensure_tool("external-secrets")
    pins = (REPO_ROOT / "hack" / "upstream-sources.txt").read_text().split("\n")
    commit = next(line.split()[3] for line in pins
                  if line.split()[:2] == ["external-secrets", versions.EXTERNAL_SECRETS_VERSION])
    assert (bin_dir.parent / "commit").read_text().strip() == commit
    return bin_dir / "external-secrets"


def test_the_shipped_release_knows_every_rendered_flag(rendered: dict[str, set[str]],
                                                       binary: Path) -> None:
    for command, flags in rendered.items():
        known = help_flags(binary, command)
        assert flags <= known, (command, sorted(flags - known))


def test_the_source_reader_agrees_with_the_help(rendered: dict[str, set[str]],
                                                binary: Path) -> None:
    """The source reader and the binary's `--help` must agree: every flag it finds is real,
    and it finds every flag the operator renders (a reader that found nothing would make
    the snapshot test pass vacuously). Flags registered outside cmd/controller (template
    delimiters, provider caches) are not read, and the operator renders none of them."""
    from_source = source_flags(versions.EXTERNAL_SECRETS_VERSION)
    for command in COMMANDS:
        read = from_source.get(command, set())
        assert read <= help_flags(binary, command), (command, sorted(read))
        assert rendered[command] <= read, (command, sorted(rendered[command] - read))


def test_the_committed_flag_snapshot_is_the_shipped_release_source() -> None:
    """overrideArgs are checked against manager/api/operand_flags.json: it must be what
    the shipped release's source declares, names and kinds (`python -m manager generate
    --refresh-operand-flags` rewrites it)."""
    version = versions.EXTERNAL_SECRETS_VERSION
    snapshot = operand_flags.snapshot()
    assert snapshot.version == version
    found = operand_flags.source_flags(operand_flags.module_dir(version))
    assert found == snapshot.flags
    assert operand_flags.snapshot_text(version, found) == operand_flags.SNAPSHOT_PATH.read_text()
    assert found["webhook"]["port"] == "int"
    assert found[""]["enable-flood-gate"] == "bool"


def test_the_operator_owns_exactly_the_flags_it_renders(rendered: dict[str, set[str]]) -> None:
    """An override may never name a rendered flag (the Services, probes and typed fields
    depend on them), and every flag the operator declares its own is one it renders."""
    for command in COMMANDS:
        assert set(operand_flags.OWNED[command]) == rendered[command], (
            command, set(operand_flags.OWNED[command]) ^ rendered[command])
