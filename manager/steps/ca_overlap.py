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

While the operator bridges two CAs it alone writes the caBundle. Two others would write it
too, each with one CA: the cert-controller (it writes its CA into every webhook
configuration labelled `external-secrets.io/component: webhook`, whenever one changes,
and runs until cert-manager's certificate is Ready) and cert-manager's CA injector (with
`addInjectorAnnotations`: it writes the Certificate's CA as soon as it is issued; before
cert-manager 1.19, or with its CAInjectorMerging gate off, it replaces what was there). So
the renderer withholds that label and the injector's annotation while an overlap lasts
(`render/context.py`), and the injector's annotation also while the webhook still serves
the cert-controller's Secret. With the injector on, the operator fills the caBundle too,
with the CA the injector would write: an injector whose write changes nothing takes no
ownership of the field, so a caBundle the operator stopped rendering would be deleted
(server-side apply) before the injector wrote it again.

The way back, from cert-manager to the cert-controller (delete the ExternalSecretsConfig and
create it again without cert-manager: `way_back`), is the same move the other way: the
webhook keeps serving cert-manager's Secret until the cert-controller has filled its own,
and the caBundle trusts the CAs it trusted before and the cert-controller's until every pod
serves the cert-controller's certificate. Then the label comes back and the operator keeps
rendering that caBundle, unchanged, until the cert-controller has replaced it with its CA
alone: its write changes the field, so it owns it from then on, and the operator's next
apply, without a caBundle, leaves it in place.
"""

from __future__ import annotations

import base64
import ssl
from collections.abc import Iterable
from dataclasses import dataclass

from manager.client.kube import JsonObject
from manager.names import WEBHOOK_SECRET as CERT_CONTROLLER_SECRET
from manager.names import WEBHOOK_SECRET_CERT_MANAGER as CERT_MANAGER_SECRET
from manager.render.context import COMPONENT_LABEL, COMPONENT_VALUE
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


@dataclass(frozen=True)
class WayBack:
    """What the operator renders on the way back to the cert-controller."""

    mount_previous: bool = False
    """The webhook keeps serving cert-manager's Secret: the cert-controller's has no
    certificate yet."""
    bundle: str | None = None
    """The caBundle while the pods move (base64 PEM): the overlap; the label is withheld."""
    until: float | None = None
    """When the overlap ends unless something else changes first (epoch seconds)."""
    handover: str | None = None
    """The caBundle, unchanged, until the cert-controller replaces it (the label is back)."""


def settled_on_cert_controller(deployment: JsonObject | None,
                               configurations: Iterable[JsonObject | None]) -> bool:
    """Nothing to bridge, as far as the watch cache shows (no Secret read): the webhook does
    not mount cert-manager's Secret, every webhook configuration carries the
    cert-controller's label and no caBundle holds more than one CA (the cert-controller
    writes exactly its own)."""
    if deployment is not None and CERT_MANAGER_SECRET in mounted_secrets(deployment):
        return False
    for configuration in configurations:
        if configuration is None:
            continue
        labels = (configuration.get("metadata") or {}).get("labels") or {}
        if labels.get(COMPONENT_LABEL) != COMPONENT_VALUE:
            return False
    return all(len(certificates(bundle)) <= 1 for bundle in live_bundles(configurations))


def way_back(deployment: JsonObject | None, live: list[str], ca: str | None, *,
             secret_written: float, now: float) -> WayBack:
    """The way back once it is known not to be settled: `ca` is the cert-controller's CA
    (`ca.crt` of its Secret, written at `secret_written`), or None before it made one.
    Until then the webhook Deployment stays as it is, on cert-manager's Secret (which goes
    with the Certificate: the running pods keep the files they have), so it rolls once, onto
    a Secret that holds a certificate."""
    if not ca:
        mounted = mounted_secrets(deployment) if deployment is not None else set()
        return WayBack(mount_previous=CERT_MANAGER_SECRET in mounted,
                       bundle=union_bundle(live))
    bundle = trusted_bundle(ca, live, keep_previous=True)
    if bundle == ca:
        return WayBack()  # no CA but the cert-controller's: its caBundle
    lasting = overlap(deployment, CERT_CONTROLLER_SECRET, secret_written, now)
    if lasting is not None:
        return WayBack(bundle=bundle, until=lasting.until)
    return WayBack(handover=bundle)


def union_bundle(live: Iterable[str]) -> str | None:
    """Every CA the live caBundles trust, once each (base64 PEM); None if there is none."""
    pems = _unseen_pems(live, set())
    return base64.b64encode("".join(pems).encode("ascii")).decode("ascii") if pems else None


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
    previous = _unseen_pems(live_bundles, set(certificates(published)))
    if not previous:
        return published
    text = base64.b64decode(published).decode("ascii").rstrip("\n") + "\n"
    return base64.b64encode((text + "".join(previous)).encode("ascii")).decode("ascii")


def live_bundles(configurations: Iterable[JsonObject | None]) -> list[str]:
    """Every caBundle of the given ValidatingWebhookConfigurations, in order."""
    return [bundle for configuration in configurations if configuration
            for webhook in configuration.get("webhooks") or []
            if (bundle := (webhook.get("clientConfig") or {}).get("caBundle"))]


def _unseen_pems(bundles: Iterable[str], seen: set[bytes]) -> list[str]:
    """The certificates of `bundles` (PEM) not in `seen` (DER), in order, once each; `seen`
    grows by them."""
    pems: list[str] = []
    for bundle in bundles:
        for pem in _pems(bundle):
            der = ssl.PEM_cert_to_DER_cert(pem)
            if der not in seen:
                seen.add(der)
                pems.append(ssl.DER_cert_to_PEM_cert(der))
    return pems


def _pems(bundle: str) -> list[str]:
    if not certificates(bundle):
        return []  # unreadable: nothing in it can be trusted again
    return PEM_CERTIFICATE.findall(base64.b64decode(bundle).decode("ascii"))
