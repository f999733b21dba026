"""Condition messages fit on one line (summary.py): at most 160 characters in every state,
naming how many objects and the first one; the detail is in status.awaited, status.failure
and Events. The same for the ExternalSecretsManager's entries, whose whole messages go to
Events about the ESM."""

from __future__ import annotations

import pytest

from manager.api import models
from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.apply import ObjectRef
from manager.client.kube import ApiError, JsonObject
from manager.config import ConfigError, OperatorEnvironment, effective_config
from manager.reporting import esm_status, outcomes, status, summary
from manager.reporting.esm_status import AnnotatorReport
from manager.reporting.failures import config_outcome
from manager.reporting.outcomes import operand_outcome
from manager.reporting.status import ControllerState, Failure, Outcome, OutcomeKind, esc_fields
from manager.sidetasks.operator_monitoring import MonitoringReport
from manager.steps.readiness import Awaited, Problem, Readiness
from manager.steps.uninstall import Kept, UninstallPlan, UninstallReport

LONG = "x" * 300
CONFIG = effective_config(None, None, OperatorEnvironment.from_environ({}))


def deployment(index: int, name_length: int = 253) -> Awaited:
    name = f"d{index}-" + "n" * (name_length - 3)
    return Awaited(f"Deployment {'s' * 63}/{name}",
                   "0 of 1 replicas available; pod a/b: container c waiting: "
                   "ImagePullBackOff: " + "m" * 500)


@pytest.mark.parametrize("count", [1, 2, 3, 17, 1000])
@pytest.mark.parametrize("name_length", [5, 60, 253])
def test_a_count_line_fits_names_the_first_and_says_how_many_more(
        count: int, name_length: int) -> None:
    items = [str(deployment(i, name_length)) for i in range(count)]
    line = summary.counted("Waiting for {objects}", items, summary.SEE_AWAITED)
    assert len(line) <= summary.LIMIT
    noun = "object" if count == 1 else "objects"
    assert line.startswith(f"Waiting for {count} {noun}: Deployment sss")
    assert line.endswith(f" and {count - 1} more; see status.awaited" if count > 1
                         else "; see status.awaited")
    if name_length == 5:  # a short first item is named whole, up to its detail
        assert items[0][:60] in line


def test_the_bound_holds_for_any_length_of_every_part() -> None:
    for head in ("", "h" * 10, "h" * 150, "h" * 400):
        for middle in ("", "m", "m" * 159, "m" * 161, "m" * 5000):
            for tail in ("", "t" * 30, "t" * 200):
                assert len(summary.framed(head, middle, tail)) <= summary.LIMIT
    assert summary.clip("a" * 160) == "a" * 160
    assert summary.clip("a" * 161) == "a" * 159 + "…"
    assert summary.clip("abc", 0) == ""
    assert len(summary.counted("{objects}" * 100, ["i"], "see")) <= summary.LIMIT
    assert summary.counted("Waiting for {objects}", [], "see x") == "Waiting for 0 objects; see x"


def test_a_short_message_is_kept_and_a_long_one_says_where_the_rest_is() -> None:
    assert summary.fitted("fine", summary.SEE_FAILURE) == "fine"
    line = summary.fitted("spec.appConfig.x: " + LONG, summary.SEE_FAILURE)
    assert len(line) == summary.LIMIT
    assert line.startswith("spec.appConfig.x: xxx")
    assert line.endswith("… (see status.failure)")


@pytest.mark.parametrize("kind", list(OutcomeKind))
def test_every_condition_of_every_outcome_fits(kind: OutcomeKind) -> None:
    for failure in (None, Failure(object="Deployment a/b")):
        outcome = Outcome(kind, "Reason", "detail " * 200, failure=failure)
        for condition in outcome.conditions():
            assert len(condition.message) <= summary.LIMIT, condition


def test_waiting_for_the_operand_lists_every_awaited_object_in_status() -> None:
    awaited = tuple(deployment(i) for i in range(3))
    outcome = operand_outcome(CONFIG, Readiness(awaited=awaited), 42)
    assert outcome.kind is OutcomeKind.PROGRESSING
    for condition in outcome.conditions():
        assert len(condition.message) <= summary.LIMIT
    ready = outcome.conditions()[0].message
    assert ready.startswith("Waiting for 3 objects: Deployment ")
    assert ready.endswith(" and 2 more; see status.awaited")
    assert str(awaited[2]) in outcome.message  # the Events and the log keep the detail
    fields = esc_fields(CONFIG, outcome)
    assert [item["object"] for item in fields["awaited"]] == [a.subject for a in awaited]
    assert all(item["message"] == summary.clip(a.detail, models.AWAITED_MESSAGE_MAX)
               for item, a in zip(fields["awaited"], awaited, strict=True))
    ready_fields = esc_fields(CONFIG, operand_outcome(CONFIG, Readiness(), 42))
    assert ready_fields["awaited"] is None  # removed once Ready


def test_status_awaited_stays_within_the_crd_bounds() -> None:
    awaited = tuple(Awaited("o" * 2000, "m" * 5000) for _ in range(40))
    outcome = operand_outcome(CONFIG, Readiness(awaited=awaited), 42)
    items = esc_fields(CONFIG, outcome)["awaited"]
    assert len(items) == models.AWAITED_MAX_ITEMS
    assert all(len(item["object"]) <= models.AWAITED_OBJECT_MAX
               and len(item["message"]) <= models.AWAITED_MESSAGE_MAX for item in items)
    assert outcome.conditions()[0].message.endswith(" and 39 more; see status.awaited")


def test_several_operand_problems_name_the_first_and_count_the_rest() -> None:
    problems = tuple(Problem("PodsUnschedulable", f"Deployment a/b{i}: " + LONG,
                             f"Pod a/b{i}", "kubectl describe pod")
                     for i in range(3))
    outcome = operand_outcome(CONFIG, Readiness(problems=problems), 42)
    degraded = outcome.conditions()[1].message
    assert len(degraded) <= summary.LIMIT
    assert degraded.startswith("Deployment a/b0: xxx")
    assert degraded.endswith("(and 2 more problems; see status.failure)")
    failure = esc_fields(CONFIG, outcome)["failure"]
    assert failure["object"] == "Pod a/b0"
    assert failure["message"] == outcome.message  # every problem, whole


def test_a_long_spec_error_is_short_in_conditions_and_whole_in_status_failure() -> None:
    error = ConfigError("spec.appConfig.certManagerConfig.certificateRenewBefore",
                        "must be at least twice the check interval; " + LONG)
    outcome = config_outcome(error)
    degraded = outcome.conditions()[1].message
    assert len(degraded) <= summary.LIMIT
    assert degraded.startswith("spec.appConfig.certManagerConfig.certificateRenewBefore: must")
    assert degraded.endswith("(see status.failure)")
    assert esc_fields(None, outcome)["failure"]["message"] == str(error)


def test_removal_and_drift_are_counted_with_the_first_object() -> None:
    refs = [ObjectRef("apps/v1", "Deployment", "n" * 63, "d" * 253) for _ in range(5)]
    plan = UninstallPlan(None, True, (), (), ())
    assert outcomes.removal_outcome(UninstallReport(), plan).kind is (
        OutcomeKind.REMOVED)
    deleting = UninstallPlan(None, True, (), (), tuple(Kept(ref, "already being deleted")
                                                       for ref in refs))
    removing = outcomes.removal_outcome(UninstallReport(), deleting)
    assert removing.kind is OutcomeKind.PROGRESSING
    line = removing.conditions()[0].message
    assert len(line) <= summary.LIMIT
    assert line.startswith("managementState is Removed, 5 objects left: Deployment nnn")
    assert line.endswith(" and 4 more; see status.awaited")
    assert [item["message"] for item in esc_fields(None, removing)["awaited"]] == [
        "being deleted"] * 5
    drift = [outcomes.Drift(ref, "differs from the spec") for ref in refs]
    unmanaged = outcomes.unmanaged_outcome(drift)
    line = unmanaged.conditions()[0].message
    assert len(line) <= summary.LIMIT
    assert line.startswith("managementState is Unmanaged, drift in 5 objects: Deployment nnn")
    assert line.endswith("and 4 more; see kubectl describe esc cluster")


# --- the ExternalSecretsManager's entries ----------------------------------------------------

# Every CommonConfigs setting, set to one value in the ESC's appConfig and another in the
# ESM's globalConfig: the most an entry can list as overridden.
EVERY_SETTING_APP = {"logLevel": 2, "resources": {"limits": {"cpu": "1"}},
                     "nodeSelector": {"a": "b"}, "tolerations": [{"operator": "Exists"}],
                     "affinity": {"nodeAffinity": {}},
                     "proxy": {"httpProxy": "http://app:3128"}}
EVERY_SETTING_GLOBAL = {"logLevel": 4, "resources": {"limits": {"cpu": "2"}},
                        "nodeSelector": {"c": "d"}, "tolerations": [{"key": "k"}],
                        "affinity": {"podAffinity": {}},
                        "proxy": {"httpProxy": "http://global:3128"}}


def esm_object(spec: JsonObject | None = None, entries: list[JsonObject] | None = None,
               ) -> JsonObject:
    return {"metadata": {"name": "cluster", "uid": "u", "generation": 2}, "spec": spec or {},
            "status": {"controllerStatuses": entries or []}}


def lines(state: ControllerState) -> list[str]:
    """The messages the entry carries, each checked to fit on one line."""
    entry = state.as_status(None, "T0")
    messages = [condition["message"] for condition in entry["conditions"]]
    assert all(len(message) <= summary.LIMIT for message in messages), messages
    return messages


def test_every_overridden_setting_is_summarised_and_whole_in_an_esm_event() -> None:
    config = effective_config(
        ExternalSecretsConfigSpec.model_validate({"appConfig": EVERY_SETTING_APP}),
        ExternalSecretsManagerSpec.model_validate({"globalConfig": EVERY_SETTING_GLOBAL}),
        OperatorEnvironment.from_environ({}))
    assert len(config.hidden_global_settings) == 6
    esm = esm_object({"globalConfig": EVERY_SETTING_GLOBAL})
    state = esm_status.manager_state(esm, None, config)
    ready = lines(state)[0]
    assert ready.startswith("globalConfig applies except logLevel, resources")
    assert ready.endswith(f"the ESC's appConfig wins ({summary.SEE_ESM_EVENTS})")
    [event] = esm_status.esm_events(esm, [state])
    assert (event.type, event.reason) == ("Normal", "PartlyOverridden")
    for name in config.hidden_global_settings:
        assert f"globalConfig.{name}" in event.note
    assert "set the log level in spec.appConfig.logLevel" in event.note
    # The same line stored: the next pass says nothing again.
    assert esm_status.esm_events(esm_object(entries=[state.as_status(None, "T0")]),
                                 [state]) == []


@pytest.mark.parametrize("count", [1, 3, 500])
def test_unknown_features_are_counted_and_named_whole_in_an_esm_event(count: int) -> None:
    names = [f"NoSuchFeature{i:04d}" + "x" * 40 for i in range(count)]
    esm = esm_object({"features": [{"name": name, "enabled": "true"} for name in names]})
    state = esm_status.manager_state(esm, None, None)
    ready, degraded = lines(state)
    assert ready == degraded
    assert ready.startswith(f"spec.features: {count} ")
    assert "NoSuchFeature0000" in ready
    assert ready.endswith(f"({summary.SEE_ESM_EVENTS})")
    [event] = esm_status.esm_events(esm, [state])
    assert event.type == "Warning"
    assert all(repr(name) in event.note for name in names)


def test_a_long_global_config_problem_and_a_feature_note_fit() -> None:
    esm = esm_object()
    problem = "ExternalSecretsManager cluster spec.globalConfig.labels: " + LONG
    broken = esm_status.manager_state(esm, problem, None)
    assert all(line.endswith(f"… ({summary.SEE_ESM_EVENTS})") for line in lines(broken))
    assert esm_status.esm_events(esm, [broken])[0].note.endswith(LONG)
    note = MonitoringReport(True, False).note
    assert note is not None
    without_effect = esm_status.manager_state(esm, None, None, note)
    ready = lines(without_effect)[0]
    assert ready.startswith("feature OperandMonitoring is enabled but has no effect: the "
                            "cluster does not serve monitoring.coreos.com/v1")
    foreign = MonitoringReport(True, True, tuple(f"ServiceMonitor o/m{i} exists" for i in
                                                 range(50))).note
    assert foreign is not None
    lines(esm_status.manager_state(esm, None, None, foreign))


def test_the_annotator_entry_fits_for_any_number_of_crds_and_any_error() -> None:
    esm = esm_object()
    config = effective_config(ExternalSecretsConfigSpec.model_validate(
        {"controllerConfig": {"namespace": "n" * 63}}), None, OperatorEnvironment.from_environ({}))
    many = esm_status.annotator_state(esm, AnnotatorReport(True, 10 ** 9, ()), config)
    assert lines(many)[0].startswith("1000000000 operand CRDs carry")
    assert many.cut is None  # a count, whole
    failed = esm_status.annotator_state(esm, ApiError(500, "InternalError", LONG), config)
    assert lines(failed)[1].startswith("failed to annotate the operand CRDs, retrying: ")
    [event] = esm_status.esm_events(esm, [failed])
    assert (event.type, event.reason) == ("Warning", "APIError")
    assert LONG in event.note


@pytest.mark.parametrize("kind", list(OutcomeKind))
def test_the_esc_entry_mirrors_the_esc_conditions_uncut(kind: OutcomeKind) -> None:
    outcome = Outcome(kind, "Reason", "detail " * 200)
    state = ControllerState(status.CONTROLLER_ESC, outcome.conditions(), 1)
    assert lines(state) == [condition.message for condition in outcome.conditions()]
    assert state.cut is None
    assert esm_status.esm_events(esm_object(), [state]) == []


def test_any_entry_fits_whatever_its_message() -> None:
    for message in ("", "short", "m" * 160, "m" * 161, "m" * 100_000):
        for line in ("", "s" * 10, "s" * 1000):
            state = status.simple_state("any", False, "Reason", message, None, summary=line)
            lines(state)
