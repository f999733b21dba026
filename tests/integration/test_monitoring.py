"""OperandMonitoring: the monitoring CRDs (from the pinned prometheus-operator module) arrive
after the operator started, and the ServiceMonitors and the PrometheusRules (the operand's,
and the operator's own in its namespace) appear without a restart; removing the feature from
the ExternalSecretsManager prunes them. Until the CRDs are there, the ESM's status says the
feature has no effect; on OpenShift it also says which namespace nothing scrapes (neither
labelled for platform monitoring nor under user-workload monitoring, which is off). With the
real cert-manager issuing the webhook certificate, the leader exports its expiry (the series
the operator's expiry alert reads) until the ESC goes."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path

import pytest
import pytest_asyncio
from prometheus_client import REGISTRY

from manager.api import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.client.kube import CRD_COLLECTION, Kube, install_crds
from manager.config import OPERAND_MONITORING, OperatorEnvironment, effective_config
from manager.names import ESC_PATH, WEBHOOK_CERTIFICATE, WEBHOOK_SECRET_CERT_MANAGER
from manager.render import render_operand
from manager.reporting.status import CONTROLLER_ESM
from manager.runtime.operator import load_crds
from tests.conftest import CertManager
from tests.integration.conftest import (
    ESM_PATH,
    MANAGED,
    OPERATOR_NAMESPACE,
    SCENARIO_NAMESPACES,
    EscHandle,
    OperatorThread,
    StartOperator,
    esm_conditions,
    eventually,
    in_operator_namespace,
    install_openshift_config,
    remove_openshift_config,
    wait_condition,
)
from tests.integration.test_controller_toggles import remove_cert_manager_crds

NAMESPACE = SCENARIO_NAMESPACES["monitoring"]
MONITORING_CRDS = ("servicemonitors.monitoring.coreos.com",
                   "prometheusrules.monitoring.coreos.com")
SERVICE_MONITORS = f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/servicemonitors"
PROMETHEUS_RULES = f"/apis/monitoring.coreos.com/v1/namespaces/{NAMESPACE}/prometheusrules"


async def remove_monitoring_crds(kube: Kube) -> None:
    for name in MONITORING_CRDS:
        await kube.delete(f"{CRD_COLLECTION}/{name}")

    async def gone() -> None:
        for name in MONITORING_CRDS:
            assert await kube.get(f"{CRD_COLLECTION}/{name}") is None, name
        served = await kube.get("/apis/monitoring.coreos.com/v1")
        assert not (served or {}).get("resources"), "monitoring.coreos.com/v1 is still served"

    await eventually(gone, timeout=30)


async def set_feature(kube: Kube, enabled: bool) -> None:
    features = [{"name": OPERAND_MONITORING, "enabled": "true"}] if enabled else None
    await kube.merge_patch(ESM_PATH, {"spec": {"features": features}},
                           field_manager="integration-tests")


@pytest_asyncio.fixture(loop_scope="session")
async def without_monitoring_crds(kube: Kube) -> AsyncIterator[None]:
    await remove_monitoring_crds(kube)
    yield
    await set_feature(kube, False)
    await remove_monitoring_crds(kube)  # later tests expect a cluster without them


async def names(kube: Kube, collection: str) -> set[str]:
    listing = await kube.list(collection, label_selector=MANAGED)
    return {item["metadata"]["name"] for item in listing.get("items") or []}


@pytest.mark.usefixtures("user_objects", "without_monitoring_crds")
async def test_monitoring_appears_with_its_crds_and_goes_with_the_switch(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, crd_dir: Path) -> None:
    operator = await start_operator()
    await set_feature(kube, True)
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True", timeout=60)
    await operator.wait_idle()
    passes = operator.passes

    # The CRDs arrive while the operator runs: no restart, no resync (an hour away).
    await install_crds(kube, load_crds(crd_dir / "prometheus-operator"),
                       field_manager="prometheus-operator")

    async def monitored() -> None:
        assert await names(kube, SERVICE_MONITORS) == {
            "external-secrets-metrics", "external-secrets-webhook",
            "external-secrets-cert-controller-metrics"}
        assert await names(kube, PROMETHEUS_RULES) == {"external-secrets"}

    await eventually(monitored, timeout=20)
    assert operator.passes > passes
    rule = await kube.request("GET", f"{PROMETHEUS_RULES}/external-secrets")
    alerts = {r["alert"] for group in rule["spec"]["groups"] for r in group["rules"]}
    assert "ExternalSecretsDeploymentUnavailable" in alerts
    await wait_condition(esc, "Ready", "True", timeout=30)

    # The switch goes: everything it rendered is pruned, the rest of the operand stays.
    await set_feature(kube, False)

    async def pruned() -> None:
        assert await names(kube, SERVICE_MONITORS) == set()
        assert await names(kube, PROMETHEUS_RULES) == set()

    await eventually(pruned, timeout=20)
    # The rest of the operand stays.
    assert await kube.get(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/external-secrets")
    await wait_condition(esc, "Ready", "True", timeout=30)


MONITORING_IN_OPERATOR_NAMESPACE = f"/apis/monitoring.coreos.com/v1/namespaces/{OPERATOR_NAMESPACE}"
OPERATOR_MONITORS = f"{MONITORING_IN_OPERATOR_NAMESPACE}/servicemonitors"
OPERATOR_RULES = f"{MONITORING_IN_OPERATOR_NAMESPACE}/prometheusrules"
OPERATOR_OBJECTS = (f"{OPERATOR_MONITORS}/external-secrets-operator-metrics",
                    f"{OPERATOR_RULES}/external-secrets-operator")


def monitoring_applies() -> float:
    """Server-side applies of ServiceMonitors and PrometheusRules this process sent (the
    operator runs in this process; its metrics count every request)."""
    return sum(REGISTRY.get_sample_value("eso_operator_api_requests_total", {
        "verb": "apply", "resource": resource}) or 0.0
        for resource in ("servicemonitors", "prometheusrules"))


async def manager_entry(kube: Kube) -> dict[str, str]:
    """The Ready condition of the ESM's own entry (reason and message; every ESM message
    fits on one line: esm_conditions)."""
    ready = (await esm_conditions(kube, CONTROLLER_ESM)).get("Ready")
    assert ready is not None, "no status entry yet"
    return {"status": ready["status"], "reason": ready["reason"], "message": ready["message"]}


@pytest.mark.usefixtures("without_monitoring_crds")
async def test_the_operators_own_monitoring_and_a_feature_without_effect_in_status(
        kube: Kube, start_operator: StartOperator, crd_dir: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """No ESC is needed: the operator's own ServiceMonitor and PrometheusRule follow the
    ESM's feature and the monitoring API alone."""
    await in_operator_namespace(kube, monkeypatch)
    operator = await start_operator()
    await set_feature(kube, True)

    # Without the monitoring CRDs: the ESM says the feature has no effect, and why.
    async def says_no_effect() -> None:
        entry = await manager_entry(kube)
        assert entry["reason"] == "FeatureWithoutEffect", entry
        assert "OperandMonitoring is enabled but has no effect" in entry["message"], entry
        assert "monitoring.coreos.com/v1" in entry["message"], entry

    await eventually(says_no_effect, timeout=20)
    assert (await manager_entry(kube))["status"] == "True"  # nothing is broken

    # The CRDs arrive: the operator's objects appear in its namespace (the API server
    # validates them against the Prometheus Operator's schema), and the note goes.
    await install_crds(kube, load_crds(crd_dir / "prometheus-operator"),
                       field_manager="prometheus-operator")

    async def applied() -> None:
        for path in OPERATOR_OBJECTS:
            assert await kube.get(path) is not None, path
        assert (await manager_entry(kube))["reason"] == "Observed"

    await eventually(applied, timeout=20)
    monitor = await kube.request("GET", OPERATOR_OBJECTS[0])
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["authorization"]["credentials"]["name"] == \
        "external-secrets-operator-metrics-scraper-token"
    assert "app.kubernetes.io/managed-by" not in monitor["metadata"]["labels"]  # not operand
    rule = await kube.request("GET", OPERATOR_OBJECTS[1])
    assert [r["alert"] for g in rule["spec"]["groups"] for r in g["rules"]] == [
        "ExternalSecretsOperatorPassesFailing", "ExternalSecretsOperatorDown",
        "ExternalSecretsWebhookCertificateExpiring"]
    # No operator Deployment here (the operator runs in this process): no owner to follow.
    assert "ownerReferences" not in rule["metadata"]

    # Steady: a pass that finds them as they should be writes nothing.
    await operator.wait_idle()
    applies = monitoring_applies()
    before = operator.passes
    await kube.merge_patch(ESM_PATH, {"metadata": {"labels": {"poke": "1"}}},
                           field_manager="integration-tests")
    await operator.wait_woken(before, "ExternalSecretsManager")
    assert monitoring_applies() == applies

    # Drift is repaired by the next pass.
    await kube.merge_patch(OPERATOR_OBJECTS[0], {"spec": {"endpoints": [{"port": "x"}]}},
                           field_manager="someone")
    before = operator.passes
    await kube.merge_patch(ESM_PATH, {"metadata": {"labels": {"poke": "2"}}},
                           field_manager="integration-tests")
    await operator.wait_woken(before, "ExternalSecretsManager")
    repaired = await kube.request("GET", OPERATOR_OBJECTS[0])
    assert repaired["spec"]["endpoints"][0]["port"] == "metrics"

    # The feature off: both are deleted.
    await set_feature(kube, False)

    async def deleted() -> None:
        for path in OPERATOR_OBJECTS:
            assert await kube.get(path) is None, path

    await eventually(deleted, timeout=20)


CLUSTER_MONITORING_CONFIG = ("/api/v1/namespaces/openshift-monitoring/configmaps/"
                             "cluster-monitoring-config")


async def poke(kube: Kube, operator: OperatorThread, value: str) -> None:
    """A pass (what it reads here, the cluster monitoring config, starts none by itself)."""
    before = operator.passes
    await kube.merge_patch(ESM_PATH, {"metadata": {"labels": {"poke": value}}},
                           field_manager="integration-tests")
    await operator.wait_woken(before, "ExternalSecretsManager")


async def label_for_platform(kube: Kube, namespace: str, value: str | None) -> None:
    await kube.merge_patch(f"/api/v1/namespaces/{namespace}", {"metadata": {"labels": {
        "openshift.io/cluster-monitoring": value}}}, field_manager="integration-tests")


@pytest_asyncio.fixture(loop_scope="session")
async def openshift_monitoring(kube: Kube, crd_dir: Path) -> AsyncIterator[None]:
    """OpenShift as far as the note needs it: its config API served, the monitoring CRDs,
    the namespace openshift-monitoring without a cluster monitoring config (the default)."""
    await install_crds(kube, load_crds(crd_dir / "prometheus-operator"),
                       field_manager="prometheus-operator")
    await install_openshift_config(kube, crd_dir)
    await kube.apply("/api/v1/namespaces/openshift-monitoring", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "openshift-monitoring"}},
        field_manager="integration-tests")
    yield
    await set_feature(kube, False)
    await kube.delete(CLUSTER_MONITORING_CONFIG)
    for namespace in (NAMESPACE, OPERATOR_NAMESPACE):
        await label_for_platform(kube, namespace, None)
    await remove_openshift_config(kube, crd_dir)  # plain Kubernetes for the other tests
    await remove_monitoring_crds(kube)


@pytest.mark.usefixtures("user_objects", "openshift_monitoring")
async def test_the_esm_says_which_namespace_nothing_scrapes_on_openshift(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """User-workload monitoring is off by default: the objects the feature made are read by
    nobody until a namespace is labelled for platform monitoring or it is enabled."""
    await in_operator_namespace(kube, monkeypatch)
    await label_for_platform(kube, NAMESPACE, None)
    operator = await start_operator()
    await set_feature(kube, True)
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
    await wait_condition(esc, "Ready", "True", timeout=60)

    async def says(*unscraped: str) -> dict[str, str]:
        """The Ready line of the ESM's entry names them (the Event has the whole note)."""
        entry = await manager_entry(kube)
        assert entry["status"] == "True", entry  # nothing is broken
        assert entry["reason"] == "FeatureWithoutEffect", entry
        where = ", ".join(unscraped)
        assert entry["message"].startswith(
            "feature OperandMonitoring: nothing scrapes "
            f"namespace{'s' if len(unscraped) > 1 else ''} {where}: "), entry
        return entry

    both = (f"{NAMESPACE} (operand)", f"{OPERATOR_NAMESPACE} (operator)")
    await eventually(lambda: says(*both), timeout=20)
    events = await kube.list("/api/v1/namespaces/default/events",
                             field_selector="involvedObject.kind=ExternalSecretsManager")
    assert any("enableUserWorkload: true in config.yaml of ConfigMap "
               "openshift-monitoring/cluster-monitoring-config" in event.get("message", "")
               for event in events.get("items") or []), "the whole note, in an Event"

    # The operand namespace under platform monitoring: only the operator's is left.
    await label_for_platform(kube, NAMESPACE, "true")
    await poke(kube, operator, "1")
    await eventually(lambda: says(f"{OPERATOR_NAMESPACE} (operator)"), timeout=20)

    # User-workload monitoring on: every namespace is scraped, the note goes.
    await kube.apply(CLUSTER_MONITORING_CONFIG, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "cluster-monitoring-config", "namespace": "openshift-monitoring"},
        "data": {"config.yaml": "enableUserWorkload: true\n"}},
        field_manager="integration-tests")
    await poke(kube, operator, "2")

    async def observed() -> None:
        assert (await manager_entry(kube))["reason"] == "Observed"

    await eventually(observed, timeout=20)


@pytest.mark.parametrize("platform", [False, True], ids=["user-workload", "platform"])
async def test_policy_peers_select_the_scraping_namespace_on_the_api_server(
        kube: Kube, platform: bool) -> None:
    """The simulated cluster enforces no NetworkPolicy (no CNI), so this checks what a
    network plugin would match: the namespaceSelector of each metrics peer, evaluated by the
    API server against namespaces labelled as OpenShift labels them."""
    for name, labels in (("openshift-monitoring", {"openshift.io/cluster-monitoring": "true"}),
                         ("openshift-user-workload-monitoring", {}), ("apps", {})):
        await kube.apply(f"/api/v1/namespaces/{name}", {
            "apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": name, "labels": labels}}, field_manager="integration-tests")
    cfg = effective_config(ExternalSecretsConfigSpec.model_validate({}),
                           ExternalSecretsManagerSpec.model_validate({}),
                           OperatorEnvironment.from_environ({}, None))
    cfg = cfg.model_copy(update={"monitoring": cfg.monitoring.model_copy(
        update={"platform_scraped": platform})})
    expected = {"openshift-monitoring" if platform else "openshift-user-workload-monitoring"}
    for obj in render_operand(cfg).objects():
        if obj["kind"] != "NetworkPolicy":
            continue
        for rule in obj["spec"].get("ingress") or []:
            for peer in rule.get("from") or []:
                match = peer["namespaceSelector"]["matchLabels"]
                selector = ",".join(f"{key}={value}" for key, value in match.items())
                listing = await kube.list("/api/v1/namespaces", label_selector=selector)
                found = {item["metadata"]["name"] for item in listing.get("items") or []}
                assert found == expected, (obj["metadata"]["name"], selector)


# --- the webhook certificate's expiry, as the operator exports it ---------------------------

CERT_MANAGER_API = "/apis/cert-manager.io/v1"
WEBHOOK_CERTIFICATE_PATH = (f"{CERT_MANAGER_API}/namespaces/{NAMESPACE}/certificates/"
                            f"{WEBHOOK_CERTIFICATE}")
EXPIRY = "eso_operator_webhook_certificate_expiration_timestamp_seconds"


def certificate_series(name: str) -> float | None:
    """The operator's series `name` for the webhook Certificate of NAMESPACE (the operator runs
    in this process: its registry is this process's)."""
    return REGISTRY.get_sample_value(name, {"certificate_namespace": NAMESPACE})


@pytest_asyncio.fixture(loop_scope="session")
async def issuer(kube: Kube, crd_dir: Path, cert_manager: CertManager) -> AsyncIterator[None]:
    """cert-manager running, with a selfSigned Issuer in the operand namespace; afterwards its
    CRDs (and so its objects) and the Secret it issued are removed."""
    await install_crds(kube, load_crds(crd_dir / "cert-manager"), field_manager="cert-manager")
    cert_manager.start()
    try:
        await kube.apply(f"{CERT_MANAGER_API}/namespaces/{NAMESPACE}/issuers/eso-issuer", {
            "apiVersion": "cert-manager.io/v1", "kind": "Issuer",
            "metadata": {"name": "eso-issuer", "namespace": NAMESPACE},
            "spec": {"selfSigned": {}}}, field_manager="integration-tests")
        yield
    finally:
        await remove_cert_manager_crds(kube)
        cert_manager.stop()
        await kube.delete(f"/api/v1/namespaces/{NAMESPACE}/secrets/{WEBHOOK_SECRET_CERT_MANAGER}")


@pytest.mark.usefixtures("user_objects", "issuer")
async def test_the_leader_exports_the_webhook_certificates_expiry(
        kube: Kube, esc: EscHandle, start_operator: StartOperator) -> None:
    """cert-manager issues the webhook Certificate; the operator's pass reads its
    status.notAfter and exports it (the series the operator's expiry alert reads, scraped in
    the operator's namespace under either labelling); the ESC deleted, the series goes."""
    await start_operator()
    await esc.create({"controllerConfig": {"namespace": NAMESPACE}, "appConfig": {
        "certManagerConfig": {"enabled": "true",
                              "issuerRef": {"name": "eso-issuer", "kind": "Issuer"}}}})

    async def exported() -> None:
        certificate = await kube.get(WEBHOOK_CERTIFICATE_PATH)
        assert certificate is not None
        not_after = (certificate.get("status") or {}).get("notAfter")
        assert not_after, "not issued yet"
        expected = datetime.fromisoformat(not_after).timestamp()
        assert certificate_series(EXPIRY) == expected
        assert certificate_series("eso_operator_webhook_certificate_ready") == 1

    await eventually(exported, timeout=60)
    assert certificate_series(EXPIRY) > time.time() + 7 * 86400  # the alert stays quiet

    await kube.delete(ESC_PATH)

    async def gone() -> None:
        assert certificate_series(EXPIRY) is None
        assert certificate_series("eso_operator_webhook_certificate_ready") is None

    await eventually(gone, timeout=30)
