"""Every CEL rule of the CRDs says whether the operator refuses the same at run time, and the
rules that say so are held to it with the API suite's own refused objects.

The API server checks the rules at admission only; `render` (offline) and objects stored
before a rule existed meet the operator's own checks. So a rule is either backed by a run-time
check (`Rule.run_time` names the functions) or declared "admission only" with the reason.
The refused cases of tests/api/*.yaml (each verified against the real API server by
tests/api/test_crd_validation.py) are then read the way the operator reads a stored object:
a case refused only by rules with run-time checks must be refused at run time too.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from manager.api import rules
from manager.api.markers import Rule
from manager.config import ConfigError, OperatorEnvironment, config_of_objects
from manager.paths import REPO_ROOT
from tests.api.cases import Case, load_cases

ADMISSION_ONLY = "admission only: "


def declared_rules() -> dict[tuple[str, str], Rule]:
    """Every Rule of manager/api/rules.py, by (expression, message)."""
    found: dict[tuple[str, str], Rule] = {}
    for value in vars(rules).values():
        for item in value if isinstance(value, tuple) else (value,):
            if isinstance(item, Rule):
                found[(item.rule, item.message)] = item
    return found


def crd_rules() -> Iterator[tuple[str, str, str]]:
    """(field path, expression, message) of every x-kubernetes-validations entry shipped."""
    def walk(node: Any, path: str) -> Iterator[tuple[str, str, str]]:
        if not isinstance(node, dict):
            return
        for entry in node.get("x-kubernetes-validations") or []:
            yield path, entry["rule"], entry["message"]
        for name, child in (node.get("properties") or {}).items():
            yield from walk(child, f"{path}.{name}")
        yield from walk(node.get("items"), f"{path}[]")
        if isinstance(node.get("additionalProperties"), dict):
            yield from walk(node["additionalProperties"], f"{path}{{}}")

    for path in sorted((REPO_ROOT / "manifests" / "crds").glob("*.yaml")):
        crd = yaml.safe_load(path.read_text())
        for version in crd["spec"]["versions"]:
            yield from walk(version["schema"]["openAPIV3Schema"], crd["spec"]["names"]["kind"])


def transition(rule: Rule) -> bool:
    return "oldSelf" in rule.rule


def checks(rule: Rule) -> list[str]:
    """The run-time functions a rule names; [] when it is admission only."""
    if transition(rule) or rule.run_time.startswith(ADMISSION_ONLY):
        return []
    return [name.strip() for name in rule.run_time.split(",")]


def test_every_shipped_rule_declares_its_run_time_check() -> None:
    declared = declared_rules()
    shipped = list(crd_rules())
    assert len(shipped) > 40
    for path, expression, message in shipped:
        rule = declared.get((expression, message))
        assert rule is not None, f"{path}: a rule not built by manager/api/rules.py"
        if transition(rule):
            continue
        assert rule.run_time, f"{path}: {message!r} declares no run-time check"
        if rule.run_time.startswith(ADMISSION_ONLY):
            assert len(rule.run_time) > len(ADMISSION_ONLY) + 20, f"{path}: say why"
            continue
        for name in checks(rule):
            module, _, function = name.rpartition(".")
            assert callable(getattr(importlib.import_module(module), function, None)), \
                f"{path}: {name} is not a function"


def refused_by(case: Case) -> list[Rule]:
    """The rules whose message the API server's refusal of `case` carries."""
    assert case.expected_error is not None
    return [rule for rule in declared_rules().values()
            if rule.message[:40] in case.expected_error]


def read_at_run_time(case: Case) -> str | None:
    """Why the operator refuses the object of `case` when it reads it, or None."""
    body = case.manifest(case.initial)
    cluster = {"metadata": {"name": "cluster"}, "spec": {}}
    try:
        if case.kind == "ExternalSecretsConfig":
            config_of_objects(body, cluster, OperatorEnvironment.from_environ({}))
        else:
            config_of_objects(cluster, body, OperatorEnvironment.from_environ({}))
    except (ConfigError, ValidationError) as refusal:
        return str(refusal)
    return None


CHECKED = [case for case in load_cases()
           if case.operation == "onCreate" and case.expected_error is not None
           and (matched := refused_by(case)) and all(checks(rule) for rule in matched)]


def test_the_suite_holds_most_checked_rules_to_their_word() -> None:
    held = {rule.message for case in CHECKED for rule in refused_by(case)}
    checked = {rule.message for rule in declared_rules().values() if checks(rule)}
    assert len(held) >= len(checked) * 2 // 3, sorted(checked - held)


@pytest.mark.parametrize("case", CHECKED, ids=[case.id for case in CHECKED])
def test_what_admission_refuses_the_run_time_refuses(case: Case) -> None:
    refusal = read_at_run_time(case)
    assert refusal is not None, (
        f"admission refuses it ({case.expected_error}), the operator reads it as valid; the "
        f"rule names {[checks(rule) for rule in refused_by(case)]}")
