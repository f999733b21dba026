"""Is the applied operand working, as far as the cluster can show it? Pure functions.

After a pass has applied everything, Ready needs more than "accepted by the API server":

- every Deployment has rolled out its current generation and all its replicas are available;
- every webhook of both ValidatingWebhookConfigurations carries a `caBundle` (the API server
  cannot call a webhook it cannot trust);
- every Certificate the operator asked cert-manager for is Ready.

What is not yet so is *awaited* (Progressing). Two states need the administrator and are
*problems* (Degraded): a Deployment past its progress deadline, and pods the scheduler cannot
place. Each message names the object and the cause, taken from the object's own status and,
for a Deployment that is not available, from its pods.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from manager.kube import JsonObject

SCHEDULING_FIELDS = ("spec.appConfig.nodeSelector, affinity and tolerations (or the "
                     "ExternalSecretsManager's globalConfig)")


@dataclass(frozen=True)
class Problem:
    reason: str
    message: str
    subject: str = ""
    """The object at fault ("Deployment ns/name")."""
    inspect: str = ""
    """The command that shows more about it."""


@dataclass(frozen=True)
class Readiness:
    awaited: tuple[str, ...] = ()
    problems: tuple[Problem, ...] = ()

    @property
    def ready(self) -> bool:
        return not self.awaited and not self.problems

    def __add__(self, other: Readiness) -> Readiness:
        return Readiness(self.awaited + other.awaited, self.problems + other.problems)


def _where(obj: JsonObject) -> str:
    meta = obj.get("metadata", {})
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def _condition(obj: JsonObject, kind: str) -> JsonObject | None:
    for condition in (obj.get("status") or {}).get("conditions") or []:
        if condition.get("type") == kind:
            return dict(condition)
    return None


def deployment_available(deployment: JsonObject) -> bool:
    """Rolled out (current generation observed, every replica updated) and all available."""
    spec, status = deployment.get("spec") or {}, deployment.get("status") or {}
    wanted = int(spec.get("replicas", 1))
    generation = deployment.get("metadata", {}).get("generation", 0)
    return bool(status.get("observedGeneration", 0) >= generation
                and status.get("updatedReplicas", 0) >= wanted
                and status.get("availableReplicas", 0) >= wanted
                and status.get("replicas", 0) <= wanted)  # no old pods left


def deployment_readiness(deployment: JsonObject, pods: Sequence[JsonObject]) -> Readiness:
    """A Deployment's share: nothing when available, else what is awaited or wrong."""
    if deployment_available(deployment):
        return Readiness()
    where = f"Deployment {_where(deployment)}"
    progressing = _condition(deployment, "Progressing")
    if progressing and progressing.get("reason") == "ProgressDeadlineExceeded":
        return Readiness(problems=(Problem(
            "DeploymentProgressDeadlineExceeded",
            f"{where} did not become available within its progress deadline: "
            f"{progressing.get('message', '')}{pods_summary(pods)}",
            where, _describe("deployment", deployment)),))
    unschedulable = [pod for pod in pods if _unschedulable(pod)]
    if unschedulable:
        scheduled = _condition(unschedulable[0], "PodScheduled") or {}
        return Readiness(problems=(Problem(
            "PodsUnschedulable",
            f"{where}: pod {_where(unschedulable[0])} cannot be scheduled: "
            f"{scheduled.get('message', '')}. Check {SCHEDULING_FIELDS}",
            f"Pod {_where(unschedulable[0])}", _describe("pod", unschedulable[0])),))
    return Readiness(awaited=(f"{where}: {_rollout(deployment)}{pods_summary(pods)}",))


def _describe(kind: str, obj: JsonObject) -> str:
    meta = obj.get("metadata", {})
    return f"kubectl describe {kind} -n {meta.get('namespace')} {meta.get('name')}"


def _rollout(deployment: JsonObject) -> str:
    status = deployment.get("status") or {}
    wanted = int((deployment.get("spec") or {}).get("replicas", 1))
    if status.get("observedGeneration", 0) < deployment.get("metadata", {}).get("generation", 0):
        return "its controller has not seen the latest change yet"
    updated, total = status.get("updatedReplicas", 0), status.get("replicas", 0)
    if total > updated:
        return (f"rolling out, {updated} of {wanted} replicas updated and {total - updated} "
                "old still running")
    return f"{status.get('availableReplicas', 0)} of {wanted} replicas available"


def _unschedulable(pod: JsonObject) -> bool:
    scheduled = _condition(pod, "PodScheduled")
    return bool(scheduled and scheduled.get("status") == "False"
                and scheduled.get("reason") == "Unschedulable")


def pods_summary(pods: Sequence[JsonObject]) -> str:
    """`; pod X: container Y waiting: Reason: message` for the first pod that is not ready."""
    for pod in pods:
        for status in (pod.get("status") or {}).get("containerStatuses") or []:
            if status.get("ready"):
                continue
            state = status.get("state") or {}
            if "waiting" in state:
                waiting = state["waiting"]
                detail = f"waiting: {waiting.get('reason', '')}"
                if waiting.get("message"):
                    detail += f": {waiting['message']}"
            elif "terminated" in state:
                detail = f"terminated with exit code {state['terminated'].get('exitCode')}"
            else:
                detail = "running, not ready"
            restarts = status.get("restartCount", 0)
            more = f" (restarted {restarts} times)" if restarts else ""
            return f"; pod {_where(pod)}: container {status.get('name')} {detail}{more}"
    return ""


def webhook_readiness(configuration: JsonObject, filled_by: str) -> Readiness:
    missing = [w.get("name", "?") for w in configuration.get("webhooks") or []
               if not (w.get("clientConfig") or {}).get("caBundle")]
    if not missing:
        return Readiness()
    return Readiness(awaited=(
        f"ValidatingWebhookConfiguration {_where(configuration)}: no caBundle yet for "
        f"{', '.join(missing)} ({filled_by} fills it)",))


def certificate_readiness(certificate: JsonObject) -> Readiness:
    ready = _condition(certificate, "Ready")
    if ready and ready.get("status") == "True":
        return Readiness()
    detail = (f"{ready.get('reason', '')}: {ready.get('message', '')}" if ready
              else "cert-manager has not issued it yet")
    return Readiness(awaited=(f"Certificate {_where(certificate)} is not Ready: {detail}",))


def certificate_ready(certificate: JsonObject | None) -> bool:
    return certificate is not None and certificate_readiness(certificate).ready


def combine(parts: Iterable[Readiness]) -> Readiness:
    total = Readiness()
    for part in parts:
        total = total + part
    return total
