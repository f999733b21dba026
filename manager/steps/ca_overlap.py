"""Which CAs the webhooks trust while the certificate they serve changes. Pure functions.

With cert-manager on and its CA injector off, the operator fills the webhooks' caBundle with
the CA cert-manager published (`ca.crt` of the webhook Secret). That CA changes at the switch
from the cert-controller (whose CA the caBundle held) and at every renewal by an issuer that
makes a new CA each time (a selfSigned Issuer). Webhook pods do not all serve the new
certificate at once: a switch rolls them one by one, and a renewal reaches each pod when the
kubelet refreshes its Secret volume and the webhook's certificate watcher reloads it. A
caBundle that trusts only the new CA refuses every call that lands on a pod still serving
the old certificate; one that still trusts only the old CA refuses the new pods.

So until every pod can be serving the new certificate the caBundle carries the new CA *and*
the CAs it trusted before; then the old ones go. "Every pod can be serving it" means: the
webhook Deployment mounts the Secret and has rolled out completely, and the Secret was last
written at least OVERLAP_SECONDS ago (the kubelet's volume refresh, about a minute, plus the
watcher's reload). The old CAs come from the live caBundle itself, so the overlap needs no
memory of its own and a steady caBundle is exactly the published CA (nothing to write).
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

from manager.client.kube import JsonObject
from manager.steps.readiness import PEM_CERTIFICATE, certificates, deployment_available

# The kubelet refreshes Secret volumes about once a minute (its sync period plus jitter);
# the webhook reloads a changed file within seconds. Three minutes covers both with room.
OVERLAP_SECONDS = 180.0


@dataclass(frozen=True)
class Overlap:
    """Why the previous CAs are still trusted, and until when at the latest if only time
    remains (epoch seconds; None while it waits for the Deployment, whose status changes
    start a pass by themselves)."""

    reason: str
    until: float | None


def overlap(deployment: JsonObject | None, secret_name: str, secret_written: float,
            now: float) -> Overlap | None:
    """The overlap in progress, or None when every webhook pod serves the Secret's
    certificate by now (or there are no pods to serve anything)."""
    if deployment is None:
        return None
    if secret_name not in mounted_secrets(deployment) or not deployment_available(deployment):
        return Overlap(f"the webhook pods move to Secret {secret_name}", None)
    until = secret_written + OVERLAP_SECONDS
    if now < until:
        return Overlap(f"Secret {secret_name} changed {now - secret_written:.0f}s ago and "
                       "each webhook pod reloads it in its own time", until)
    return None


def mounted_secrets(deployment: JsonObject) -> set[str]:
    volumes = (((deployment.get("spec") or {}).get("template") or {}).get("spec")
               or {}).get("volumes") or []
    return {str(volume["secret"].get("secretName")) for volume in volumes
            if volume.get("secret")}


def trusted_bundle(published: str, live_bundles: Iterable[str], keep_previous: bool) -> str:
    """The caBundle to render (base64 PEM): the published CA, followed, while an overlap
    lasts, by every other CA the live caBundles trust (in their order, once each)."""
    if not keep_previous:
        return published
    seen = set(certificates(published))
    previous: list[str] = []
    for bundle in live_bundles:
        for pem in _pems(bundle):
            der = ssl.PEM_cert_to_DER_cert(pem)
            if der not in seen:
                seen.add(der)
                previous.append(ssl.DER_cert_to_PEM_cert(der))
    if not previous:
        return published
    text = base64.b64decode(published).decode("ascii").rstrip("\n") + "\n"
    return base64.b64encode((text + "".join(previous)).encode("ascii")).decode("ascii")


def live_bundles(configurations: Iterable[JsonObject | None]) -> list[str]:
    """Every caBundle of the given ValidatingWebhookConfigurations, in order."""
    return [bundle for configuration in configurations if configuration
            for webhook in configuration.get("webhooks") or []
            if (bundle := (webhook.get("clientConfig") or {}).get("caBundle"))]


def _pems(bundle: str) -> list[str]:
    if not certificates(bundle):
        return []  # unreadable: nothing in it can be trusted again
    return PEM_CERTIFICATE.findall(base64.b64decode(bundle).decode("ascii"))
