"""What makes the operand Ready, Progressing or Degraded (manager.controllers.readiness)."""

from __future__ import annotations

from typing import Any

from manager.controllers import readiness
from manager.kube import JsonObject


def deployment(generation: int = 2, wanted: int = 1, **status: Any) -> JsonObject:
    return {"metadata": {"name": "external-secrets-webhook", "namespace": "es",
                         "generation": generation},
            "spec": {"replicas": wanted}, "status": status}


AVAILABLE = {"observedGeneration": 2, "replicas": 1, "updatedReplicas": 1,
             "availableReplicas": 1}


def pod(name: str = "webhook-1", **status: Any) -> JsonObject:
    return {"metadata": {"name": name, "namespace": "es"}, "status": status}


def test_an_available_deployment_is_ready() -> None:
    assert readiness.deployment_readiness(deployment(**AVAILABLE), []).ready


def test_an_unobserved_generation_is_awaited() -> None:
    result = readiness.deployment_readiness(deployment(**{**AVAILABLE,
                                                          "observedGeneration": 1}), [])
    assert result.awaited == ("Deployment es/external-secrets-webhook: its controller has "
                              "not seen the latest change yet",)


def test_old_pods_still_running_means_the_rollout_is_not_done() -> None:
    rolling = {**AVAILABLE, "replicas": 2, "availableReplicas": 1}
    assert not readiness.deployment_available(deployment(**rolling))
    (text,) = readiness.deployment_readiness(deployment(**rolling), []).awaited
    assert "rolling out, 1 of 1 replicas updated and 1 old still running" in text


def test_a_waiting_container_is_named_with_its_reason() -> None:
    waiting = pod(containerStatuses=[{"name": "webhook", "ready": False, "restartCount": 3,
                                      "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                            "message": "back-off 8s"}}}])
    result = readiness.deployment_readiness(deployment(observedGeneration=2), [waiting])
    (text,) = result.awaited
    assert "Deployment es/external-secrets-webhook: 0 of 1 replicas available" in text
    assert "pod es/webhook-1: container webhook waiting: CrashLoopBackOff: back-off 8s" in text
    assert "(restarted 3 times)" in text


def test_progress_deadline_exceeded_is_a_problem() -> None:
    stuck = deployment(observedGeneration=2, conditions=[{
        "type": "Progressing", "status": "False", "reason": "ProgressDeadlineExceeded",
        "message": 'ReplicaSet "x" has timed out progressing.'}])
    (problem,) = readiness.deployment_readiness(stuck, []).problems
    assert problem.reason == "DeploymentProgressDeadlineExceeded"
    assert "es/external-secrets-webhook" in problem.message
    assert "timed out progressing" in problem.message


def test_unschedulable_pods_are_a_problem_that_names_the_fields_to_check() -> None:
    pending = pod(conditions=[{"type": "PodScheduled", "status": "False",
                               "reason": "Unschedulable",
                               "message": "0/2 nodes are available: 2 node(s) didn't match "
                                          "Pod's node affinity/selector."}])
    (problem,) = readiness.deployment_readiness(deployment(observedGeneration=2),
                                                [pending]).problems
    assert problem.reason == "PodsUnschedulable"
    assert "didn't match Pod's node affinity/selector" in problem.message
    assert "spec.appConfig.nodeSelector" in problem.message


def test_a_webhook_without_ca_bundle_is_awaited_and_says_who_fills_it() -> None:
    configuration = {"metadata": {"name": "secretstore-validate"}, "webhooks": [
        {"name": "a", "clientConfig": {"caBundle": "Zm9v"}}, {"name": "b", "clientConfig": {}}]}
    (text,) = readiness.webhook_readiness(configuration, "the cert-controller").awaited
    assert "secretstore-validate: no caBundle yet for b (the cert-controller fills it)" in text
    configuration["webhooks"][1]["clientConfig"]["caBundle"] = "YmFy"
    assert readiness.webhook_readiness(configuration, "the cert-controller").ready


def test_certificates_are_ready_only_with_a_true_ready_condition() -> None:
    certificate: JsonObject = {"metadata": {"name": "external-secrets-webhook",
                                            "namespace": "es"}}
    assert not readiness.certificate_ready(certificate)
    assert not readiness.certificate_ready(None)
    certificate["status"] = {"conditions": [{"type": "Ready", "status": "False",
                                             "reason": "Issuing", "message": "pending"}]}
    (text,) = readiness.certificate_readiness(certificate).awaited
    assert text.endswith("is not Ready: Issuing: pending")
    certificate["status"]["conditions"][0]["status"] = "True"
    assert readiness.certificate_ready(certificate)


def test_parts_combine_in_order() -> None:
    first = readiness.Readiness(awaited=("a",))
    second = readiness.Readiness(problems=(readiness.Problem("R", "b"),))
    total = readiness.combine([first, readiness.Readiness(), second])
    assert total.awaited == ("a",)
    assert total.problems == (readiness.Problem("R", "b"),)
    assert not total.ready
