"""Golden tests: each case of tests/golden/matrix.yaml renders exactly tests/golden/<case>.yaml.

After an intended change, regenerate and review the diff:

    UPDATE_GOLDEN=1 .venv/bin/pytest tests/unit/render/test_render_golden.py
"""

from __future__ import annotations

import difflib
import os
import subprocess
import sys
from typing import Any

import pytest
import yaml

from manager.api.models import ExternalSecretsConfig, ExternalSecretsManager
from manager.commands.render import dump_objects
from manager.config import OperatorEnvironment, effective_config, with_api_server_addresses
from manager.paths import REPO_ROOT as ROOT
from manager.render import render_operand

GOLDEN = ROOT / "tests" / "golden"
SAMPLES = ROOT / "samples"
MATRIX: dict[str, dict[str, Any]] = yaml.safe_load((GOLDEN / "matrix.yaml").read_text())
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
# The cluster fact the operator reads (the `kubernetes` Service's ClusterIP; OpenShift's
# default service network), as `render --api-server-address` passes it: NO_PROXY shows it.
API_SERVER_ADDRESSES = ("172.30.0.1",)


def render_case(case: str) -> str:
    inputs = MATRIX[case]
    esc = ExternalSecretsConfig.model_validate(
        yaml.safe_load((SAMPLES / inputs["esc"]).read_text()))
    esm = (ExternalSecretsManager.model_validate(
        yaml.safe_load((SAMPLES / inputs["esm"]).read_text())) if "esm" in inputs else None)
    config = with_api_server_addresses(
        effective_config(esc.spec, esm.spec if esm else None,
                         OperatorEnvironment.from_environ(inputs.get("env", {}))),
        API_SERVER_ADDRESSES)
    return dump_objects(render_operand(config).objects())


@pytest.mark.parametrize("case", sorted(MATRIX))
def test_render_matches_golden_file(case: str) -> None:
    expected_path = GOLDEN / f"{case}.yaml"
    actual = render_case(case)
    if UPDATE:  # never a pass: a comparison with what was just written proves nothing
        changed = not expected_path.exists() or expected_path.read_text() != actual
        expected_path.write_text(actual)
        pytest.fail(f"UPDATE_GOLDEN=1 wrote {expected_path.name} "
                    f"({'changed' if changed else 'unchanged'}); review the diff and run "
                    "the tests again without UPDATE_GOLDEN")
    assert expected_path.exists(), f"no {expected_path}; create it with UPDATE_GOLDEN=1"
    expected = expected_path.read_text()
    diff = "".join(difflib.unified_diff(expected.splitlines(keepends=True),
                                        actual.splitlines(keepends=True),
                                        str(expected_path), "rendered"))
    assert actual == expected, f"render differs from the golden file (UPDATE_GOLDEN=1 " \
                               f"regenerates it):\n{diff}"


def test_every_golden_file_belongs_to_a_case() -> None:
    files = {path.stem for path in GOLDEN.glob("*.yaml")} - {"matrix"}
    assert files == set(MATRIX)


def test_every_sample_is_part_of_the_matrix() -> None:
    used = {inputs[key] for inputs in MATRIX.values() for key in ("esc", "esm") if key in inputs}
    assert used == {path.name for path in SAMPLES.glob("*.yaml")}


def test_render_command_prints_the_golden_output_for_the_default_sample() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "manager", "render", "-f", str(SAMPLES / "esc-default.yaml"),
         "--esm", str(SAMPLES / "esm-default.yaml")],
        capture_output=True, text=True, check=False, cwd=ROOT,
        env={"PATH": os.environ.get("PATH", ""), "HTTP_PROXY": "http://shell-proxy:3128"},
    )
    assert result.returncode == 0, result.stderr
    # The shell's HTTP_PROXY is not the operator's environment: no proxy lands.
    assert result.stdout == (GOLDEN / "defaults.yaml").read_text()
