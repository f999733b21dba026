"""The webhook's CA source changes under two webhook replicas, with the real cert-manager
(controller and CA injector), the real cert-controller and the real webhook: not one
admission may be refused (issue 35, item 5).

Two paths that the overlap of tests/integration/test_certificate_lifetimes.py (the switch
to cert-manager with the operator filling the caBundle) did not cover:

- **the switch with cert-manager's CA injector** (`addInjectorAnnotations: "true"`): the
  injector writes cert-manager's CA into the webhook configurations as soon as the
  certificate is issued, while the pods still serve the cert-controller's certificate and
  the cert-controller, still running, writes its own CA back;
- **the way back to the cert-controller**, as the CRD's admission message says: delete the
  ExternalSecretsConfig (the operand keeps running) and create it again without
  cert-manager. The webhook pods serve cert-manager's certificate until they roll onto the
  cert-controller's, which the cert-controller first has to make.

Each test samples admissions (tests/samplers.py: three staggered streams, an attempt every
33 ms, probes the webhook itself must refuse) from before the change until every pod serves
the new source's certificate and the caBundles trust that CA alone (or, with the injector,
include it), and a few seconds more. The sampler proves it could see (attempts answered,
the largest interval between attempts); 0 refused but single keep-alive races (a pod
stopping at the end of a roll: tests/samplers.py `KEEPALIVE_RACE`). Figures: with `-s`,
lines starting `FIGURES ca-source`; docs/resilience.md, "Day 2".
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from devcluster.controlplane import ensure_tool
from manager.client.kube import Kube, install_crds
from manager.names import WEBHOOK_SECRET, WEBHOOK_SECRET_CERT_MANAGER
from manager.render.context import COMPONENT_LABEL, INJECT_CA_FROM, WEBHOOK_CONFIGURATIONS
from manager.runtime.operator import load_crds
from manager.steps import ca_overlap
from manager.steps.readiness import certificates
from tests.conftest import CertManager
from tests.integration import conftest as integration
from tests.integration.conftest import (
    ESC_API,
    USER_NAMESPACE,
    EscHandle,
    StartOperator,
    UserObjects,
    wait_condition,
)
from tests.integration.test_certificate_lifetimes import (
    bundle_cas,
    presented,
    restarts,
    webhook_pods,
)
from tests.integration.test_controller_toggles import remove_cert_manager_crds
from tests.samplers import AdmissionFigures, AdmissionSampler, own_client
from tests.waiting import eventually

# Bounds on time and on refusals: run after the busiest neighbours (hack/run-tests.py).
pytestmark = pytest.mark.timing

# The integration suite's fixtures for one operator and one ESC per test, registered here.
esc = integration.esc
start_operator = integration.start_operator
user_objects = integration.user_objects

NAMESPACE = "eso-disruption-ca"
ISSUER = "eso-selfsigned"
WEBHOOK_REPLICAS = 2
# As the disruption suite samples (tests/disruption/figures.py): three staggered streams,
# each every 100 ms.
SAMPLE_INTERVAL = 0.1
SAMPLE_STREAMS = 3
# Time compressed as in test_certificate_lifetimes: the simulated kubelet refreshes volumes
# every second, so 20 s stand in for the 180 s of a cluster.
OVERLAP_SECONDS = 20.0
TAIL_SECONDS = 3.0
"""Sampled after the end state is reached: a component still writing would show here."""
WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"


@contextlib.asynccontextmanager
async def sampling(kube: Kube) -> AsyncIterator[AdmissionSampler]:
    client = own_client(kube)
    try:
        async with AdmissionSampler(client, USER_NAMESPACE, interval=SAMPLE_INTERVAL,
                                    concurrency=SAMPLE_STREAMS) as sampler:
            yield sampler
    finally:
        await client.close()


class BundleTimeline:
    """Every version of the two webhook configurations while the body runs: when, who wrote
    it (the field manager of the newest managedFields entry) and which CAs each caBundle
    held, named in order of appearance (CA1, CA2, ...). It shows where a window came from."""

    def __init__(self, kube: Kube):
        self.kube = kube
        self.lines: list[str] = []
        self._names: dict[bytes, str] = {}
        self._task: asyncio.Task[None] | None = None
        self._start = 0.0

    async def __aenter__(self) -> BundleTimeline:
        listing = await self.kube.list(WEBHOOKS)
        self._start = time.monotonic()
        for item in listing["items"]:
            self._record("LISTED", item)
        self._task = asyncio.create_task(
            self._follow(str(listing["metadata"]["resourceVersion"])))
        return self

    async def __aexit__(self, *_: object) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task

    async def _follow(self, version: str) -> None:
        async for event in self.kube.watch(WEBHOOKS, resource_version=version):
            if event.type != "BOOKMARK":
                self._record(event.type, event.object)

    def _record(self, kind: str, item: dict[str, Any]) -> None:
        meta = item.get("metadata") or {}
        if meta.get("name") not in WEBHOOK_CONFIGURATIONS:
            return
        entries = sorted(meta.get("managedFields") or [], key=lambda e: e.get("time") or "")
        writer = entries[-1].get("manager") if entries else "?"
        bundles = []
        for webhook in item.get("webhooks") or []:
            cas = certificates((webhook.get("clientConfig") or {}).get("caBundle") or "")
            bundles.append("+".join(sorted(self._name(ca) for ca in cas)) or "none")
        component = (meta.get("labels") or {}).get(COMPONENT_LABEL, "-")
        injected = "inject" if INJECT_CA_FROM in (meta.get("annotations") or {}) else "-"
        self.lines.append(f"{time.monotonic() - self._start:7.2f} s {kind} {meta['name']} "
                          f"by {writer} [{' '.join(bundles)}] label={component} {injected}")

    def _name(self, ca: bytes) -> str:
        return self._names.setdefault(ca, f"CA{len(self._names) + 1}")

    def __str__(self) -> str:
        return "\n".join(self.lines)


def report(path: str, figures: AdmissionFigures, started: float,
           timeline: BundleTimeline) -> None:
    """The figures, printed (with -s), then held: the sampler could see (checked on its
    exit), and nothing was refused but single keep-alive races."""
    print(f"FIGURES ca-source {path}: {figures.refused} refused of {figures.attempts}, "
          f"longest gap {figures.longest_gap:.2f} s, at most {figures.largest_interval:.2f} s "
          f"between attempts, {figures.checked} probes refused by the webhook, "
          f"{time.monotonic() - started:.1f} s to settle; {figures}")
    print(f"caBundle timeline ({path}):\n{timeline}")
    figures.assert_refused_only_by_keepalive_races()


def start_cert_manager(cert_manager: CertManager, *, merging: bool = True) -> None:
    """cert-manager's controller and CA injector, as the `cert_manager` fixture starts them
    (and stops them: its `processes`), the injector with its CAInjectorMerging feature gate
    on (v1.19 and later: it adds a new CA to the caBundle) or off (before v1.19, and the
    cert-manager Operator for Red Hat OpenShift's releases on cert-manager 1.17 and earlier:
    it replaces the caBundle with the new CA)."""
    bin_dir = ensure_tool("cert-manager")
    kubeconfig = cert_manager.cluster.kubeconfig
    for name, args in (("cert-manager-controller", [
            "--cluster-resource-namespace=kube-system", "--metrics-listen-address=127.0.0.1:0"]),
                       ("cert-manager-cainjector", [
                           f"--feature-gates=CAInjectorMerging={str(merging).lower()}"])):
        with (kubeconfig.parent / f"{name}.log").open("ab") as log:
            cert_manager.processes.append(subprocess.Popen(
                ["setpriv", "--pdeathsig=KILL", "--", str(bin_dir / name),
                 f"--kubeconfig={kubeconfig}", "--leader-elect=false", *args],
                env={**os.environ, "KUBECONFIG": str(kubeconfig)},
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))


async def cert_manager_with_an_issuer(kube: Kube, crd_dir: Path, cert_manager: CertManager,
                                      *, merging: bool = True) -> None:
    """cert-manager's CRDs, its controller and CA injector, and a selfSigned Issuer in the
    operand namespace (created here, before the operator)."""
    await install_crds(kube, load_crds(crd_dir / "cert-manager"), field_manager="cert-manager")
    start_cert_manager(cert_manager, merging=merging)
    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        field_manager="disruption-tests")
    await eventually(lambda: kube.apply(
        f"/apis/cert-manager.io/v1/namespaces/{NAMESPACE}/issuers/{ISSUER}", {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": ISSUER, "namespace": NAMESPACE},
            "spec": {"selfSigned": {}}}, field_manager="disruption-tests"), 60,
        what="cert-manager's API")


async def without_cert_manager(kube: Kube, cert_manager: CertManager) -> None:
    cert_manager.stop()
    await remove_cert_manager_crds(kube)


def spec(**app_config: object) -> dict[str, object]:
    base: dict[str, object] = {"controllerConfig": {"namespace": NAMESPACE, "componentConfigs": [
        {"componentName": "Webhook", "deploymentConfigs": {"replicas": WEBHOOK_REPLICAS}}]}}
    return {**base, "appConfig": app_config} if app_config else base


CERT_MANAGER = {"enabled": "true", "issuerRef": {"name": ISSUER, "kind": "Issuer"}}


async def secret_certificates(kube: Kube, name: str, key: str) -> frozenset[bytes]:
    secret = await kube.request("GET", f"{SECRETS}/{name}")
    return certificates((secret.get("data") or {}).get(key) or "")


async def serving(kube: Kube, served: frozenset[bytes]) -> None:
    """Every webhook pod (two) presents one of `served` over TLS, and none restarted."""
    pods = await webhook_pods(kube, NAMESPACE)
    assert len(pods) == WEBHOOK_REPLICAS, f"{len(pods)} webhook pods"
    for name, pod in pods.items():
        assert await presented(pod["status"]["podIP"]) in served, f"{name} serves another"
    assert {name: restarts(pod) for name, pod in pods.items()} == dict.fromkeys(pods, 0)


async def cert_controller_gone(kube: Kube) -> None:
    assert await kube.get(f"{DEPLOYMENTS}/external-secrets-cert-controller") is None, (
        "the cert-controller still runs")


@pytest.mark.parametrize("merging", [True, False], ids=["merging", "replacing"])
async def test_the_switch_with_the_ca_injector_refuses_no_admission(
        merging: bool, *, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects, crd_dir: Path, cert_manager: CertManager,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """cert-controller → cert-manager with `addInjectorAnnotations: "true"`: settled when
    the cert-controller is gone, every pod serves cert-manager's certificate and every
    caBundle trusts its CA. With an injector that adds the new CA (`merging`) and with one
    that replaces the caBundle with it."""
    monkeypatch.setattr(ca_overlap, "OVERLAP_SECONDS", OVERLAP_SECONDS)
    await cert_manager_with_an_issuer(kube, crd_dir, cert_manager, merging=merging)
    operator = await start_operator()
    await esc.create(spec())
    await wait_condition(esc, "Ready", "True", timeout=180)

    async def settled() -> None:
        published = await secret_certificates(kube, WEBHOOK_SECRET_CERT_MANAGER, "ca.crt")
        assert published, "not issued yet"
        await cert_controller_gone(kube)
        assert await bundle_cas(kube) == {published}, "the caBundles trust another CA too"
        for name in WEBHOOK_CONFIGURATIONS:  # the injector's annotation is back
            meta = (await kube.request("GET", f"{WEBHOOKS}/{name}"))["metadata"]
            assert INJECT_CA_FROM in (meta.get("annotations") or {}), f"{name}: no annotation"
        await serving(kube, published)  # selfSigned: the certificate is its own CA

    async with sampling(kube) as sampler, BundleTimeline(kube) as timeline:
        started = time.monotonic()
        await esc.patch_spec({"appConfig": {"certManagerConfig": {
            **CERT_MANAGER, "addInjectorAnnotations": "true"}}})
        await wait_condition(esc, "Ready", "True", timeout=180)
        await eventually(settled, 120, what="the webhook to settle on cert-manager")
        await operator.wait_idle()  # the passes the last writes caused, sampled too
        await asyncio.sleep(TAIL_SECONDS)
    report(f"switch with the CA injector ({'merging' if merging else 'replacing'})",
           sampler.figures, started, timeline)
    await without_cert_manager(kube, cert_manager)


async def test_the_way_back_to_the_cert_controller_refuses_no_admission(
        *, kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects, crd_dir: Path, cert_manager: CertManager,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """cert-manager → cert-controller as the admission message says: delete the ESC and
    create it again without certManagerConfig. Settled when every pod serves the
    cert-controller's certificate and every caBundle trusts the cert-controller's CA alone."""
    monkeypatch.setattr(ca_overlap, "OVERLAP_SECONDS", OVERLAP_SECONDS)
    await cert_manager_with_an_issuer(kube, crd_dir, cert_manager)
    operator = await start_operator()
    await esc.create(spec(certManagerConfig=CERT_MANAGER))
    await wait_condition(esc, "Ready", "True", timeout=180)

    async def on_cert_manager() -> None:
        published = await secret_certificates(kube, WEBHOOK_SECRET_CERT_MANAGER, "ca.crt")
        assert await bundle_cas(kube) == {published}
        await serving(kube, published)

    await eventually(on_cert_manager, 120, what="the webhook to settle on cert-manager")

    async def settled() -> None:
        ca = await secret_certificates(kube, WEBHOOK_SECRET, "ca.crt")
        assert ca, "the cert-controller has not made its certificate yet"
        assert await bundle_cas(kube) == {ca}, "the caBundles do not trust its CA alone"
        await serving(kube, await secret_certificates(kube, WEBHOOK_SECRET, "tls.crt"))

    async with sampling(kube) as sampler, BundleTimeline(kube) as timeline:
        started = time.monotonic()
        await kube.delete(f"{ESC_API}/cluster")

        async def deleted() -> None:
            assert await kube.get(f"{ESC_API}/cluster") is None

        await eventually(deleted, 30, what="the ESC to be deleted")
        await esc.create(spec())
        await wait_condition(esc, "Ready", "True", timeout=180)
        print(f"way back: Ready {time.monotonic() - started:.1f} s after the delete")
        await eventually(settled, 120, what="the webhook to settle on the cert-controller")
        await operator.wait_idle()  # the passes the last writes caused, sampled too
        await asyncio.sleep(TAIL_SECONDS)
    report("way back to the cert-controller", sampler.figures, started, timeline)
    # The caBundle is the cert-controller's now (its write changed it, so it owns the
    # field): the operator's passes since, which render none, left it in place.
    assert await bundle_cas(kube) == {await secret_certificates(kube, WEBHOOK_SECRET, "ca.crt")}
    await without_cert_manager(kube, cert_manager)
