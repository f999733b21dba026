"""Is the applied operand working, as far as the cluster can show it? Pure functions.

After a pass has applied everything, Ready needs more than "accepted by the API server":

- every Deployment has rolled out its current generation and all its replicas are available;
- every webhook of both ValidatingWebhookConfigurations carries a `caBundle` that includes the
  CA of the certificate the webhook serves (the API server cannot call a webhook it cannot
  trust): a caBundle that is merely present may be stale, left by an earlier certificate
  source or planted by anyone;
- every Certificate the operator asked cert-manager for is Ready.

What is not yet so is *awaited* (Progressing). Two states need the administrator and are
*problems* (Degraded): a Deployment past its progress deadline, pods the scheduler cannot
place, and a caBundle that has not trusted the served certificate for TRUST_GRACE_SECONDS.
Each message names the object and the cause, taken from the object's own status and,
for a Deployment that is not available, from its pods.

Nothing here is polled: every input is watched (Deployments, Certificates and the webhook
configurations by the child watches, whose fingerprints include what decides Ready; the
operand's pods by a status watch in the operand namespace; the served CA's Secret), and
the one change that time alone makes (a stale caBundle outlasting its grace) is announced
by `Readiness.until`, at which the pass asks for a recheck.
"""

from __future__ import annotations

import base64
import binascii
import re
import ssl
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from manager.apply import ObjectRef
from manager.client.kube import JsonObject

# How long a caBundle may lag behind the served certificate before the administrator is
# told (its filler, the cert-controller or cert-manager's CA injector, needs seconds).
TRUST_GRACE_SECONDS = 120.0
PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.DOTALL)

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
class Awaited:
    """One object the operand waits for, and what it lacks (`status.awaited`)."""

    subject: str
    """The object ("Deployment ns/name")."""
    detail: str
    """What is missing, with the cause its status or its pods give."""

    def __str__(self) -> str:
        return f"{self.subject}: {self.detail}"


@dataclass(frozen=True)
class Readiness:
    awaited: tuple[Awaited, ...] = ()
    problems: tuple[Problem, ...] = ()
    until: float | None = None
    """When time alone turns something awaited into a problem (epoch seconds), if it will."""

    @property
    def ready(self) -> bool:
        return not self.awaited and not self.problems

    def __add__(self, other: Readiness) -> Readiness:
        times = [t for t in (self.until, other.until) if t is not None]
        return Readiness(self.awaited + other.awaited, self.problems + other.problems,
                         min(times, default=None))


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
    return Readiness(awaited=(Awaited(where, f"{_rollout(deployment)}{pods_summary(pods)}"),))


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


@dataclass(frozen=True)
class ServingCA:
    """The CA of the certificate the webhook serves: `ca.crt` of the Secret its pods mount
    (base64, as the API carries it), that Secret, and when it last changed (epoch seconds)."""

    ca: str
    secret: str
    changed: float


def certificates(bundle: str) -> frozenset[bytes]:
    """The DER certificates of a base64 PEM bundle (a caBundle, a ca.crt); none if unreadable."""
    try:
        text = base64.b64decode(bundle, validate=True).decode("ascii")
        return frozenset(ssl.PEM_cert_to_DER_cert(pem)
                         for pem in PEM_CERTIFICATE.findall(text))
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return frozenset()


def last_change(obj: JsonObject) -> float:
    """When any field manager last wrote the object (epoch seconds; 0 if unknown)."""
    times = [entry.get("time") for entry in obj.get("metadata", {}).get("managedFields") or []]
    return max((datetime.fromisoformat(t).timestamp() for t in times if t), default=0.0)


def webhook_readiness(configuration: JsonObject, filled_by: str,
                      serving: ServingCA | None = None, now: float = 0.0) -> Readiness:
    """Every webhook has a caBundle and, when the served CA is known, the caBundle includes
    it; a mismatch is awaited, then a problem once it outlasts TRUST_GRACE_SECONDS after the
    last change of the configuration or of the Secret (`until`: no event marks that moment)."""
    webhooks = configuration.get("webhooks") or []
    bundles = {w.get("name", "?"): (w.get("clientConfig") or {}).get("caBundle") or ""
               for w in webhooks}
    where = f"ValidatingWebhookConfiguration {_where(configuration)}"
    missing = [name for name, bundle in bundles.items() if not bundle]
    if missing:
        return Readiness(awaited=(Awaited(
            where, f"no caBundle yet for {', '.join(missing)} ({filled_by} fills it)"),))
    served = certificates(serving.ca) if serving else frozenset()
    if serving is None or not served:
        return Readiness()  # nothing to compare with: the presence check is all there is
    stale = [name for name, bundle in bundles.items() if not served <= certificates(bundle)]
    if not stale:
        return Readiness()
    detail = (f"the caBundle of {', '.join(stale)} does not include the CA of the certificate "
              f"the webhook serves ({serving.secret})")
    since = max(serving.changed, last_change(configuration))
    if now - since < TRUST_GRACE_SECONDS:
        return Readiness(awaited=(Awaited(where, f"{detail}; {filled_by} updates it"),),
                         until=since + TRUST_GRACE_SECONDS)
    return Readiness(problems=(Problem(
        "WebhookCABundleStale",
        f"{where}: {detail}, so the API server cannot verify the webhook. "
        f"{filled_by[0].upper()}{filled_by[1:]} fills it: check that it runs (its logs say "
        "why it does not)", where,
        f"kubectl get validatingwebhookconfiguration {_where(configuration)} -o yaml"),))


def certificate_readiness(certificate: JsonObject) -> Readiness:
    ready = _condition(certificate, "Ready")
    if ready and ready.get("status") == "True":
        return Readiness()
    detail = (f"{ready.get('reason', '')}: {ready.get('message', '')}" if ready
              else "cert-manager has not issued it yet")
    return Readiness(awaited=(Awaited(f"Certificate {_where(certificate)}",
                                      f"not Ready: {detail}"),))


def certificate_ready(certificate: JsonObject | None) -> bool:
    return certificate is not None and certificate_readiness(certificate).ready


def being_deleted(refs: Sequence[ObjectRef]) -> Readiness:
    """Objects the pass could not apply because they are being deleted (a finalizer holds
    them): awaited until they are gone and created again."""
    return Readiness(awaited=tuple(Awaited(str(ref), "being deleted; it is created again once "
                                           "it is gone (a finalizer may hold it)")
                                   for ref in refs))


def combine(parts: Iterable[Readiness]) -> Readiness:
    total = Readiness()
    for part in parts:
        total = total + part
    return total
