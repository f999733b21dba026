"""Every alert an SRE may be paged for has a runbook: the `runbook_url` annotation of each
alert (the operand's PrometheusRule, with and without cert-manager, and the operator's own)
points below RUNBOOK_BASE_URL to docs/runbooks/<alert>.md, which exists and has its four
sections (symptom, impact, diagnosis commands, mitigation); no page is left without an alert.
Critical alerts must have one (OpenShift's alerting conventions); here every alert has."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from manager.olm import identity
from manager.paths import REPO_ROOT
from manager.render.alerts import RUNBOOK_BASE_URL, operand_alerts, operator_alerts
from tests.unit.configs import CERT_MANAGER, config

RUNBOOKS = REPO_ROOT / "docs" / "runbooks"
SECTIONS = ("Symptom", "Impact", "Diagnosis", "Mitigation")


def every_alert() -> list[dict[str, Any]]:
    rules = [*operand_alerts(config()), *operand_alerts(config(CERT_MANAGER)),
             *operator_alerts(identity.NAMESPACE)]
    return list({rule["alert"]: rule for rule in rules}.values())


def page_of(rule: dict[str, Any]) -> Path:
    url = rule["annotations"]["runbook_url"]
    assert url.startswith(RUNBOOK_BASE_URL), url
    relative = url.removeprefix(RUNBOOK_BASE_URL)
    assert relative == f"{rule['alert']}.md", url
    return RUNBOOKS / relative


def sections(text: str) -> dict[str, str]:
    """The `## ` sections of a page, by title, with their text."""
    parts = re.split(r"^## (.+)$", text, flags=re.MULTILINE)
    return {title.strip(): body.strip() for title, body in zip(parts[1::2], parts[2::2],
                                                                strict=True)}


def test_every_critical_alert_has_a_runbook_url() -> None:
    critical = [rule for rule in every_alert() if rule["labels"]["severity"] == "critical"]
    assert critical  # the operand's unavailable Deployment at least
    for rule in critical:
        assert rule["annotations"].get("runbook_url"), rule["alert"]


def test_the_base_url_is_the_repositorys_runbook_folder() -> None:
    assert re.fullmatch(r"https://[^\s]+/docs/runbooks/", RUNBOOK_BASE_URL), RUNBOOK_BASE_URL


@pytest.mark.parametrize("rule", every_alert(), ids=lambda rule: rule["alert"])
def test_each_runbook_exists_with_its_four_sections(rule: dict[str, Any]) -> None:
    page = page_of(rule)
    assert page.is_file(), f"{rule['alert']}: no {page.relative_to(REPO_ROOT)}"
    text = page.read_text()
    assert text.startswith(f"# {rule['alert']}\n"), text[:80]
    assert f"Severity: {rule['labels']['severity']}." in text
    found = sections(text)
    assert tuple(found) == SECTIONS, list(found)
    assert all(len(body) > 80 for body in found.values()), found
    # Diagnosis gives commands to run, in a shell block.
    assert re.search(r"```sh\n(?:.*\n)*?(?:kubectl|oc) ", found["Diagnosis"]), found["Diagnosis"]


def test_no_runbook_without_its_alert_and_the_index_lists_them_all() -> None:
    alerts = {rule["alert"] for rule in every_alert()}
    pages = {page.stem for page in RUNBOOKS.glob("*.md")} - {"README"}
    assert pages == alerts
    index = (RUNBOOKS / "README.md").read_text()
    for alert in alerts:
        assert f"[{alert}]({alert}.md)" in index, alert
