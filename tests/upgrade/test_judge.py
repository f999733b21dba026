"""The upgrade test's verdict on its own: it must catch what it is there to catch."""

from __future__ import annotations

from typing import Any

from manager.render.context import LOADED_CONTENT_ANNOTATION
from tests.upgrade.snapshot import (
    DeploymentState,
    Rendering,
    Renderings,
    Snapshot,
    differences,
    judge,
)

SERVICE = ("Service", "ns", "webhook")
DEPLOYMENT = ("Deployment", "ns", "controller")


def spec(args: list[str]) -> dict[str, Any]:
    return {"replicas": 1, "template": {"spec": {"containers": [{"name": "c", "args": args}]}}}


def snapshot(service_uid: str = "s1", deployment: DeploymentState | None = None,
             with_service: bool = True) -> Snapshot:
    deployment = deployment or DeploymentState("d1", 1, spec(["--a"]))
    objects = {DEPLOYMENT: (deployment.uid, "1")}
    if with_service:
        objects[SERVICE] = (service_uid, "1")
    return Snapshot(objects, {"controller": deployment})


def renderings(previous_args: list[str], current_args: list[str],
               current_keys: frozenset[tuple[str, str, str]] = frozenset({SERVICE, DEPLOYMENT}),
               ) -> Renderings:
    return Renderings("v0.1.0",
                      Rendering(frozenset({SERVICE, DEPLOYMENT}),
                                {"controller": spec(previous_args)}),
                      Rendering(current_keys, {"controller": spec(current_args)}))


def test_an_unchanged_operand_passes() -> None:
    verdict = judge(snapshot(), snapshot(), renderings(["--a"], ["--a"]))
    assert verdict.problems == []
    assert "2 of 2 objects kept their uid" in verdict.notes
    assert any("controller: not rolled" in note for note in verdict.notes)


def test_a_re_created_object_is_a_problem() -> None:
    verdict = judge(snapshot(), snapshot(service_uid="s2"), renderings(["--a"], ["--a"]))
    assert verdict.problems == ["Service ns/webhook was re-created (uid s1 -> s2)"]


def test_a_deleted_object_is_a_problem_unless_no_longer_rendered() -> None:
    after = snapshot(with_service=False)
    verdict = judge(snapshot(), after, renderings(["--a"], ["--a"]))
    assert verdict.problems == ["Service ns/webhook was deleted by the upgrade"]
    verdict = judge(snapshot(), after, renderings(["--a"], ["--a"], frozenset({DEPLOYMENT})))
    assert verdict.problems == []
    assert any("no longer renders it" in note for note in verdict.notes)


def test_a_roll_is_expected_only_when_the_rendered_template_changed() -> None:
    rolled = snapshot(deployment=DeploymentState("d1", 2, spec(["--b"])))
    verdict = judge(snapshot(), rolled, renderings(["--a"], ["--b"]))
    assert verdict.problems == []
    assert any("rolled" in n and "/spec/containers/0/args/0" in n for n in verdict.notes)
    verdict = judge(snapshot(), rolled, renderings(["--a"], ["--a"]))
    assert len(verdict.problems) == 1
    assert "although both releases render the same pod template" in verdict.problems[0]


def test_a_roll_that_only_adds_the_loaded_content_digest_is_expected() -> None:
    """`render` cannot see the digest (a cluster fact): the one roll that adds it is noted;
    anything else that changes with it is still a problem."""
    digested = spec(["--a"])
    digested["template"] = {**digested["template"], "metadata": {
        **(digested["template"].get("metadata") or {}),
        "annotations": {LOADED_CONTENT_ANNOTATION: "0123456789abcdef"}}}
    rolled = snapshot(deployment=DeploymentState("d1", 2, digested))
    verdict = judge(snapshot(), rolled, renderings(["--a"], ["--a"]))
    assert verdict.problems == []
    assert any("rolled once, to take" in note for note in verdict.notes)
    digested["template"]["spec"] = {**digested["template"]["spec"], "hostNetwork": True}
    verdict = judge(snapshot(), snapshot(deployment=DeploymentState("d1", 2, digested)),
                    renderings(["--a"], ["--a"]))
    assert len(verdict.problems) == 1


def test_a_generation_bump_without_a_rendered_change_is_a_problem() -> None:
    bumped_spec = {**spec(["--a"]), "replicas": 2}
    bumped = snapshot(deployment=DeploymentState("d1", 2, bumped_spec))
    verdict = judge(snapshot(), bumped, renderings(["--a"], ["--a"]))
    assert verdict.problems == [
        "Deployment controller: generation 1 -> 2 although both releases render the same spec "
        "(['/replicas'])"]


def test_differences_names_paths() -> None:
    assert differences({"a": [1, {"b": 2}]}, {"a": [1, {"b": 3}], "c": 1}) == ["/a/1/b", "/c"]
    assert differences([1], [1, 2]) == ["/"]
