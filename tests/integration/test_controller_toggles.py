"""Optional components on and off, bad specs and missing dependencies, transient errors."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
import subprocess
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from manager.client.kube import CRD_COLLECTION, Kube, install_crds
from manager.names import is_operand_crd
from manager.runtime.operator import load_crds
from manager.sidetasks.crd_annotator import INJECT_CA_FROM
from manager.steps import ca_overlap
from tests.conftest import CertManager
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    USER_NAMESPACE,
    WEBHOOKS,
    EscHandle,
    StartOperator,
    UserObjects,
    esc_events,
    esm_conditions,
    eventually,
    managed_objects,
    wait_condition,
)
from tests.integration.test_controller_install import expected_objects
from tests.operand import BITWARDEN_TLS_SECRET, bitwarden_tls_secret

Keys = set[tuple[str, str, str]]

CERT_MANAGER_CRDS = ("certificates.cert-manager.io", "issuers.cert-manager.io",
                     "clusterissuers.cert-manager.io", "certificaterequests.cert-manager.io",
                     "orders.acme.cert-manager.io", "challenges.acme.cert-manager.io")


async def present(kube: Kube, namespace: str) -> Keys:
    return set(await managed_objects(kube, namespace))


async def wait_present(kube: Kube, namespace: str, wanted: Keys, absent: Keys = frozenset(),
                       timeout: float = 20.0) -> Keys:
    async def check() -> Keys:
        found = await present(kube, namespace)
        assert wanted <= found, f"missing {sorted(wanted - found)}"
        assert not absent & found, f"still there {sorted(absent & found)}"
        return found

    result: Keys = await eventually(check, timeout)
    return result


async def _eventually_awaited(esc: EscHandle, subject: str, text: str) -> str:
    """The message of `subject` in status.awaited, once it says `text`."""
    async def check() -> str:
        status = (await esc.get()).get("status") or {}
        awaited = {item["object"]: item["message"] for item in status.get("awaited") or []}
        assert text in awaited.get(subject, ""), status
        return awaited[subject]
    message: str = await eventually(check, 30)
    return message


async def test_bitwarden_on_then_off(kube: Kube, esc: EscHandle, start_operator: StartOperator, *,
                                     user_objects: UserObjects,
                                     caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    namespace = SCENARIO_NAMESPACES["bitwarden"]
    base: dict[str, Any] = {"controllerConfig": {"namespace": namespace}}
    bitwarden = {**base, "appConfig": {"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": BITWARDEN_TLS_SECRET}}}}
    plain, with_bitwarden = expected_objects(base), expected_objects(bitwarden)
    bitwarden_only = with_bitwarden - plain
    assert {k[0] for k in bitwarden_only} >= {"Deployment", "Service", "ServiceAccount",
                                              "NetworkPolicy"}

    await start_operator()
    await esc.create(base)
    await wait_condition(esc, "Ready", "True")
    installed = await wait_present(kube, namespace, plain)

    # The TLS Secret is missing: Degraded naming the field, the fix and what waits for it;
    # everything but bitwarden-sdk-server's Deployment (which would mount it) is applied.
    await esc.patch_spec({"appConfig": bitwarden["appConfig"]})
    degraded = await wait_condition(esc, "Degraded", "True", reason="BitwardenSecretNotFound")
    whole = await esc.failure_message()  # the conditions carry a summary of it
    assert "spec.appConfig.bitwardenSecretManagerProvider.secretRef.name" in degraded["message"]
    assert "bitwarden-tls" in whole
    assert (f"Held back until then: Deployment {namespace}/bitwarden-sdk-server; everything "
            "else is applied") in whole
    assert (await esc.condition("Ready") or {})["status"] == "False"
    held = ("Deployment", namespace, "bitwarden-sdk-server")
    assert held in bitwarden_only
    installed = await wait_present(kube, namespace, with_bitwarden - {held}, absent={held})

    # The Secret appears as a plain kubernetes.io/tls Secret, without ca.crt: Degraded naming
    # the missing key; nothing changes, and no value of the Secret reaches the log.
    sentinel = base64.b64encode(b"SENTINEL-bitwarden-private-key").decode()
    secret_path = f"/api/v1/namespaces/{namespace}/secrets/bitwarden-tls"
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": {"name": "bitwarden-tls", "namespace": namespace},
              "data": {"tls.crt": sentinel, "tls.key": sentinel}}
    await kube.apply(secret_path, secret, field_manager="integration-tests")
    invalid = await wait_condition(esc, "Degraded", "True", reason="BitwardenSecretInvalid")
    whole = await esc.failure_message()
    assert invalid["message"].startswith(whole[:60])
    assert 'Secret "bitwarden-tls"' in whole
    assert "has no ca.crt" in whole
    assert "spec.appConfig.bitwardenSecretManagerProvider.secretRef.name" in whole
    assert await present(kube, namespace) == installed
    assert not [r for r in caplog.records if "SENTINEL" in r.getMessage()
                or sentinel in r.getMessage()]

    # The missing key is added: the dependency watch ends the wait, bitwarden is installed.
    # Its values are still no key pair: bitwarden-sdk-server cannot serve them and exits, so
    # its pod crash-loops, and the status says so (Progressing, waiting for its Deployment).
    secret["data"]["ca.crt"] = sentinel
    await kube.apply(secret_path, secret, field_manager="integration-tests")
    await wait_present(kube, namespace, with_bitwarden)
    waiting = await wait_condition(esc, "Progressing", "True", reason="WaitingForOperand")
    assert f"Deployment {namespace}/bitwarden-sdk-server" in waiting["message"]
    assert "container bitwarden-sdk-server waiting: CrashLoopBackOff" in (
        await _eventually_awaited(esc, f"Deployment {namespace}/bitwarden-sdk-server",
                                  "CrashLoopBackOff"))
    assert (await esc.condition("Ready") or {})["status"] == "False"
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    server = await kube.request("GET", f"{deployments}/bitwarden-sdk-server")
    controller = await kube.request("GET", f"{deployments}/external-secrets")

    # A real key pair, for the Service's names (bitwarden-sdk-server loads it once): it rolls
    # bitwarden-sdk-server's pods, and only those; the new pod serves it, its Deployment is
    # available and the ESC Ready.
    real = bitwarden_tls_secret(namespace)
    secret["data"] = real["data"]
    await kube.apply(secret_path, secret, field_manager="integration-tests")

    async def rolled() -> None:
        now = await kube.request("GET", f"{deployments}/bitwarden-sdk-server")
        assert now["metadata"]["generation"] > server["metadata"]["generation"]

    await eventually(rolled, 30)
    assert (await kube.request("GET", f"{deployments}/external-secrets"))["metadata"][
        "generation"] == controller["metadata"]["generation"]
    await wait_condition(esc, "Ready", "True", timeout=120)
    available = await kube.request("GET", f"{deployments}/bitwarden-sdk-server")
    assert {c["type"]: c["status"] for c in available["status"]["conditions"]}.get(
        "Available") == "True", available["status"]
    assert available["status"].get("availableReplicas") == 1, available["status"]
    assert not (await esc.get())["status"].get("awaited")
    key = base64.b64decode(real["data"]["tls.key"]).decode()
    secrets = [sentinel, real["data"]["tls.key"], *(line for line in key.splitlines()
                                                    if not line.startswith("-----")
                                                    and len(line) >= 40)]
    assert not [r for r in caplog.records if "SENTINEL" in r.getMessage()
                or any(value in r.getMessage() for value in secrets)]
    assert (await esc.get())["status"]["bitwardenSDKServerImage"]

    # Off again: every bitwarden object is pruned; the user's TLS Secret stays.
    await esc.patch_spec({"appConfig": {"bitwardenSecretManagerProvider": {"enabled": "false"}}})
    await wait_present(kube, namespace, plain, absent=bitwarden_only)
    await wait_condition(esc, "Ready", "True")
    resource = await esc.get()
    assert "bitwardenSDKServerImage" not in resource["status"]
    assert await kube.get(f"/api/v1/namespaces/{namespace}/secrets/bitwarden-tls") is not None
    # The pass that switched it off left one Event saying what it did and why.
    events = await esc_events(kube, resource["metadata"]["uid"])
    assert events[-1]["reason"] == "Applied", events[-1]
    assert re.fullmatch(r"(applied \d+ objects? \(.*\), )?pruned \d+( objects)?: "
                        "bitwarden switched off", events[-1]["note"]), events[-1]["note"]
    await user_objects.assert_untouched(kube)


def _time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).replace(microsecond=0)


async def remove_cert_manager_crds(kube: Kube) -> None:
    for name in CERT_MANAGER_CRDS:
        await kube.delete(f"{CRD_COLLECTION}/{name}")

    async def gone() -> None:
        served = await kube.get("/apis/cert-manager.io/v1")
        assert not (served or {}).get("resources"), "cert-manager.io/v1 is still served"

    await eventually(gone, timeout=60)


def another_ca(directory: Path) -> str:
    """A self-signed CA certificate no component uses, base64 as a caBundle carries it."""
    key, cert = directory / "stale.key", directory / "stale.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-subj", "/CN=stale-ca",
                    "-days", "1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return base64.b64encode(cert.read_bytes()).decode()


async def test_cert_manager_on(kube: Kube, esc: EscHandle, start_operator: StartOperator, *,
                               user_objects: UserObjects, crd_dir: Path,
                               cert_manager: CertManager, tmp_path: Path,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    """The real cert-manager (controller and CA injector) issues the webhook certificate."""
    monkeypatch.setattr(ca_overlap, "OVERLAP_SECONDS", 10.0)
    namespace = SCENARIO_NAMESPACES["cert-manager"]
    await remove_cert_manager_crds(kube)  # so that cert-manager arrives while the operator runs
    base: dict[str, Any] = {"controllerConfig": {"namespace": namespace}}
    cert_manager_spec = {"certManagerConfig": {
        "enabled": "true", "issuerRef": {"name": "eso-issuer", "kind": "Issuer"}}}
    plain = expected_objects(base)
    with_cert_manager = expected_objects({**base, "appConfig": cert_manager_spec})
    cert_controller = plain - with_cert_manager
    assert {k[0] for k in cert_controller} == {
        "Deployment", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Secret", "Service",
        "NetworkPolicy"}

    await start_operator()
    await esc.create(base)
    await wait_condition(esc, "Ready", "True", timeout=60)
    installed = await wait_present(kube, namespace, plain)

    # cert-manager is not installed: Degraded, and the cert-controller stays.
    await esc.patch_spec({"appConfig": cert_manager_spec})
    degraded = await wait_condition(esc, "Degraded", "True", reason="CertManagerNotInstalled")
    assert "spec.appConfig.certManagerConfig.enabled" in degraded["message"]
    assert await present(kube, namespace) == installed

    # cert-manager's CRDs arrive at run time: noticed without a restart; now the Issuer is
    # missing, and the message names it. Still nothing is removed.
    await install_crds(kube, load_crds(crd_dir / "cert-manager"), field_manager="cert-manager")
    degraded = await wait_condition(esc, "Degraded", "True", reason="IssuerNotFound")
    assert "spec.appConfig.certManagerConfig.issuerRef" in degraded["message"]
    assert 'Issuer "eso-issuer" not found' in await esc.failure_message()
    await wait_present(kube, namespace, cert_controller)

    # cert-manager runs and the Issuer appears: the webhook Certificate is issued, and only
    # once it is Ready and its Secret exists does the cert-controller go.
    cert_manager.start()
    await kube.create(f"/apis/cert-manager.io/v1/namespaces/{namespace}/issuers",
                      {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                       "metadata": {"name": "eso-issuer"}, "spec": {"selfSigned": {}}},
                      field_manager="integration-tests")
    await wait_condition(esc, "Ready", "True", timeout=120)
    found = await wait_present(kube, namespace, with_cert_manager, absent=cert_controller)
    assert ("Certificate", namespace, "external-secrets-webhook") in found
    certificate = await kube.request(
        "GET", f"/apis/cert-manager.io/v1/namespaces/{namespace}/certificates/"
               "external-secrets-webhook")
    issued = next(c for c in certificate["status"]["conditions"] if c["type"] == "Ready")
    uid = (await esc.get())["metadata"]["uid"]
    events = await esc_events(kube, uid)
    removals = [e for e in events
                if e["reason"] == "Applied" and "the cert-controller goes" in e["note"]]
    assert len(removals) == 1, "\n".join(f"{e['reason']}: {e['note'][:150]}" for e in events)
    removal = removals[0]
    assert "pruned" in removal["note"], removal
    assert _time(removal["eventTime"]) >= _time(issued["lastTransitionTime"])

    # Without the CA injector (addInjectorAnnotations "false"), the operator put the CA that
    # cert-manager published into both webhook configurations, and the webhook serves the
    # issued certificate: the API server calls it and it admits a store.
    # Right after the switch the caBundle trusts the cert-controller's CA too, until the
    # overlap ends (ca_overlap.py; compressed here); then exactly the published CA.
    secret = await kube.request("GET", f"/api/v1/namespaces/{namespace}/secrets/"
                                       "external-secrets-webhook-cm")

    async def published_ca_alone() -> None:
        for name in ("externalsecret-validate", "secretstore-validate"):
            configuration = await kube.request("GET", f"{WEBHOOKS}/{name}")
            assert {w["clientConfig"].get("caBundle") for w in configuration["webhooks"]} == {
                secret["data"]["ca.crt"]}, name

    await eventually(published_ca_alone, 60)
    store = await kube.create(f"/apis/external-secrets.io/v1/namespaces/{USER_NAMESPACE}/"
                              "secretstores", {
        "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": "through-the-webhook"},
        "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}}},
        field_manager="integration-tests")
    await kube.delete(f"/apis/external-secrets.io/v1/namespaces/{USER_NAMESPACE}/secretstores/"
                      f"{store['metadata']['name']}")
    await user_objects.assert_untouched(kube)

    # A second fault: the Issuer is deleted, then the webhook Deployment. The issued Secret
    # still exists, so only the Certificate waits for the Issuer: the Deployment comes back
    # and the webhook admits again, while the ESC is Degraded naming the Issuer.
    issuer = f"/apis/cert-manager.io/v1/namespaces/{namespace}/issuers/eso-issuer"
    webhook = f"/apis/apps/v1/namespaces/{namespace}/deployments/external-secrets-webhook"
    lost = await kube.request("GET", webhook)
    await kube.delete(issuer)
    degraded = await wait_condition(esc, "Degraded", "True", reason="IssuerNotFound")
    assert "keeps serving the certificate cert-manager issued" in await esc.failure_message()
    await kube.delete(webhook)

    async def webhook_back() -> None:
        live = await kube.get(webhook)
        assert live is not None
        assert live["metadata"]["uid"] != lost["metadata"]["uid"]
        assert (live.get("status") or {}).get("availableReplicas") == 1, live.get("status")

    await eventually(webhook_back, 60)
    await kube.create(f"/apis/external-secrets.io/v1/namespaces/{USER_NAMESPACE}/secretstores", {
        "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": "through-the-webhook"},
        "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}}},
        field_manager="integration-tests")
    await kube.delete(f"/apis/external-secrets.io/v1/namespaces/{USER_NAMESPACE}/secretstores/"
                      "through-the-webhook")
    assert degraded["reason"] == "IssuerNotFound"
    await kube.create(issuer.rpartition("/")[0],
                      {"apiVersion": "cert-manager.io/v1", "kind": "Issuer",
                       "metadata": {"name": "eso-issuer"}, "spec": {"selfSigned": {}}},
                      field_manager="integration-tests")
    await wait_condition(esc, "Ready", "True", timeout=60)

    # The CRD annotator: every operand CRD gets cert-manager's injector annotation.
    await esc.patch_spec({"appConfig": {"certManagerConfig": {"addInjectorAnnotations": "true"}}})

    async def annotated(expected: str | None) -> int:
        listing = await kube.list(CRD_COLLECTION)
        operand = [c for c in listing["items"] if is_operand_crd(c["metadata"]["name"])]
        assert operand
        for crd in operand:
            value = (crd["metadata"].get("annotations") or {}).get(INJECT_CA_FROM)
            assert value == expected, crd["metadata"]["name"]
        return len(operand)

    count = await eventually(lambda: annotated(f"{namespace}/external-secrets-webhook"))

    async def annotator_status() -> None:
        ready = (await esm_conditions(kube, "crd-annotator")).get("Ready")
        assert ready is not None, "no crd-annotator entry yet"
        assert ready["status"] == "True"
        assert f"{count} operand CRDs carry {INJECT_CA_FROM}" in ready["message"]

    await eventually(annotator_status)

    # With the injector, cert-manager's cainjector fills the caBundle: Ready again.
    await wait_condition(esc, "Ready", "True", timeout=60)

    # The operator writes the CA the injector writes (so that it can bridge a CA change:
    # ca_overlap.py): another CA planted while the injector is stopped is repaired by the
    # operator. (A stale caBundle nobody repairs: test_waiting.py.)
    cert_manager.stop()
    await kube.request("PATCH", f"{WEBHOOKS}/secretstore-validate", body=[
        {"op": "replace", "path": "/webhooks/0/clientConfig/caBundle",
         "value": another_ca(tmp_path)}], content_type="application/json-patch+json")

    async def repaired() -> None:
        issued = await kube.request("GET", f"/api/v1/namespaces/{namespace}/secrets/"
                                           "external-secrets-webhook-cm")
        configuration = await kube.request("GET", f"{WEBHOOKS}/secretstore-validate")
        assert {w["clientConfig"].get("caBundle") for w in configuration["webhooks"]} == {
            issued["data"]["ca.crt"]}

    await eventually(repaired, 30)
    cert_manager.start()
    await wait_condition(esc, "Ready", "True", timeout=60)

    # Switched off again: the annotation the operator applied is released (removed), and the
    # operator fills the caBundle itself once more.
    await esc.patch_spec({"appConfig": {"certManagerConfig": {"addInjectorAnnotations": "false"}}})
    await eventually(lambda: annotated(None))
    await wait_condition(esc, "Ready", "True", timeout=60)
    # Leave no cert-manager objects behind for later tests (removing the CRDs removes them).
    await remove_cert_manager_crds(kube)


async def test_invalid_spec_is_degraded_and_deletes_nothing(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    namespace = SCENARIO_NAMESPACES["invalid"]
    await start_operator()
    await esc.create({"controllerConfig": {"namespace": namespace}})
    await wait_condition(esc, "Ready", "True")
    before = {k: v["metadata"]["resourceVersion"]
              for k, v in (await managed_objects(kube, namespace)).items()}

    await esc.patch_spec({"appConfig": {"resources": {"requests": {"cpu": "2"},
                                                      "limits": {"cpu": "1"}}}})
    degraded = await wait_condition(esc, "Degraded", "True", reason="InvalidConfiguration")
    assert "spec.appConfig.resources" in degraded["message"]
    ready = await esc.condition("Ready")
    assert ready is not None
    assert ready["status"] == "False"
    assert ready["observedGeneration"] == (await esc.get())["metadata"]["generation"]
    await asyncio.sleep(1)
    after = {k: v["metadata"]["resourceVersion"]
             for k, v in (await managed_objects(kube, namespace)).items()}
    assert after == before  # nothing applied, nothing deleted

    await esc.patch_spec({"appConfig": {"resources": None}})
    await wait_condition(esc, "Ready", "True")
    assert (await esc.condition("Degraded") or {})["status"] == "False"
    await user_objects.assert_untouched(kube)


async def test_transient_error_shows_progressing_and_is_retried(
        kube: Kube, esc: EscHandle, start_operator: StartOperator) -> None:
    """The real API server cannot fail on demand, so the test makes the operator's requests
    for Deployments fail to connect for a while (a fake fault, in this process only)."""
    namespace = SCENARIO_NAMESPACES["transient"]
    operator = await start_operator()
    deployments = f"/apis/apps/v1/namespaces/{namespace}/deployments/"
    operator.log.fault = lambda method, url: method == "PATCH" and deployments in url
    await esc.create({"controllerConfig": {"namespace": namespace}})

    progressing = await wait_condition(esc, "Progressing", "True", reason="APIError")
    assert "Deployment" in progressing["message"]
    assert (await esc.condition("Ready") or {})["status"] == "False"
    assert (await esc.condition("Degraded") or {})["status"] == "False"

    operator.log.fault = None
    await wait_condition(esc, "Ready", "True", timeout=40)
    assert (await esc.condition("Progressing") or {})["status"] == "False"
    assert ("Deployment", namespace, "external-secrets") in await present(kube, namespace)
