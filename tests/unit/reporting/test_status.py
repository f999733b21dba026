"""status: ESC conditions and ESM controllerStatuses, written only when they change."""

from __future__ import annotations

import re
from typing import Any

import pytest

from manager.api.models import ExternalSecretsConfigSpec
from manager.client.kube import JsonObject
from manager.config import OperatorEnvironment, effective_config
from manager.reporting.status import (
    CONDITION_TYPES,
    CONTROLLER_CRD_ANNOTATOR,
    CONTROLLER_ESC,
    CONTROLLER_ESM,
    Condition,
    ControllerState,
    Failure,
    Outcome,
    OutcomeKind,
    esc_fields,
    esc_status_update,
    esm_status_update,
    inspect_command,
    merge_conditions,
    simple_state,
)

T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T00:05:00Z"
T2 = "2026-01-01T00:10:00Z"

# metav1.Condition.reason, as the ESC CRD validates it (minLength 1 and this pattern).
REASON_PATTERN = re.compile(r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$")

READY = Outcome(OutcomeKind.READY, "Reconciled", "all 42 objects are applied")
DEGRADED = Outcome(OutcomeKind.DEGRADED, "IssuerNotFound", 'Issuer "ca" not found')
RETRYING = Outcome(OutcomeKind.RETRYING, "APIError", "GET /api/v1: 503 ServiceUnavailable")
IMAGES = {"externalSecretsImage": "registry.example/external-secrets:v1",
          "bitwardenSDKServerImage": None}


def by_type(conditions: list[JsonObject]) -> dict[str, JsonObject]:
    return {c["type"]: c for c in conditions}


def merged(target: object, patch: object) -> Any:
    """RFC 7386, as the API server applies a JSON merge patch: objects merge field by field
    (null removes a field), anything else replaces the target whole."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merged(result.get(key), value)
    return result


def status_after(status: JsonObject, patch: JsonObject | None) -> JsonObject:
    """What the server stores after the JSON merge patch `patch` of `.status`."""
    return merged(status, patch or {})  # type: ignore[no-any-return]


def written(outcome: Outcome, generation: int | None = 1, now: str = T0,
            status: JsonObject | None = None) -> JsonObject:
    patch = esc_status_update(status or {}, outcome, generation, IMAGES, now)
    assert patch is not None
    return status_after(status or {}, patch)


# --- Outcome → conditions -------------------------------------------------------------------


@pytest.mark.parametrize(("outcome", "expected"), [
    (READY, {"Ready": "True", "Degraded": "False", "Progressing": "False"}),
    (DEGRADED, {"Ready": "False", "Degraded": "True", "Progressing": "False"}),
    (RETRYING, {"Ready": "False", "Degraded": "False", "Progressing": "True"}),
], ids=["ready", "degraded", "retrying"])
def test_each_outcome_sets_all_three_conditions(outcome: Outcome,
                                                expected: dict[str, str]) -> None:
    conditions = outcome.conditions()
    assert {c.type: c.status for c in conditions} == expected
    assert tuple(c.type for c in conditions) == CONDITION_TYPES
    for condition in conditions:
        assert REASON_PATTERN.match(condition.reason), condition


def test_ready_carries_the_message_and_problems_are_explained() -> None:
    ready = {c.type: c for c in READY.conditions()}
    assert ready["Ready"].message == READY.message
    assert ready["Ready"].reason == "Reconciled"

    degraded = {c.type: c for c in DEGRADED.conditions()}
    assert degraded["Ready"].message == degraded["Degraded"].message == DEGRADED.message
    assert degraded["Degraded"].reason == "IssuerNotFound"
    assert degraded["Progressing"].reason == "WaitingForFix"

    retrying = {c.type: c for c in RETRYING.conditions()}
    assert retrying["Ready"].message == RETRYING.message
    assert retrying["Progressing"].reason == "APIError"
    assert retrying["Progressing"].message.startswith(RETRYING.message)
    assert "retrying" in retrying["Progressing"].message
    assert retrying["Degraded"].message == ""


# --- merge_conditions -----------------------------------------------------------------------


def test_first_conditions_take_the_current_time_and_generation() -> None:
    merged = merge_conditions([], READY.conditions(), 3, T0)
    assert [c["type"] for c in merged] == list(CONDITION_TYPES)
    for condition in merged:
        assert condition["lastTransitionTime"] == T0
        assert condition["observedGeneration"] == 3
    assert by_type(merged)["Ready"] == {"type": "Ready", "status": "True",
                                        "reason": "Reconciled", "message": READY.message,
                                        "lastTransitionTime": T0, "observedGeneration": 3}


def test_transition_time_moves_only_for_conditions_whose_status_flipped() -> None:
    before = merge_conditions([], READY.conditions(), 1, T0)
    after = by_type(merge_conditions(before, DEGRADED.conditions(), 1, T1))
    assert after["Ready"]["lastTransitionTime"] == T1        # True → False
    assert after["Degraded"]["lastTransitionTime"] == T1     # False → True
    assert after["Progressing"]["lastTransitionTime"] == T0  # False → False
    assert after["Progressing"]["reason"] == "WaitingForFix"  # reason follows anyway


def test_without_a_generation_no_observed_generation_is_written() -> None:
    merged = merge_conditions([], READY.conditions(), None, T0)
    assert all("observedGeneration" not in c for c in merged)


def test_conditions_of_other_writers_are_kept() -> None:
    foreign = {"type": "example.com/Audited", "status": "True", "reason": "AsExpected",
               "message": "",
               "lastTransitionTime": "2025-01-01T00:00:00Z"}
    merged = merge_conditions([foreign], READY.conditions(), 1, T0)
    assert foreign in merged
    assert len(merged) == 4


# --- esc_status_update: write only on change ------------------------------------------------


def test_the_first_pass_writes_conditions_and_images() -> None:
    patch = esc_status_update({}, READY, 1, {"externalSecretsImage": "es:v1",
                                             "bitwardenSDKServerImage": "bw:v1"}, T0)
    assert patch is not None
    assert [c["type"] for c in patch["conditions"]] == list(CONDITION_TYPES)
    assert patch["externalSecretsImage"] == "es:v1"
    assert patch["bitwardenSDKServerImage"] == "bw:v1"


@pytest.mark.parametrize("outcome", [READY, DEGRADED, RETRYING],
                         ids=["ready", "degraded", "retrying"])
def test_the_same_outcome_again_writes_nothing(outcome: Outcome) -> None:
    status = written(outcome)
    assert esc_status_update(status, outcome, 1, IMAGES, T1) is None


def test_a_new_generation_alone_is_written_keeping_transition_times() -> None:
    status = written(READY, generation=1)
    patch = esc_status_update(status, READY, 2, IMAGES, T1)
    assert patch is not None
    for condition in patch["conditions"]:
        assert condition["observedGeneration"] == 2
        assert condition["lastTransitionTime"] == T0


def test_a_new_message_alone_is_written_keeping_transition_times() -> None:
    status = written(READY)
    other = Outcome(OutcomeKind.READY, "Reconciled", "all 43 objects are applied")
    patch = esc_status_update(status, other, 1, IMAGES, T1)
    assert patch is not None
    ready = by_type(patch["conditions"])["Ready"]
    assert ready["message"] == other.message
    assert ready["lastTransitionTime"] == T0


def test_a_status_flip_is_written_with_new_transition_times() -> None:
    status = written(READY)
    patch = esc_status_update(status, RETRYING, 1, IMAGES, T1)
    assert patch is not None
    conditions = by_type(patch["conditions"])
    assert conditions["Ready"]["status"] == "False"
    assert conditions["Ready"]["lastTransitionTime"] == T1
    assert conditions["Progressing"]["status"] == "True"
    assert conditions["Progressing"]["lastTransitionTime"] == T1
    assert conditions["Degraded"]["lastTransitionTime"] == T0
    # Recovery flips them back.
    recovered = esc_status_update(status_after(status, patch), READY, 1, IMAGES, T2)
    assert recovered is not None
    assert by_type(recovered["conditions"])["Ready"]["lastTransitionTime"] == T2


def test_a_foreign_condition_does_not_cause_writes_and_survives_them() -> None:
    foreign = {"type": "example.com/Audited", "status": "True", "reason": "AsExpected",
               "message": "",
               "lastTransitionTime": "2025-01-01T00:00:00Z"}
    status = written(READY)
    status["conditions"] = [*status["conditions"], foreign]
    assert esc_status_update(status, READY, 1, IMAGES, T1) is None
    patch = esc_status_update(status, DEGRADED, 1, IMAGES, T1)
    assert patch is not None
    assert foreign in patch["conditions"]


# --- Upgradeable: the upgrade gate's decision beside the outcome -----------------------------

UPGRADEABLE_TRUE = Condition("Upgradeable", "True", "AsExpected", "nothing holds it back")
NOT_UPGRADEABLE = Condition("Upgradeable", "False", "UnsupportedOverrides",
                            "1 componentConfigs[].overrideArgs are set; then upgrade")


def test_upgradeable_is_written_once_and_moves_its_time_only_when_it_flips() -> None:
    patch = esc_status_update({}, READY, 1, IMAGES, T0, upgradeable=UPGRADEABLE_TRUE)
    assert patch is not None
    assert [c["type"] for c in patch["conditions"]] == [*CONDITION_TYPES, "Upgradeable"]
    status = status_after({}, patch)
    assert by_type(status["conditions"])["Upgradeable"] == {
        "type": "Upgradeable", "status": "True", "reason": "AsExpected",
        "message": "nothing holds it back", "lastTransitionTime": T0, "observedGeneration": 1}
    # Steady: the same decision again is no write.
    assert esc_status_update(status, READY, 1, IMAGES, T1, upgradeable=UPGRADEABLE_TRUE) is None
    # It flips while Ready stays: only Upgradeable's time moves.
    patch = esc_status_update(status, READY, 1, IMAGES, T1, upgradeable=NOT_UPGRADEABLE)
    assert patch is not None
    conditions = by_type(patch["conditions"])
    assert (conditions["Upgradeable"]["status"], conditions["Upgradeable"]["reason"],
            conditions["Upgradeable"]["lastTransitionTime"]) == (
        "False", "UnsupportedOverrides", T1)
    assert conditions["Ready"]["lastTransitionTime"] == T0


def test_a_pass_that_could_not_decide_keeps_the_stored_upgradeable() -> None:
    status = status_after({}, esc_status_update({}, READY, 1, IMAGES, T0,
                                                upgradeable=NOT_UPGRADEABLE))
    stored = by_type(status["conditions"])["Upgradeable"]
    assert esc_status_update(status, READY, 1, IMAGES, T1) is None
    patch = esc_status_update(status, DEGRADED, 1, IMAGES, T1)
    assert patch is not None
    assert by_type(patch["conditions"])["Upgradeable"] == stored


def test_the_order_of_stored_conditions_does_not_cause_writes() -> None:
    status = written(DEGRADED)
    status["conditions"] = list(reversed(status["conditions"]))
    assert esc_status_update(status, DEGRADED, 1, IMAGES, T1) is None


def test_unknown_images_leave_the_recorded_ones_alone() -> None:
    status = written(READY)
    status["bitwardenSDKServerImage"] = "bw:v1"
    patch = esc_status_update(status, DEGRADED, 1, {}, T1)
    assert patch is not None
    assert "externalSecretsImage" not in patch
    assert "bitwardenSDKServerImage" not in patch
    assert esc_status_update(status_after(status, patch), DEGRADED, 1, {}, T2) is None


def test_changed_images_alone_are_written() -> None:
    status = written(READY)
    patch = esc_status_update(status, READY, 1, {**IMAGES,
                                                 "externalSecretsImage": "registry.example/es:v2"},
                              T1)
    assert patch == {"externalSecretsImage": "registry.example/es:v2"}


def test_bitwarden_switched_off_removes_its_image() -> None:
    status = written(READY)
    patch = esc_status_update(status, READY, 1, {**IMAGES, "bitwardenSDKServerImage": "bw:v1"},
                              T1)
    assert patch == {"bitwardenSDKServerImage": "bw:v1"}
    status = status_after(status, patch)
    patch = esc_status_update(status, READY, 1, IMAGES, T2)
    assert patch == {"bitwardenSDKServerImage": None}  # null: a merge patch removes it
    assert "bitwardenSDKServerImage" not in status_after(status, patch)


# --- ESM controllerStatuses -----------------------------------------------------------------


def test_esc_fields_record_what_is_in_effect_and_the_failure() -> None:
    config = effective_config(None, None, OperatorEnvironment.from_environ({}))
    ready = esc_fields(config, Outcome(OutcomeKind.READY, "Reconciled", "ok", True))
    assert ready["operandNamespace"] == "external-secrets"
    assert ready["externalSecretsVersion"] == config.versions.external_secrets
    assert ready["externalSecretsImage"] == config.images.external_secrets
    assert ready["bitwardenSDKServerImage"] is None  # bitwarden is off: removed
    assert ready["failure"] is None                  # removed once a pass succeeds
    failed = Outcome(OutcomeKind.DEGRADED, "IssuerNotFound", "m",
                     failure=Failure(inspect="kubectl get issuers -n es", object="Issuer es/ca"))
    degraded = esc_fields(config, failed)
    assert degraded["failure"] == {"object": "Issuer es/ca", "request": None, "response": None,
                                   "inspect": "kubectl get issuers -n es", "message": "m"}
    assert "externalSecretsImage" not in degraded  # not applied: what was in effect stays
    assert degraded["awaited"] is None
    assert esc_fields(None, failed) == {"failure": degraded["failure"], "awaited": None}


def test_a_budget_that_is_not_rendered_is_named_in_status_without_leaving_ready() -> None:
    env = OperatorEnvironment.from_environ({})
    spec = ExternalSecretsConfigSpec.model_validate({"controllerConfig": {"componentConfigs": [
        {"componentName": "ExternalSecretsCoreController",
         "deploymentConfigs": {"replicas": 2, "podDisruptionBudget": {"minAvailable": 1}}},
        {"componentName": "Webhook",
         "deploymentConfigs": {"podDisruptionBudget": {"maxUnavailable": 1}}}]}})
    config = effective_config(spec, None, env)
    ready = Outcome(OutcomeKind.READY, "Reconciled", "ok", True)
    fields = esc_fields(config, ready)
    assert fields["ignoredSettings"] == [
        "spec.controllerConfig.componentConfigs[1].deploymentConfigs.podDisruptionBudget: not "
        "rendered: Webhook runs 1 replica and a PodDisruptionBudget could only block node "
        "drains; set replicas to 2 or more to get one, or remove podDisruptionBudget"]
    stored = status_after({}, esc_status_update({}, ready, 1, fields, T0))
    assert {c["type"]: c["status"] for c in stored["conditions"]}["Ready"] == "True"
    assert stored["ignoredSettings"] == fields["ignoredSettings"]
    # Once the budget is removed (or replicas raised) the field goes.
    plain = esc_fields(effective_config(None, None, env), ready)
    assert plain["ignoredSettings"] is None
    assert "ignoredSettings" not in status_after(stored, esc_status_update(
        stored, ready, 1, plain, T1))


def test_a_new_failure_replaces_every_field_of_the_one_before() -> None:
    """The server merges `.status.failure` field by field: the fields of an earlier failure
    that the new one does not have must be removed, not left beside it."""
    config = effective_config(None, None, OperatorEnvironment.from_environ({}))
    rejected = Outcome(OutcomeKind.DEGRADED, "ApplyRejected", "m", failure=Failure(
        object="Deployment es/external-secrets-webhook",
        request="PATCH /apis/apps/v1/namespaces/es/deployments/external-secrets-webhook",
        response="422 Invalid: denied", inspect="kubectl get deployment -n es x -o yaml"))
    missing = Outcome(OutcomeKind.DEGRADED, "TrustedCABundleNotFound", "m", failure=Failure(
        object="ConfigMap es/ca", inspect="kubectl get configmaps -n es"))
    first = status_after({}, esc_status_update({}, rejected, 1, esc_fields(config, rejected), T0))
    second = status_after(first, esc_status_update(first, missing, 1,
                                                   esc_fields(config, missing), T1))
    assert second["failure"] == {"object": "ConfigMap es/ca", "message": "m",
                                 "inspect": "kubectl get configmaps -n es"}
    # Stored as written: the next pass with the same failure writes nothing.
    assert esc_status_update(second, missing, 1, esc_fields(config, missing), T2) is None
    ready = Outcome(OutcomeKind.READY, "Reconciled", "ok", True)
    assert "failure" not in status_after(second, esc_status_update(
        second, ready, 1, esc_fields(config, ready), T2))


def test_the_fake_merges_nested_objects_as_the_server_does() -> None:
    stored = {"failure": {"object": "a", "request": "r"}, "conditions": [{"type": "Ready"}]}
    patch = {"failure": {"object": "b", "inspect": None}, "conditions": []}
    assert status_after(stored, patch) == {"failure": {"object": "b", "request": "r"},
                                           "conditions": []}


def test_inspect_commands_name_the_object() -> None:
    assert inspect_command("Deployment", "es", "x") == "kubectl get deployment -n es x -o yaml"
    assert inspect_command("ClusterRole", "", "x", "describe") == "kubectl describe clusterrole x"


def test_simple_state_pairs_ready_and_degraded() -> None:
    fine = simple_state(CONTROLLER_ESM, True, "Observed", "observed", 4)
    assert {c.type: (c.status, c.reason, c.message) for c in fine.conditions} == {
        "Ready": ("True", "Observed", "observed"), "Degraded": ("False", "AsExpected", "")}
    broken = simple_state(CONTROLLER_ESM, False, "InvalidGlobalConfig", "bad globalConfig", 4)
    assert {c.type: (c.status, c.reason, c.message) for c in broken.conditions} == {
        "Ready": ("False", "InvalidGlobalConfig", "bad globalConfig"),
        "Degraded": ("True", "InvalidGlobalConfig", "bad globalConfig")}


def test_a_controller_entry_has_reasons_and_transition_times() -> None:
    state = ControllerState(CONTROLLER_ESC, READY.conditions(), 7)
    entry = state.as_status(None, T0)
    assert entry["name"] == CONTROLLER_ESC
    assert entry["observedGeneration"] == 7
    assert entry["conditions"][0] == {"type": "Ready", "status": "True", "reason": "Reconciled",
                                      "message": READY.message, "lastTransitionTime": T0}
    assert "observedGeneration" not in ControllerState(CONTROLLER_ESC, (), None).as_status()
    # The time moves only with the status, as for the ExternalSecretsConfig's conditions.
    again = {c["type"]: c for c in state.as_status(entry, T1)["conditions"]}
    assert again["Ready"]["lastTransitionTime"] == T0
    flipped = ControllerState(CONTROLLER_ESC, DEGRADED.conditions(), 7).as_status(entry, T1)
    assert {c["type"]: c["lastTransitionTime"] for c in flipped["conditions"]} == {
        "Ready": T1, "Degraded": T1, "Progressing": T0}


def esm_states(outcome: Outcome = READY, esm_ok: bool = True) -> list[ControllerState]:
    return [ControllerState(CONTROLLER_ESC, outcome.conditions(), 1),
            simple_state(CONTROLLER_ESM, esm_ok, "Observed" if esm_ok else "Invalid",
                         "observed" if esm_ok else "bad", 2),
            simple_state(CONTROLLER_CRD_ANNOTATOR, True, "Inactive", "inactive", None)]


def test_esm_status_lists_every_controller_and_is_written_once() -> None:
    patch = esm_status_update({}, esm_states(), T0)
    assert patch is not None
    assert [e["name"] for e in patch["controllerStatuses"]] == [
        CONTROLLER_ESC, CONTROLLER_ESM, CONTROLLER_CRD_ANNOTATOR]
    assert patch["lastTransitionTime"] == T0
    assert patch["controllersReady"] == "3/3"
    assert esm_status_update(status_after({}, patch), esm_states(), T1) is None


@pytest.mark.parametrize(("states", "ready"), [
    (esm_states(DEGRADED), "2/3"), (esm_states(esm_ok=False), "2/3"), (esm_states()[:2], "2/2"),
], ids=["esc-degraded", "esm-degraded", "controller-gone"])
def test_esm_status_is_written_when_any_entry_changes(states: list[ControllerState],
                                                      ready: str) -> None:
    status = status_after({}, esm_status_update({}, esm_states(), T0))
    patch = esm_status_update(status, states, T1)
    assert patch is not None
    stored = {e["name"]: e for e in status["controllerStatuses"]}
    assert patch["controllerStatuses"] == [state.as_status(stored[state.name], T1)
                                           for state in states]
    assert patch["lastTransitionTime"] == T1
    assert patch["controllersReady"] == ready


def test_esm_condition_statuses_are_valid() -> None:
    patch = esm_status_update({}, esm_states(RETRYING), T0)
    assert patch is not None
    for controller in patch["controllerStatuses"]:
        for condition in controller["conditions"]:
            assert condition["status"] in {"True", "False"}
            assert isinstance(condition["message"], str)
            assert REASON_PATTERN.match(condition["reason"])
