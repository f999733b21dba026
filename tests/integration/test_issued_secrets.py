"""The Secrets cert-manager issues for the operator's Certificates go with those Certificates,
and nothing else does.

cert-manager (the real controller, v1.20, without `--enable-certificate-owner-ref`: its
default) writes each Certificate's key pair into the Secret its `spec.secretName` names and
never deletes it. The operator's Certificates carry its labels in `spec.secretTemplate`, so
cert-manager labels the issued Secret as the operator's; pruning (bitwarden switched off)
and managementState Removed delete it right after its Certificate, and only then: while the
Certificate is rendered (the webhook serves from `external-secrets-webhook-cm`) it stays.

Secrets of the same shape that are not issued for a Certificate of the operator's stay:
one written by a user's Certificate whose manifest copies ours (our name, our labels and
`secretTemplate`, in another namespace), one written by a user's Certificate in the operand
namespace with our labels, and one written by hand with our label and cert-manager's
annotation naming our Certificate.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest_asyncio

from manager.client.kube import Kube, install_crds
from manager.names import MANAGED_BY_LABEL, OPERATOR_NAME, WEBHOOK_SECRET_CERT_MANAGER
from manager.runtime.operator import load_crds
from tests.conftest import CertManager
from tests.integration.conftest import (
    USER_NAMESPACE,
    EscHandle,
    StartOperator,
    eventually,
    wait_condition,
)
from tests.integration.test_controller_toggles import remove_cert_manager_crds

NAMESPACE = "eso-it-issued"
CERT_MANAGER_API = "/apis/cert-manager.io/v1"
ISSUER = "eso-it-issued-issuer"
BITWARDEN_CERTIFICATE = "bitwarden-tls-certs"  # the Certificate and the Secret it names
WEBHOOK_CERTIFICATE = "external-secrets-webhook"
FIELD_MANAGER = "integration-tests"
OUR_LABELS = {MANAGED_BY_LABEL: OPERATOR_NAME, "app.kubernetes.io/part-of": OPERATOR_NAME}


def secret_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets/{name}"


def certificate_path(namespace: str, name: str) -> str:
    return f"{CERT_MANAGER_API}/namespaces/{namespace}/certificates/{name}"


def user_certificate(namespace: str, name: str, secret_name: str) -> dict[str, Any]:
    """A Certificate someone else applies, with our labels on it and in its template."""
    return {"apiVersion": "cert-manager.io/v1", "kind": "Certificate",
            "metadata": {"name": name, "namespace": namespace, "labels": OUR_LABELS},
            "spec": {"secretName": secret_name, "dnsNames": [f"{name}.example"],
                     "secretTemplate": {"labels": OUR_LABELS},
                     "issuerRef": {"name": ISSUER, "kind": "Issuer"}}}


# Secrets the operator must leave alone: (namespace, name) of each.
USER_CERTIFICATES = (
    (USER_NAMESPACE, BITWARDEN_CERTIFICATE, BITWARDEN_CERTIFICATE),  # a copy of ours
    (NAMESPACE, "user-certificate", "user-tls"),  # the user's own, beside ours
)
BY_HAND = (NAMESPACE, "by-hand-tls")  # our label and cert-manager's annotation, by hand


@pytest_asyncio.fixture(loop_scope="session")
async def issuing(kube: Kube, crd_dir: Path, cert_manager: CertManager,
                  ) -> AsyncIterator[None]:
    """cert-manager running with an Issuer in the operand namespace and in the user
    namespace; the Secrets that are not the operator's in place. Afterwards cert-manager's
    CRDs (and so its objects) and those Secrets are removed."""
    await install_crds(kube, load_crds(crd_dir / "cert-manager"), field_manager="cert-manager")
    cert_manager.start()
    try:
        for namespace in (NAMESPACE, USER_NAMESPACE):
            await kube.apply(f"/api/v1/namespaces/{namespace}", {
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
                field_manager=FIELD_MANAGER)
            await kube.apply(f"{CERT_MANAGER_API}/namespaces/{namespace}/issuers/{ISSUER}", {
                "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                "metadata": {"name": ISSUER, "namespace": namespace},
                "spec": {"selfSigned": {}}}, field_manager=FIELD_MANAGER)
        for namespace, name, secret_name in USER_CERTIFICATES:
            await kube.apply(certificate_path(namespace, name),
                             user_certificate(namespace, name, secret_name),
                             field_manager=FIELD_MANAGER)
        namespace, name = BY_HAND
        await kube.apply(secret_path(namespace, name), {
            "apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
            "metadata": {"name": name, "namespace": namespace, "labels": OUR_LABELS,
                         "annotations": {"cert-manager.io/certificate-name":
                                         BITWARDEN_CERTIFICATE}},
            "data": {"tls.crt": "", "tls.key": ""}}, field_manager=FIELD_MANAGER)

        async def issued() -> None:
            for namespace, _, secret_name in USER_CERTIFICATES:
                secret = await kube.get(secret_path(namespace, secret_name))
                assert secret is not None, f"{namespace}/{secret_name} not issued yet"
                assert (secret["metadata"].get("labels") or {}).get(MANAGED_BY_LABEL) \
                    == OPERATOR_NAME, secret["metadata"]

        await eventually(issued, 60)
        yield
    finally:
        await remove_cert_manager_crds(kube)
        cert_manager.stop()
        for namespace, _, secret_name in USER_CERTIFICATES:
            await kube.delete(secret_path(namespace, secret_name))
        await kube.delete(secret_path(*BY_HAND))
        for name in (BITWARDEN_CERTIFICATE, WEBHOOK_SECRET_CERT_MANAGER):
            await kube.delete(secret_path(NAMESPACE, name))  # left before the fix


async def install(esc: EscHandle, start_operator: StartOperator, *, bitwarden: bool) -> None:
    await start_operator()
    app: dict[str, Any] = {"certManagerConfig": {
        "enabled": "true", "issuerRef": {"name": ISSUER, "kind": "Issuer"}}}
    if bitwarden:
        app["bitwardenSecretManagerProvider"] = {"enabled": "true"}
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}, "appConfig": app})
    await wait_condition(esc, "Ready", "True", timeout=120)


async def assert_exists(kube: Kube, path: str) -> None:
    exists = await kube.get(path) is not None  # not the object: a Secret holds a key
    assert exists, f"{path} is gone"


async def assert_gone(kube: Kube, path: str) -> None:
    exists = await kube.get(path) is not None
    assert not exists, f"{path} is still there"


async def assert_others_untouched(kube: Kube) -> None:
    for namespace, name, secret_name in USER_CERTIFICATES:
        await assert_exists(kube, certificate_path(namespace, name))
        await assert_exists(kube, secret_path(namespace, secret_name))
    await assert_exists(kube, secret_path(*BY_HAND))


async def test_bitwarden_switched_off_takes_its_issued_secret(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, issuing: None) -> None:
    await install(esc, start_operator, bitwarden=True)
    issued = secret_path(NAMESPACE, BITWARDEN_CERTIFICATE)
    webhook_secret = secret_path(NAMESPACE, WEBHOOK_SECRET_CERT_MANAGER)
    await assert_exists(kube, issued)
    await assert_exists(kube, webhook_secret)

    await esc.patch_spec({"appConfig": {"bitwardenSecretManagerProvider": {"enabled": "false"}}})
    await eventually(lambda: assert_gone(kube, certificate_path(NAMESPACE,
                                                                BITWARDEN_CERTIFICATE)), 60)
    await wait_condition(esc, "Ready", "True", timeout=60)
    await eventually(lambda: assert_gone(kube, issued), 30)
    # The webhook's Certificate is still rendered: its Secret, which the webhook serves, stays.
    await assert_exists(kube, certificate_path(NAMESPACE, WEBHOOK_CERTIFICATE))
    await assert_exists(kube, webhook_secret)
    await assert_others_untouched(kube)


async def test_removed_takes_the_webhooks_issued_secret(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, issuing: None) -> None:
    await install(esc, start_operator, bitwarden=False)
    webhook_secret = secret_path(NAMESPACE, WEBHOOK_SECRET_CERT_MANAGER)
    await assert_exists(kube, webhook_secret)

    await esc.patch_spec({"managementState": "Removed"})
    await wait_condition(esc, "Ready", "False", reason="Removed", timeout=90)
    await assert_gone(kube, certificate_path(NAMESPACE, WEBHOOK_CERTIFICATE))
    await assert_gone(kube, webhook_secret)
    await assert_others_untouched(kube)
