"""What makes the operand Ready, Progressing or Degraded (manager.steps.readiness)."""

from __future__ import annotations

import base64
from datetime import datetime
from typing import Any

from manager.client.kube import JsonObject
from manager.steps import readiness


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
    assert result.awaited == (readiness.Awaited(
        "Deployment es/external-secrets-webhook",
        "its controller has not seen the latest change yet"),)


def test_old_pods_still_running_means_the_rollout_is_not_done() -> None:
    rolling = {**AVAILABLE, "replicas": 2, "availableReplicas": 1}
    assert not readiness.deployment_available(deployment(**rolling))
    (text,) = map(str, readiness.deployment_readiness(deployment(**rolling), []).awaited)
    assert "rolling out, 1 of 1 replicas updated and 1 old still running" in text


def test_a_waiting_container_is_named_with_its_reason() -> None:
    waiting = pod(containerStatuses=[{"name": "webhook", "ready": False, "restartCount": 3,
                                      "state": {"waiting": {"reason": "CrashLoopBackOff",
                                                            "message": "back-off 8s"}}}])
    result = readiness.deployment_readiness(deployment(observedGeneration=2), [waiting])
    (item,) = result.awaited
    assert item.subject == "Deployment es/external-secrets-webhook"
    assert item.detail.startswith("0 of 1 replicas available; pod es/webhook-1")
    text = str(item)
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
    (text,) = map(str, readiness.webhook_readiness(configuration, "the cert-controller").awaited)
    assert "secretstore-validate: no caBundle yet for b (the cert-controller fills it)" in text
    configuration["webhooks"][1]["clientConfig"]["caBundle"] = "YmFy"
    assert readiness.webhook_readiness(configuration, "the cert-controller").ready


def _bundle(*bodies: bytes) -> str:
    """A base64 caBundle of PEM blocks (the check compares DER bytes, not signatures)."""
    pem = "".join(f"-----BEGIN CERTIFICATE-----\n{base64.b64encode(b).decode()}\n"
                  "-----END CERTIFICATE-----\n" for b in bodies)
    return base64.b64encode(pem.encode()).decode()


def _configuration(bundle: str, written: str = "2026-01-01T00:00:00Z") -> JsonObject:
    return {"metadata": {"name": "secretstore-validate",
                         "managedFields": [{"manager": "cert-controller", "time": written}]},
            "webhooks": [{"name": "a", "clientConfig": {"caBundle": bundle}}]}


T0 = datetime.fromisoformat("2026-01-01T00:00:00Z").timestamp()


def test_a_ca_bundle_must_include_the_ca_the_webhook_serves() -> None:
    serving = readiness.ServingCA(_bundle(b"new-ca"), "Secret es/external-secrets-webhook", T0)
    # Both CAs (a switch in progress) or the served one alone: trusted.
    assert readiness.webhook_readiness(_configuration(_bundle(b"old-ca", b"new-ca")),
                                       "the cert-controller", serving, T0 + 600).ready
    assert readiness.webhook_readiness(_configuration(_bundle(b"new-ca")),
                                       "the cert-controller", serving, T0 + 600).ready
    # A stale CA: awaited at first (its filler needs a moment), then a problem naming it.
    stale = _configuration(_bundle(b"old-ca"))
    (text,) = map(str, readiness.webhook_readiness(stale, "the cert-controller", serving,
                                                   T0 + 5).awaited)
    assert "does not include the CA of the certificate the webhook serves" in text
    assert "(Secret es/external-secrets-webhook)" in text
    (problem,) = readiness.webhook_readiness(stale, "the cert-controller", serving,
                                             T0 + readiness.TRUST_GRACE_SECONDS + 1).problems
    assert problem.reason == "WebhookCABundleStale"
    assert problem.subject == "ValidatingWebhookConfiguration secretstore-validate"
    assert "The cert-controller fills it" in problem.message
    # The grace runs from the last write of either object.
    later = readiness.ServingCA(serving.ca, serving.secret, T0 + 300)
    assert readiness.webhook_readiness(stale, "x", later, T0 + 310).awaited
    # No event marks the end of the grace: the awaited item says when it comes.
    assert readiness.webhook_readiness(stale, "x", later, T0 + 310).until == \
        T0 + 300 + readiness.TRUST_GRACE_SECONDS


def test_without_a_known_served_ca_only_presence_is_checked() -> None:
    configuration = _configuration(_bundle(b"any"))
    assert readiness.webhook_readiness(configuration, "x", None, T0 + 600).ready
    unreadable = readiness.ServingCA("not base64!", "Secret es/x", T0)
    assert readiness.webhook_readiness(configuration, "x", unreadable, T0 + 600).ready


def test_certificates_are_ready_only_with_a_true_ready_condition() -> None:
    certificate: JsonObject = {"metadata": {"name": "external-secrets-webhook",
                                            "namespace": "es"}}
    assert not readiness.certificate_ready(certificate)
    assert not readiness.certificate_ready(None)
    certificate["status"] = {"conditions": [{"type": "Ready", "status": "False",
                                             "reason": "Issuing", "message": "pending"}]}
    (item,) = readiness.certificate_readiness(certificate).awaited
    assert item == readiness.Awaited("Certificate es/external-secrets-webhook",
                                     "not Ready: Issuing: pending")
    certificate["status"]["conditions"][0]["status"] = "True"
    assert readiness.certificate_ready(certificate)


def test_parts_combine_in_order() -> None:
    first = readiness.Readiness(awaited=(readiness.Awaited("a", "x"),))
    second = readiness.Readiness(problems=(readiness.Problem("R", "b"),))
    total = readiness.combine([first, readiness.Readiness(), second])
    assert total.awaited == (readiness.Awaited("a", "x"),)
    assert total.problems == (readiness.Problem("R", "b"),)
    assert not total.ready
    assert total.until is None
    timed = [readiness.Readiness(awaited=("c",), until=T0 + 9),
             readiness.Readiness(awaited=("d",), until=T0 + 5)]
    assert readiness.combine([first, *timed]).until == T0 + 5  # the earliest
