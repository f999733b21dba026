"""What `python -m manager run` loads before its first pass: only what that pass needs.

The start-up time itself is measured by `make bench` (docs/performance.md); these tests guard
what it depends on, without timing: the tools' code, jinja2 and the models' validators stay
out of a fresh operator process until something uses them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import pytest

from manager import cli
from manager.paths import REPO_ROOT

# Not imported by `run` at start, and why.
DEFERRED = {
    "jinja2": "templates render only with an ExternalSecretsConfig (manager.render.engine)",
    "manager.render.engine": "the same",
    "manager.commands.generate": "the CLI imports only the subcommand it runs",
    "manager.commands.render": "the same",
    "manager.commands.plan": "the same",
    "manager.commands.bundle": "the same",
    "manager.commands.uninstall": "the same",
    "manager.commands.gather": "the same",
    "manager.offline.plan": "only `plan` uses it",
    "manager.offline.gather": "only `gather` uses it",
    "manager.olm.bundle": "only `bundle` uses it",
    "manager.api.crd": "only the generators use it",
    "manager.api.docs": "the same",
    "manager.api.docstrings": "the same: field descriptions are not parsed at start",
}

# `run` up to its first request: it imports the operator and stops at the missing
# kubeconfig (exit status 2), then reports what is loaded.
_PROBE = """
import json, sys
from manager import cli
from manager.api import models
from manager import config
status = cli.main(["run", "--kubeconfig", "/nonexistent/kubeconfig"])
built = sorted(name for module in (models, config) for name, value in vars(module).items()
               if isinstance(value, type) and issubclass(value, models.BaseModel)
               and value.__module__ == module.__name__ and value.__pydantic_complete__)
field = models.ExternalSecretsConfigSpec.model_fields["controller_config"]
print(json.dumps({"status": status, "modules": sorted(sys.modules), "built": built,
                  "description": field.description}))
"""


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_run_loads_only_what_its_first_pass_needs(probe: dict[str, Any]) -> None:
    assert probe["status"] == 2  # reached the credentials: the operator's code is loaded
    assert {"kopf", "aiohttp", "manager.runtime.operator", "manager.runtime.reconciler"} \
        <= set(probe["modules"])
    loaded = {name: why for name, why in DEFERRED.items() if name in probe["modules"]}
    assert not loaded, f"imported at start, though deferred: {loaded}"


def test_models_build_their_validators_when_first_used(probe: dict[str, Any]) -> None:
    # A few small config models are built at import: EffectiveConfig's defaults are instances.
    assert not {"ExternalSecretsConfigSpec", "ExternalSecretsManagerSpec", "ControllerConfig",
                "EffectiveConfig"} & set(probe["built"]), probe["built"]
    assert probe["description"] is None  # docstrings: read by the generators only


def test_the_full_parser_still_lists_every_subcommand() -> None:
    help_text = cli.build_parser().format_help()
    for name in cli.SUBCOMMANDS:
        assert name in help_text
    assert "generate" not in cli.build_parser("run").format_help()
