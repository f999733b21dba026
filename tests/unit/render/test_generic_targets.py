"""The ExternalSecretsManager feature UnsafeAllowGenericTargets: the controller's flag and the
RBAC for ConfigMap targets only while it is on, and the warning in the ESM status."""

from __future__ import annotations

from typing import Any

import pytest

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import (
    UNSAFE_ALLOW_GENERIC_TARGETS,
    EffectiveConfig,
    OperatorEnvironment,
    effective_config,
    unknown_features,
)
from manager.names import GENERIC_TARGETS_ROLE
from manager.render import DesiredState, render_operand
from manager.reporting import esm_status, status, summary

FLAG = "--unsafe-allow-generic-targets=true"
ON = {"features": [{"name": UNSAFE_ALLOW_GENERIC_TARGETS, "enabled": "true"}]}


def configured(esm: dict[str, Any] | None, app: dict[str, Any] | None = None,
               namespace: str = "eso") -> EffectiveConfig:
    esc: dict[str, Any] = {"controllerConfig": {"namespace": namespace}}
    if app:
        esc["appConfig"] = app
    return effective_config(ExternalSecretsConfigSpec.model_validate(esc),
                            ExternalSecretsManagerSpec.model_validate(esm) if esm is not None
                            else None, OperatorEnvironment.from_environ({}))


def by_key(state: DesiredState) -> dict[tuple[str, str], dict[str, Any]]:
    return {(obj["kind"], obj["metadata"]["name"]): obj for obj in state.objects()}


def container_args(state: DesiredState) -> dict[str, list[str]]:
    return {obj["metadata"]["name"]: obj["spec"]["template"]["spec"]["containers"][0]
            .get("args", []) for obj in state.objects() if obj["kind"] == "Deployment"}


def grants(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(group, resource, verb) for rule in role["rules"] for group in rule["apiGroups"]
            for resource in rule["resources"] for verb in rule["verbs"]}


def generic_objects(state: DesiredState) -> set[tuple[str, str]]:
    return {key for key in by_key(state) if key[1] == GENERIC_TARGETS_ROLE}


@pytest.mark.parametrize("esm", [
    None, {}, {"features": [{"name": UNSAFE_ALLOW_GENERIC_TARGETS, "enabled": "false"}]},
    {"features": [{"name": "OperandMonitoring", "enabled": "true"}]},
])
def test_off_by_default_and_when_disabled_no_flag_and_no_extra_rbac(
        esm: dict[str, Any] | None) -> None:
    config = configured(esm)
    assert not config.generic_targets
    state = render_operand(config)
    assert not [arg for args in container_args(state).values() for arg in args
                if "generic-targets" in arg]
    assert generic_objects(state) == set()


def test_on_the_controller_alone_gets_the_flag_once() -> None:
    args = container_args(render_operand(configured(ON)))
    assert args["external-secrets"].count(FLAG) == 1
    assert [name for name, found in args.items() if FLAG in found] == ["external-secrets"]


def test_on_a_cluster_role_lets_the_controller_write_configmaps_and_nothing_else() -> None:
    state = render_operand(configured(ON))
    objects = by_key(state)
    assert generic_objects(state) == {("ClusterRole", GENERIC_TARGETS_ROLE),
                                      ("ClusterRoleBinding", GENERIC_TARGETS_ROLE)}
    # Reading ConfigMaps is the controller's anyway; the generic path creates, updates (a
    # full Update, no patch) and deletes its targets.
    assert grants(objects[("ClusterRole", GENERIC_TARGETS_ROLE)]) == {
        ("", "configmaps", "create"), ("", "configmaps", "update"),
        ("", "configmaps", "delete")}
    controller_role = objects[("ClusterRole", "external-secrets-controller")]
    assert {("", "configmaps", verb) for verb in ("get", "list", "watch")} <= grants(
        controller_role)
    binding = objects[("ClusterRoleBinding", GENERIC_TARGETS_ROLE)]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io",
                                  "kind": "ClusterRole", "name": GENERIC_TARGETS_ROLE}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "external-secrets",
                                    "namespace": "eso"}]
    # The binding comes after its role, in the stage of bindings.
    order = [(obj["kind"], obj["metadata"]["name"]) for obj in state.objects()]
    assert (order.index(("ClusterRole", GENERIC_TARGETS_ROLE))
            < order.index(("ClusterRoleBinding", GENERIC_TARGETS_ROLE)))


def test_with_an_operating_namespace_the_right_is_a_role_in_that_namespace_only() -> None:
    state = render_operand(configured(ON, {"operatingNamespace": "team-a"}))
    objects = by_key(state)
    assert generic_objects(state) == {("Role", GENERIC_TARGETS_ROLE),
                                      ("RoleBinding", GENERIC_TARGETS_ROLE)}
    role, binding = objects[("Role", GENERIC_TARGETS_ROLE)], objects[("RoleBinding",
                                                                       GENERIC_TARGETS_ROLE)]
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == "team-a"
    assert grants(role) == {("", "configmaps", "create"), ("", "configmaps", "update"),
                            ("", "configmaps", "delete")}
    assert binding["roleRef"]["kind"] == "Role"
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "external-secrets",
                                    "namespace": "eso"}]
    assert FLAG in container_args(state)["external-secrets"]


def test_the_feature_is_known_so_it_is_not_reported_as_unknown() -> None:
    spec = ExternalSecretsManagerSpec.model_validate(
        {"features": [*ON["features"], {"name": "TechPreviewX", "enabled": "true"}]})
    assert unknown_features(spec) == ("TechPreviewX",)


# --- the ESM status -----------------------------------------------------------------------


def esm(spec: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": "cluster", "generation": 4}, "spec": spec}


def conditions(state: status.ControllerState) -> dict[str, status.Condition]:
    return {condition.type: condition for condition in state.conditions}


@pytest.mark.parametrize("config", [None, "cluster-wide"])
def test_while_on_the_esm_entry_warns_ready_and_not_degraded(config: str | None) -> None:
    effective = configured(ON) if config else None
    state = esm_status.manager_state(esm(ON), None, effective)
    found = conditions(state)
    assert (found["Ready"].status, found["Ready"].reason) == ("True", "GenericTargetsEnabled")
    assert (found["Degraded"].status, found["Degraded"].reason) == ("False", "AsExpected")
    whole = found["Ready"].message
    for part in ("slower", "unencrypted at rest", "reads a ConfigMap target",
                 "create, update and delete ConfigMaps in every namespace",
                 f"ClusterRole {GENERIC_TARGETS_ROLE}", '"Generic targets"'):
        assert part in whole, part
    line = state.as_status(None, "T0")["conditions"][0]["message"]
    assert line == esm_status.GENERIC_TARGETS_LINE
    assert len(line) <= summary.LIMIT
    # The entry carries the summary; an Event about the ESM carries the whole text.
    [event] = esm_status.esm_events(esm(ON), [state])
    assert (event.type, event.reason) == ("Normal", "GenericTargetsEnabled")
    assert whole in event.note


def test_with_an_operating_namespace_the_warning_names_the_role_there() -> None:
    effective = configured(ON, {"operatingNamespace": "team-a"})
    whole = conditions(esm_status.manager_state(esm(ON), None, effective))["Ready"].message
    assert f"ConfigMaps in namespace team-a (Role {GENERIC_TARGETS_ROLE})" in whole
    assert "every namespace" not in whole


def test_off_the_entry_says_nothing_of_it() -> None:
    off = {"features": [{"name": UNSAFE_ALLOW_GENERIC_TARGETS, "enabled": "false"}]}
    found = conditions(esm_status.manager_state(esm(off), None, configured(off)))
    assert found["Ready"].reason == "Observed"
    assert UNSAFE_ALLOW_GENERIC_TARGETS not in found["Ready"].message


def test_the_warning_joins_other_news_without_hiding_it() -> None:
    # A feature without effect stays the reason (the thing to act on); the warning follows.
    note = "feature OperandMonitoring is enabled but has no effect: not served"
    both = {"features": [*ON["features"], {"name": "OperandMonitoring", "enabled": "true"}]}
    ready = conditions(esm_status.manager_state(esm(both), None, configured(both), note))["Ready"]
    assert (ready.status, ready.reason) == ("True", "FeatureWithoutEffect")
    assert ready.message.index(note) < ready.message.index(UNSAFE_ALLOW_GENERIC_TARGETS)
    # An unknown feature keeps the entry Degraded; the warning is said as well.
    unknown = {"features": [*ON["features"], {"name": "TechPreviewX", "enabled": "true"}]}
    found = conditions(esm_status.manager_state(esm(unknown), None, None))
    assert (found["Degraded"].status, found["Degraded"].reason) == ("True", "UnknownFeature")
    assert "(known: OperandMonitoring, UnsafeAllowGenericTargets)" in found["Ready"].message
    assert "is on: an ExternalSecret with spec.target.manifest" in found["Ready"].message
    # An invalid globalConfig is the one thing said.
    broken = conditions(esm_status.manager_state(esm(ON), "spec.globalConfig: bad", None))
    assert broken["Ready"].message == "spec.globalConfig: bad"
