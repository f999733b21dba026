"""The cluster's TLS security profile, applied to the real webhook (the shipped
external-secrets, run by the pod runner) and to the operator's own /metrics, judged by real
handshakes with Python's ssl.

One operator and one operand install serve the whole scenario (each profile change rolls the
webhook, about 5-10 s). It starts on plain Kubernetes (no config.openshift.io API:
Intermediate, nothing fails), then the session's cluster serves OpenShift's config API
(devcluster/crds.py) while the operator runs, and the profile goes Old, Modern, Custom; an
unrelated APIServer edit starts no pass. The config API is removed again at the end, so
every other test sees plain Kubernetes.

For each profile, every TLS version from 1.0 to 1.3, and at TLS 1.2 a cipher the profile
allows and one it does not, must be accepted exactly when the profile allows it. The webhook
serves an RSA certificate (the cert-controller's), so the ciphers tried are ECDHE-RSA ones.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from manager.apply.results import ObjectRef
from manager.client.kube import Kube
from manager.tls_profile import TLSVersionName
from tests import tls_scan
from tests.conftest import Cluster
from tests.e2e.operator_process import free_port
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    USE_EXISTING_CLUSTER,
    EscHandle,
    OperatorThread,
    eventually,
    install_openshift_config,
    remove_openshift_config,
    wait_installed,
)

NAMESPACE = SCENARIO_NAMESPACES["tls-profile"]
APISERVER = "/apis/config.openshift.io/v1/apiservers/cluster"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
WEBHOOK = "external-secrets-webhook"
OTHERS = ("external-secrets", "external-secrets-cert-controller")
WEBHOOK_PORT = 10250
PYTHON_VERSIONS = {"VersionTLS10": ssl.TLSVersion.TLSv1, "VersionTLS11": ssl.TLSVersion.TLSv1_1,
                   "VersionTLS12": ssl.TLSVersion.TLSv1_2, "VersionTLS13": ssl.TLSVersion.TLSv1_3}

pytestmark = pytest.mark.skipif(USE_EXISTING_CLUSTER, reason="reads the webhook's processes "
                                "and replaces the cluster's config API")


@dataclass(frozen=True)
class Expected:
    """What a profile allows the webhook to accept."""

    min_version: TLSVersionName
    allowed: str | None
    """An ECDHE-RSA cipher the profile allows at TLS 1.2 (None: TLS 1.2 is refused)."""
    outside: str
    """An ECDHE-RSA cipher the profile does not allow."""


INTERMEDIATE = Expected("VersionTLS12", "ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA")
OLD = Expected("VersionTLS10", "ECDHE-RSA-AES128-SHA", "ECDHE-RSA-AES256-SHA384")
MODERN = Expected("VersionTLS13", None, "ECDHE-RSA-AES128-GCM-SHA256")
CUSTOM_PROFILE = {"type": "Custom", "custom": {
    "minTLSVersion": "VersionTLS11",
    "ciphers": ["ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-SHA"]}}
CUSTOM = Expected("VersionTLS11", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES128-GCM-SHA256")
# In Old, but the webhook never offers it: Go lists it among InsecureCipherSuites() only, so
# the operator drops it (tls_profile.GO_CIPHERS).
DROPPED = "ECDHE-RSA-AES128-SHA256"
CIPHERS = ("ECDHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES256-GCM-SHA384", "ECDHE-RSA-AES128-SHA",
           "ECDHE-RSA-AES256-SHA", "ECDHE-RSA-AES256-SHA384", DROPPED)


def handshake(address: str, version: ssl.TLSVersion, cipher: str = "ALL",
              port: int = WEBHOOK_PORT) -> bool:
    """Whether the server completes a handshake at exactly `version` offering only `cipher`
    (TLS 1.3 suites are always offered; tests/tls_scan.py)."""
    return tls_scan.handshake(address, port, version, cipher) is not None


def accepted(address: str) -> dict[str, bool]:
    """What the webhook at `address` accepts: each version, and at TLS 1.2 two ciphers."""
    results = {name: handshake(address, version) for name, version in PYTHON_VERSIONS.items()}
    for cipher in CIPHERS:
        results[cipher] = handshake(address, ssl.TLSVersion.TLSv1_2, cipher)
    return results


def assert_follows(results: dict[str, bool], expected: Expected) -> None:
    minimum = list(PYTHON_VERSIONS).index(expected.min_version)
    versions = {name: index >= minimum for index, name in enumerate(PYTHON_VERSIONS)}
    assert {name: results[name] for name in PYTHON_VERSIONS} == versions, results
    if expected.allowed is not None:
        assert results[expected.allowed], results
    assert not results[expected.outside], results
    assert not results[DROPPED], results


# The operator's own /metrics (self-signed P-256 certificate, so ECDHE-ECDSA ciphers): per
# profile, TLS 1.2 ciphers and whether the profile allows them; every version is checked too.
METRICS_CIPHERS = {
    "Intermediate": {"ECDHE-ECDSA-AES128-GCM-SHA256": True, "ECDHE-ECDSA-AES128-SHA": False},
    "Old": {"ECDHE-ECDSA-AES128-SHA": True, "ECDHE-ECDSA-AES128-GCM-SHA256": True},
    "Modern": {"ECDHE-ECDSA-AES128-GCM-SHA256": False},
    "Custom": {"ECDHE-ECDSA-AES128-GCM-SHA256": False},
}


# The Custom profile lists ECDHE-RSA ciphers only, and the metrics certificate is ECDSA: below
# TLS 1.3 no cipher can be agreed, so only TLS 1.3 handshakes succeed.
METRICS_MINIMUM = {"Custom": "VersionTLS13"}


async def metrics_follow(port: int, profile: str, min_version: str) -> None:
    """The operator's metrics server applies `profile` (it follows the pass that read it):
    each TLS version is accepted exactly from `min_version` on, and the ciphers as listed."""
    async def follows() -> None:
        minimum = list(PYTHON_VERSIONS).index(min_version)
        versions = {name: await asyncio.to_thread(handshake, "127.0.0.1", version, "ALL", port)
                    for name, version in PYTHON_VERSIONS.items()}
        assert versions == {name: index >= minimum
                            for index, name in enumerate(PYTHON_VERSIONS)}, (profile, versions)
        for cipher, allowed in METRICS_CIPHERS[profile].items():
            answer = await asyncio.to_thread(handshake, "127.0.0.1", ssl.TLSVersion.TLSv1_2,
                                             cipher, port)
            assert answer is allowed, (profile, cipher, answer)

    await eventually(follows, timeout=30)


async def generations(kube: Kube) -> dict[str, int]:
    listing = await kube.list(DEPLOYMENTS)
    return {item["metadata"]["name"]: item["metadata"]["generation"]
            for item in listing["items"]}


@dataclass(frozen=True)
class Serving:
    pod: str
    address: str


async def serving_webhook(cluster: Cluster, kube: Kube, replacing: Serving | None) -> Serving:
    """The one webhook process, in a pod other than `replacing`'s, once it serves."""
    assert cluster.simulated is not None

    async def one_serving() -> Serving:
        processes = cluster.simulated.processes(NAMESPACE, "webhook")
        assert len(processes) == 1, [p.pod for p in processes]
        pod = processes[0].pod
        assert replacing is None or pod != replacing.pod, "not rolled yet"
        found = await kube.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods/{pod}")
        address = str(found["status"]["podIP"])
        newest = PYTHON_VERSIONS["VersionTLS13"]
        assert await asyncio.to_thread(handshake, address, newest), "not serving yet"
        return Serving(pod, address)

    return await eventually(one_serving, timeout=90, what="one webhook serving")


async def set_profile(kube: Kube, profile: dict[str, Any] | None) -> None:
    await kube.merge_patch(APISERVER, {"spec": {"tlsSecurityProfile": profile}},
                           field_manager="integration-tests")


async def tls_status(esc: EscHandle) -> dict[str, Any]:
    return dict(((await esc.get()).get("status") or {}).get("tlsProfile") or {})


async def test_the_webhook_follows_the_cluster_tls_profile(
        cluster: Cluster, kube: Kube, esc: EscHandle, crd_dir: Path,
        start_operator: Callable[..., Awaitable[OperatorThread]]) -> None:
    assert await kube.get("/apis/config.openshift.io/v1") is None, "not plain Kubernetes"
    metrics_port = free_port()
    operator = await start_operator(metrics_addr=f"127.0.0.1:{metrics_port}")  # secure
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_installed(esc, NAMESPACE, timeout=90)

    # Plain Kubernetes: Intermediate, and nothing fails.
    assert await tls_status(esc) == {"type": "Intermediate", "minTLSVersion": "VersionTLS12"}
    serving = await serving_webhook(cluster, kube, None)
    assert_follows(await asyncio.to_thread(accepted, serving.address), INTERMEDIATE)
    await metrics_follow(metrics_port, "Intermediate", "VersionTLS12")
    try:
        # The config API arrives with an APIServer that sets no profile: nothing rolls.
        before = await generations(kube)
        passes = operator.passes
        await install_openshift_config(kube, crd_dir)
        await operator.wait_woken(passes, "CustomResourceDefinition")
        assert await generations(kube) == before

        for profile, expected in (({"type": "Old", "old": {}}, OLD),
                                  ({"type": "Modern", "modern": {}}, MODERN),
                                  (CUSTOM_PROFILE, CUSTOM)):
            before = await generations(kube)
            await set_profile(kube, profile)
            serving = await serving_webhook(cluster, kube, serving)
            after = await generations(kube)
            assert after[WEBHOOK] == before[WEBHOOK] + 1, (before, after)  # rolled once
            assert {name: after[name] for name in OTHERS} == {
                name: before[name] for name in OTHERS}  # the others did not roll
            assert_follows(await asyncio.to_thread(accepted, serving.address), expected)
            await metrics_follow(metrics_port, profile["type"],
                                 METRICS_MINIMUM.get(profile["type"], expected.min_version))
            assert await tls_status(esc) == {"type": profile["type"],
                                             "minTLSVersion": expected.min_version}

        # An unrelated edit of the APIServer (its audit profile, a label) starts no pass: the
        # watch delivered it (the operator's cache holds it), and no pass followed.
        await operator.wait_idle()
        before, passes = await generations(kube), operator.passes
        edited = await kube.merge_patch(APISERVER, {
            "metadata": {"labels": {"edited": "yes"}},
            "spec": {"audit": {"profile": "AllRequestBodies"}}}, field_manager="integration-tests")
        await eventually(lambda: _cached(operator, edited), timeout=30)
        await operator.wait_idle()
        assert operator.passes == passes, {
            number: reasons for number, reasons in operator.log.pass_reasons().items()
            if number > passes}
        assert await generations(kube) == before
    finally:
        await remove_openshift_config(kube, crd_dir)
    # Back to plain Kubernetes: Intermediate again.
    serving = await serving_webhook(cluster, kube, serving)
    assert_follows(await asyncio.to_thread(accepted, serving.address), INTERMEDIATE)
    await eventually(lambda: _status_is(esc, "Intermediate"), timeout=30)
    await metrics_follow(metrics_port, "Intermediate", "VersionTLS12")


async def _cached(operator: OperatorThread, edited: dict[str, Any]) -> None:
    """The operator's watch cache holds `edited` (or a later version): the watch saw it, and
    had it called for a pass, the request would be in the queue already."""
    runtime = operator.runtime
    assert runtime is not None
    cached = runtime.cache.get(ObjectRef.of(edited))
    assert cached is not None, "the APIServer is not in the operator's cache"
    assert int(cached["metadata"]["resourceVersion"]) >= \
        int(edited["metadata"]["resourceVersion"]), cached["metadata"]


async def _status_is(esc: EscHandle, profile: str) -> None:
    assert (await tls_status(esc)).get("type") == profile
