"""What `python -m manager run` loads before its first pass: only what that pass needs.

The start-up time itself is measured by `make bench` (docs/performance.md); these tests guard
what it depends on, without timing: the tools' code, jinja2 and the models' validators stay
out of a fresh operator process until something uses them, and the process sheds what its
imports cost for nothing (manager/commands/startup.py): the garbage collector's runs over
the modules, pydantic's plugin discovery, aiohttp's default CA bundles.
"""

from __future__ import annotations

import json
import os
import ssl
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
    "manager.offline": "the offline tools (plan, gather, redact)",
    "manager.offline.plan": "only `plan` uses it",
    "manager.offline.gather": "only `gather` uses it",
    "manager.offline.redact": "only `gather` uses it",
    "manager.olm.bundle": "only `bundle` uses it",
    "manager.olm.csv": "the same",
    "manager.olm.crds": "the same",
    "manager.olm.descriptors": "the same",
    "manager.olm.rbac": "the same",
    "manager.olm.samples": "the same",
    "manager.olm.yamlfile": "the same",
    "manager.api.crd": "only the generators use it",
    "manager.api.docs": "the same",
    "manager.api.artefacts": "the same",
    "manager.api.core_schemas": "the same",
    "manager.api.docstrings": "the same: field descriptions are not parsed at start",
}

# `run` up to its first request, as `python -m manager run` calls it (the process's own
# command line): it imports the operator and stops at the missing kubeconfig (exit status
# 2), then reports what is loaded and the state the imports left.
_PROBE = """
import gc, json, ssl, sys
from manager import cli
sys.argv = ["manager", *ARGS]
status = cli.main() if PROCESS else cli.main(ARGS)
from manager.api import models
from manager import config
built = sorted(name for module in (models, config) for name, value in vars(module).items()
               if isinstance(value, type) and issubclass(value, models.BaseModel)
               and value.__module__.startswith(module.__name__)
               and value.__pydantic_complete__)
field = models.ExternalSecretsConfigSpec.model_fields["controller_config"]
from aiohttp import connector
from pydantic.plugin import _loader
print(json.dumps({
    "status": status, "modules": sorted(sys.modules), "built": built,
    "description": field.description,
    "aiohttp_default_cas": [context.cert_store_stats()["x509_ca"] for context in
                            (connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED)],
    "ssl_restored": ssl.create_default_context.__module__ == "ssl"
                    and "set_default_verify_paths" not in vars(ssl.SSLContext),
    "plugins_looked_up": _loader._plugins is not None,
    "gc": {"enabled": gc.isenabled(), "frozen": gc.get_freeze_count()},
}))
"""
_ARGS = ["run", "--kubeconfig", "/nonexistent/kubeconfig"]


def _run_probe(*, process: bool) -> dict[str, Any]:
    code = f"ARGS = {_ARGS!r}\nPROCESS = {process!r}\n{_PROBE}"
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, check=True,
                          capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    result: dict[str, Any] = json.loads(done.stdout.splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def probe() -> dict[str, Any]:
    return _run_probe(process=True)


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


def test_the_operator_process_sheds_what_its_imports_cost_for_nothing(
        probe: dict[str, Any]) -> None:
    # aiohttp's default contexts (requests without a context of their own: the operator
    # sends none) are built without the system's CA bundle...
    assert probe["aiohttp_default_cas"] == [0, 0]
    # ... and only while aiohttp loads: the operator's own contexts are made as ever.
    assert probe["ssl_restored"]
    assert not probe["plugins_looked_up"]  # pydantic's plugin discovery
    # The collector was off during the imports; what they made is frozen, and it runs again.
    assert probe["gc"]["enabled"]
    assert probe["gc"]["frozen"] > 10_000


def test_a_caller_of_main_keeps_its_interpreter_as_it_is() -> None:
    probe = _run_probe(process=False)  # cli.main(["run", ...]), as tests call it
    assert probe["status"] == 2
    assert probe["aiohttp_default_cas"][0] > 0 or not ssl.get_default_verify_paths().cafile
    assert probe["gc"] == {"enabled": True, "frozen": 0}
