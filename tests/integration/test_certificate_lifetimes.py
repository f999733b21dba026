"""The webhook's certificate over its lifetime, with the real cert-manager and the real
webhook (external-secrets' webhook exits when its certificate is not valid at now +
`--lookahead-interval`, which the operator derives from the certificate source): with the
sample's lifetimes (2160h, renewed 360h ahead) and a 15 s check interval, several checks
pass without a restart, and a renewal forced as `cmctl renew` does is served by the running
pods (the certificate they present over TLS changes) without one refused admission.

The Issuer is a CA Issuer, as in production: its renewals keep the CA. The second test takes
the harder road: the switch from the cert-controller to cert-manager, then a selfSigned
Issuer whose every renewal is a new CA, where only the caBundle's overlap of old and new CA
keeps every admission (docs/operations.md, "Switching CAs without a window")."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from manager.client.kube import Kube, install_crds
from manager.names import WEBHOOK_SECRET_CERT_MANAGER
from manager.runtime.operator import load_crds
from manager.steps import ca_overlap
from manager.steps.readiness import certificates
from tests.conftest import CertManager
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    USER_NAMESPACE,
    EscHandle,
    StartOperator,
    UserObjects,
    esc_events,
    eventually,
    wait_condition,
)
from tests.integration.test_controller_toggles import remove_cert_manager_crds
from tests.samplers import AdmissionSampler, own_client

# Bounds on time and on refusals: run after the busiest neighbours (hack/run-tests.py).
pytestmark = pytest.mark.timing

NAMESPACE = SCENARIO_NAMESPACES["lifetimes"]
CHECK_INTERVAL = 15.0
WEBHOOK_PORT = 10250
# Two staggered streams, each every 200 ms: an attempt every 100 ms, well within
# tests/samplers.py MAX_START_INTERVAL.
SAMPLE_STREAMS = 2


async def presented(address: str) -> bytes:
    """The certificate a webhook pod presents over TLS (its DER bytes). The handshake blocks,
    so it runs in a thread: on the event loop it would starve the admission sampler."""
    return await asyncio.to_thread(_presented, address)


def _presented(address: str) -> bytes:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with context.wrap_socket(socket.create_connection((address, WEBHOOK_PORT), timeout=5)
                             ) as connection:
        certificate = connection.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


async def webhook_pods(kube: Kube, namespace: str = NAMESPACE) -> dict[str, dict[str, Any]]:
    listing = await kube.list(f"/api/v1/namespaces/{namespace}/pods",
                              label_selector="app.kubernetes.io/name=external-secrets-webhook")
    return {pod["metadata"]["name"]: pod for pod in listing["items"]
            if not pod["metadata"].get("deletionTimestamp")}


@contextlib.asynccontextmanager
async def sampling(kube: Kube) -> AsyncIterator[AdmissionSampler]:
    """The admission sampler on a client of its own, for the body's duration."""
    client = own_client(kube)
    try:
        async with AdmissionSampler(client, USER_NAMESPACE,
                                    concurrency=SAMPLE_STREAMS) as sampler:
            yield sampler
    finally:
        await client.close()


def restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses") or [])


async def force_renewal(kube: Kube, namespace: str) -> None:
    """Renew the webhook Certificate now, as `cmctl renew` does (an Issuing condition)."""
    path = f"/apis/cert-manager.io/v1/namespaces/{namespace}/certificates/external-secrets-webhook"
    certificate = await kube.request("GET", path)
    conditions = [c for c in certificate["status"]["conditions"] if c["type"] != "Issuing"]
    await kube.request("PATCH", f"{path}/status", body={"status": {"conditions": [
        *conditions, {"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                      "message": "renewal forced by the test (as cmctl renew does)"}]}},
        content_type="application/merge-patch+json")


async def test_a_renewal_is_served_without_a_restart_or_a_refusal(
        *, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects, crd_dir: Path, cert_manager: CertManager) -> None:
    await install_crds(kube, load_crds(crd_dir / "cert-manager"), field_manager="cert-manager")
    cert_manager.start()

    issuers = f"/apis/cert-manager.io/v1/namespaces/{NAMESPACE}/issuers"

    async def issuer() -> None:  # a CA of its own, as in production: renewals keep the CA
        for name, spec in (("eso-selfsigned", {"selfSigned": {}}),
                           ("eso-issuer", {"ca": {"secretName": "eso-ca"}})):
            await kube.apply(f"{issuers}/{name}", {
                "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                "metadata": {"name": name, "namespace": NAMESPACE}, "spec": spec},
                field_manager="integration-tests")
        await kube.apply(
            f"/apis/cert-manager.io/v1/namespaces/{NAMESPACE}/certificates/eso-ca", {
                "apiVersion": "cert-manager.io/v1", "kind": "Certificate",
                "metadata": {"name": "eso-ca", "namespace": NAMESPACE},
                "spec": {"isCA": True, "commonName": "eso-ca", "secretName": "eso-ca",
                         "issuerRef": {"name": "eso-selfsigned", "kind": "Issuer"}}},
            field_manager="integration-tests")

    await eventually(issuer, 60)
    await start_operator()
    await esc.create({
        "controllerConfig": {"namespace": NAMESPACE, "componentConfigs": [
            {"componentName": "Webhook", "deploymentConfigs": {"replicas": 2}}]},
        "appConfig": {"webhookConfig": {"certificateCheckInterval": f"{CHECK_INTERVAL:.0f}s"},
                      "certManagerConfig": {
                          "enabled": "true", "issuerRef": {"name": "eso-issuer", "kind": "Issuer"},
                          "certificateDuration": "2160h", "certificateRenewBefore": "360h"}}})
    await wait_condition(esc, "Ready", "True", timeout=180)
    before = await webhook_pods(kube)
    assert len(before) == 2
    served = {name: await presented(pod["status"]["podIP"]) for name, pod in before.items()}

    async with sampling(kube) as sampler:
        await asyncio.sleep(3 * CHECK_INTERVAL)  # the checks that used to stop the webhook
        await force_renewal(kube, NAMESPACE)

        async def renewed() -> None:
            for name, pod in before.items():
                assert await presented(pod["status"]["podIP"]) != served[name], (
                    f"{name} not yet")

        await eventually(renewed, 60)
        await asyncio.sleep(CHECK_INTERVAL)  # a check after the renewal, too

    print(f"renewal with two webhook replicas: {sampler.figures}")  # the figure, with -s
    assert sampler.figures.refused == 0, str(sampler.figures)
    after = await webhook_pods(kube)
    assert set(after) == set(before), "the webhook pods were replaced"
    assert {name: restarts(pod) for name, pod in after.items()} == {
        name: restarts(pod) for name, pod in before.items()}, "a webhook process restarted"
    await wait_condition(esc, "Ready", "True")
    cert_manager.stop()
    await remove_cert_manager_crds(kube)


SWITCH_NAMESPACE = SCENARIO_NAMESPACES["ca-switch"]
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
# Time compressed: the simulated kubelet refreshes volumes every second and the webhook
# reloads a changed certificate within seconds, so 20 s stand in for the 180 s of a cluster.
OVERLAP_SECONDS = 20.0


async def bundle_cas(kube: Kube) -> set[frozenset[bytes]]:
    """The CAs each webhook of both configurations trusts."""
    found = set()
    for name in ("externalsecret-validate", "secretstore-validate"):
        configuration = await kube.request("GET", f"{WEBHOOKS}/{name}")
        found |= {certificates(w["clientConfig"].get("caBundle") or "")
                  for w in configuration["webhooks"]}
    return found


async def published_ca(kube: Kube) -> frozenset[bytes]:
    secret = await kube.request(
        "GET", f"/api/v1/namespaces/{SWITCH_NAMESPACE}/secrets/{WEBHOOK_SECRET_CERT_MANAGER}")
    return certificates(secret["data"]["ca.crt"])


async def test_a_switch_to_cert_manager_and_a_new_ca_are_served_without_a_refusal(
        *, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects, crd_dir: Path, cert_manager: CertManager,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """cert-controller → cert-manager with two webhook replicas, then a renewal that brings a
    new CA (a selfSigned Issuer): the webhook moves to cert-manager's Secret only once it
    exists, and the caBundle trusts the old and the new CA until every pod serves the new
    certificate, then only the new one. Not one admission is refused."""
    monkeypatch.setattr(ca_overlap, "OVERLAP_SECONDS", OVERLAP_SECONDS)
    await install_crds(kube, load_crds(crd_dir / "cert-manager"), field_manager="cert-manager")
    cert_manager.start()
    await eventually(lambda: kube.apply(
        f"/apis/cert-manager.io/v1/namespaces/{SWITCH_NAMESPACE}/issuers/eso-selfsigned", {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": "eso-selfsigned", "namespace": SWITCH_NAMESPACE},
            "spec": {"selfSigned": {}}}, field_manager="integration-tests"), 60)
    operator = await start_operator()
    await esc.create({"controllerConfig": {"namespace": SWITCH_NAMESPACE, "componentConfigs": [
        {"componentName": "Webhook", "deploymentConfigs": {"replicas": 2}}]}})
    await wait_condition(esc, "Ready", "True", timeout=180)

    async def settled_on_cert_manager() -> None:
        # The caBundles trust the published CA alone, and every pod serves it (a selfSigned
        # certificate is its own CA).
        published = await published_ca(kube)
        assert await bundle_cas(kube) == {published}
        pods = await webhook_pods(kube, SWITCH_NAMESPACE)
        assert len(pods) == 2
        for name, pod in pods.items():
            assert await presented(pod["status"]["podIP"]) in published, (
                f"{name} serves another")

    async with sampling(kube) as sampler:
        await esc.patch_spec({"appConfig": {"certManagerConfig": {
            "enabled": "true", "issuerRef": {"name": "eso-selfsigned", "kind": "Issuer"}}}})
        await wait_condition(esc, "Ready", "True", timeout=180)
        await eventually(settled_on_cert_manager, 120)
        switched = str(sampler.figures)
        # A renewal by a selfSigned Issuer: a new key, so a new CA.
        first = await published_ca(kube)
        await force_renewal(kube, SWITCH_NAMESPACE)

        async def new_ca_published() -> None:
            assert await published_ca(kube) != first

        await eventually(new_ca_published, 60)
        await eventually(settled_on_cert_manager, 120)

    print(f"switch with two webhook replicas: {switched}; "
          f"then a new CA: {sampler.figures}")  # the figures, with -s
    # The switch rolls the webhook pods: a call the API server sends on a keep-alive
    # connection a terminating pod just closed is the one refusal allowed (tests/samplers.py,
    # KEEPALIVE_RACE; one of 398 in a CI run of 2026-11-28).
    sampler.figures.assert_refused_only_by_keepalive_races()
    # The renewal's overlap, from the Applied Events: the previous CA trusted, then dropped.
    notes = [e["note"] for e in await esc_events(kube, (await esc.get())["metadata"]["uid"])
             if e["reason"] == "Applied"]
    assert any("the caBundle trusts the previous CA too" in n for n in notes), notes
    assert any("so the caBundle drops the previous CA" in n for n in notes), notes
    await operator.wait_idle()
    cert_manager.stop()
    await remove_cert_manager_crds(kube)
