"""The ESM's per-controller states (reporting/esm_status.py) and what the worker retries."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.client.kube import ApiError, JsonObject
from manager.config import OperatorEnvironment, effective_config
from manager.reporting import esm_status, status
from manager.reporting.esm_status import AnnotatorReport
from manager.sidetasks.crd_annotator import INJECT_CA_FROM
from tests.unit.configs import config


def esm_with(entries: list[JsonObject], generation: int = 3) -> JsonObject:
    return {"metadata": {"name": "cluster", "generation": generation},
            "status": {"controllerStatuses": entries}}


def test_a_stored_controller_entry_reads_back_unchanged() -> None:
    # Carrying an entry over from the stored status must not cause a status write.
    state = status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, False, "Waiting", "waiting", 5)
    esm = esm_with([state.as_status(None, "T0")])
    previous = esm_status.previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
    assert previous is not None
    assert previous == state
    assert esm_status.previous_state(esm, status.CONTROLLER_ESC) is None


def test_a_restarted_operator_remembers_a_deletion_by_the_esc_entry_reason() -> None:
    def entry(reason: str, message: str) -> JsonObject:
        return status.simple_state(status.CONTROLLER_ESC, False, reason, message,
                                   None).as_status(None, "T0")
    assert esm_status.esc_was_deleted(esm_with([entry(esm_status.ESC_DELETED_REASON, "gone")]))
    assert not esm_status.esc_was_deleted(esm_with([entry("NoExternalSecretsConfig", "gone")]))
    assert not esm_status.esc_was_deleted(esm_with([]))


def test_the_esm_entry_reports_a_global_config_problem() -> None:
    esm = esm_with([])
    fine = esm_status.manager_state(esm, None, None)
    assert (fine.name, fine.observed_generation) == (status.CONTROLLER_ESM, 3)
    assert {c.type: c.status for c in fine.conditions} == {"Ready": "True", "Degraded": "False"}
    broken = esm_status.manager_state(esm, "spec.globalConfig.labels: reserved", None)
    assert {c.type: (c.status, c.message) for c in broken.conditions} == {
        "Ready": ("False", "spec.globalConfig.labels: reserved"),
        "Degraded": ("True", "spec.globalConfig.labels: reserved")}


def test_the_esm_entry_reports_unknown_features_and_overridden_settings() -> None:
    esm = {**esm_with([]), "spec": {"features": [{"name": "TechPreviewX", "enabled": "true"}]}}
    unknown = {c.type: c for c in esm_status.manager_state(esm, None, None).conditions}
    assert (unknown["Degraded"].status, unknown["Degraded"].reason) == ("True",
                                                                        "UnknownFeature")
    assert "'TechPreviewX' is not a feature of this operator" in unknown["Ready"].message
    glob = {"globalConfig": {"logLevel": 4, "labels": {"team": "a"}}}
    overridden = effective_config(
        ExternalSecretsConfigSpec.model_validate({"appConfig": {"operatingNamespace": "x"}}),
        ExternalSecretsManagerSpec.model_validate(glob), OperatorEnvironment.from_environ({}))
    assert overridden.hidden_global_settings == ("logLevel",)
    state = {c.type: c for c in esm_status.manager_state(
        {**esm_with([]), "spec": glob}, None, overridden).conditions}
    assert (state["Ready"].status, state["Ready"].reason) == ("True", "PartlyOverridden")
    assert "except globalConfig.logLevel" in state["Ready"].message
    assert "appConfig.logLevel is 1 whenever" in state["Ready"].message


@pytest.mark.parametrize(("app", "glob", "hidden"), [
    ({"logLevel": 2}, {"logLevel": 4}, ("logLevel",)),
    ({"logLevel": 2}, {"logLevel": 1}, ()),            # the ESM's may be the CRD default
    ({"logLevel": 3}, {"logLevel": 3}, ()),            # the same value: nothing is lost
    ({"proxy": {}}, {"proxy": {"httpProxy": "http://p:3128"}}, ("proxy",)),
    ({"nodeSelector": {"a": "b"}}, {"tolerations": []}, ()),
    (None, {"logLevel": 4}, ()),                       # no appConfig: the ESM's applies
])
def test_settings_the_esc_overrides_are_listed(app: dict[str, Any] | None, glob: dict[str, Any],
                                               hidden: tuple[str, ...]) -> None:
    spec = {"appConfig": app} if app is not None else {}
    merged = effective_config(ExternalSecretsConfigSpec.model_validate(spec),
                              ExternalSecretsManagerSpec.model_validate({"globalConfig": glob}),
                              OperatorEnvironment.from_environ({}))
    assert merged.hidden_global_settings == hidden


def test_the_annotator_entry_follows_its_report() -> None:
    esm = esm_with([])
    in_es = config(namespace="es")
    active = esm_status.annotator_state(esm, AnnotatorReport(True, 2, ()), in_es)
    ready = {c.type: c for c in active.conditions}["Ready"]
    assert ready.status == "True"
    assert ready.message == f"2 operand CRDs carry {INJECT_CA_FROM}: es/external-secrets-webhook"
    failed = esm_status.annotator_state(esm, ApiError(503, "ServiceUnavailable", "later"), in_es)
    assert {c.type: c.status for c in failed.conditions} == {"Ready": "False",
                                                             "Degraded": "True"}


def test_the_annotator_entry_is_kept_when_the_pass_stopped_early() -> None:
    earlier = status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True, "Inactive", "inactive",
                                  None)
    kept = esm_status.annotator_state(esm_with([earlier.as_status(None, "T0")]), None, None)
    assert kept == earlier
    first = esm_status.annotator_state(esm_with([]), None, None)
    assert {c.type: c.status for c in first.conditions}["Ready"] == "False"
