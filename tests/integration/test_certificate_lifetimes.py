"""The webhook's certificate over its lifetime, with the real cert-manager and the real
webhook (external-secrets' webhook exits when its certificate is not valid at now +
`--lookahead-interval`, which the operator derives from the certificate source): with the
sample's lifetimes (2160h, renewed 360h ahead) and a 15 s check interval, several checks
pass without a restart, and a renewal forced as `cmctl renew` does is served by the running
pods (the certificate they present over TLS changes) without one refused admission.

The Issuer is a CA Issuer, as in production: its renewals keep the CA, so the caBundle stays
right. (With a selfSigned Issuer every renewal is a new CA: measured here, 2 of 300
admissions refused over 0.87 s until the caBundle follows; docs/operations.md.)"""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from manager.kube import Kube, install_crds
from manager.operator import load_crds
from tests.conftest import CertManager
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    USER_NAMESPACE,
    EscHandle,
    OperatorThread,
    UserObjects,
    eventually,
    wait_condition,
)
from tests.integration.test_controller_toggles import remove_cert_manager_crds
from tests.samplers import AdmissionSampler

StartOperator = Callable[..., Awaitable[OperatorThread]]
NAMESPACE = SCENARIO_NAMESPACES["lifetimes"]
CHECK_INTERVAL = 15.0
CERTIFICATE = (f"/apis/cert-manager.io/v1/namespaces/{NAMESPACE}/certificates/"
               "external-secrets-webhook")
WEBHOOK_PORT = 10250


def presented(address: str) -> bytes:
    """The certificate a webhook pod presents over TLS (its DER bytes)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with context.wrap_socket(socket.create_connection((address, WEBHOOK_PORT), timeout=5)
                             ) as connection:
        certificate = connection.getpeercert(binary_form=True)
    assert certificate is not None
    return certificate


async def webhook_pods(kube: Kube) -> dict[str, dict[str, Any]]:
    listing = await kube.list(f"/api/v1/namespaces/{NAMESPACE}/pods",
                              label_selector="app.kubernetes.io/name=external-secrets-webhook")
    return {pod["metadata"]["name"]: pod for pod in listing["items"]
            if not pod["metadata"].get("deletionTimestamp")}


def restarts(pod: dict[str, Any]) -> int:
    return sum(s.get("restartCount", 0) for s in pod["status"].get("containerStatuses") or [])


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
    served = {name: presented(pod["status"]["podIP"]) for name, pod in before.items()}

    async with AdmissionSampler(kube, USER_NAMESPACE) as sampler:
        await asyncio.sleep(3 * CHECK_INTERVAL)  # the checks that used to stop the webhook
        certificate = await kube.request("GET", CERTIFICATE)
        conditions = [c for c in certificate["status"]["conditions"] if c["type"] != "Issuing"]
        await kube.request("PATCH", f"{CERTIFICATE}/status", body={"status": {"conditions": [
            *conditions, {"type": "Issuing", "status": "True", "reason": "ManuallyTriggered",
                          "message": "renewal forced by the test (as cmctl renew does)"}]}},
            content_type="application/merge-patch+json")

        async def renewed() -> None:
            for name, pod in before.items():
                assert presented(pod["status"]["podIP"]) != served[name], f"{name} not yet"

        await eventually(renewed, 60)
        await asyncio.sleep(CHECK_INTERVAL)  # a check after the renewal, too

    print(f"renewal with two webhook replicas: {sampler.figures}")  # the figure, with -s
    assert sampler.figures.refused == 0, str(sampler.figures)
    assert sampler.figures.attempts > 3 * CHECK_INTERVAL / sampler.interval / 2
    after = await webhook_pods(kube)
    assert set(after) == set(before), "the webhook pods were replaced"
    assert {name: restarts(pod) for name, pod in after.items()} == {
        name: restarts(pod) for name, pod in before.items()}, "a webhook process restarted"
    await wait_condition(esc, "Ready", "True")
    cert_manager.stop()
    await remove_cert_manager_crds(kube)
