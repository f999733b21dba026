"""Administrator knobs (issue 15) on the real API server: the webhook scaled to 3 and back
(PodDisruptionBudget created, then pruned), a private CA ConfigMap mounted then removed, an
annotation added to every object then removed."""

from __future__ import annotations

from typing import Any

from manager.client.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import (
    SCENARIO_NAMESPACES,
    EscHandle,
    StartOperator,
    UserObjects,
    eventually,
    managed_objects,
    wait_condition,
)
from tests.integration.test_controller_install import install

NAMESPACE = SCENARIO_NAMESPACES["knobs"]
BASE: dict[str, Any] = {"controllerConfig": {"namespace": NAMESPACE}}
# The reconfigure budget is 2 s on the local control plane; the checks allow for a loaded CI.
RECONFIGURE = 20.0


def _deployment_path(name: str) -> str:
    return f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{name}"


def _pdb_path(name: str) -> str:
    return f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/{name}"


def _webhook_replicas(replicas: int) -> dict[str, Any]:
    return {"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", "deploymentConfigs": {"replicas": replicas}}]}}


async def test_webhook_scaled_to_three_and_back(kube: Kube, esc: EscHandle,
                                                start_operator: StartOperator,
                                                user_objects: UserObjects) -> None:
    await install(start_operator, esc, BASE)
    assert await kube.get(_pdb_path("external-secrets-webhook")) is None

    await esc.patch_spec(_webhook_replicas(3))

    async def scaled() -> None:
        deployment = await kube.get(_deployment_path("external-secrets-webhook"))
        assert deployment is not None
        assert deployment["spec"]["replicas"] == 3
        spread = deployment["spec"]["template"]["spec"].get("topologySpreadConstraints") or []
        assert spread, "no topology spread yet"
        assert spread[0]["topologyKey"] == "kubernetes.io/hostname"
        assert spread[0]["whenUnsatisfiable"] == "ScheduleAnyway"
        budget = await kube.get(_pdb_path("external-secrets-webhook"))
        assert budget is not None
        assert budget["spec"]["maxUnavailable"] == 1
        assert budget["spec"]["selector"]["matchLabels"] == (
            deployment["spec"]["selector"]["matchLabels"])

    await eventually(scaled, RECONFIGURE)
    # only the webhook: the controller stays at one replica, without a budget
    controller = await kube.get(_deployment_path("external-secrets"))
    assert controller is not None
    assert controller["spec"]["replicas"] == 1
    assert await kube.get(_pdb_path("external-secrets")) is None

    await esc.patch_spec(_webhook_replicas(1))

    async def back() -> None:
        deployment = await kube.get(_deployment_path("external-secrets-webhook"))
        assert deployment is not None
        assert deployment["spec"]["replicas"] == 1
        assert "topologySpreadConstraints" not in deployment["spec"]["template"]["spec"]
        assert await kube.get(_pdb_path("external-secrets-webhook")) is None

    await eventually(back, RECONFIGURE)


def _controller_cert_dirs(cluster: Cluster) -> list[str | None]:
    """SSL_CERT_DIR of every running controller process (simulated cluster only)."""
    assert cluster.simulated is not None
    return [process.env.get("SSL_CERT_DIR")
            for process in cluster.simulated.processes(NAMESPACE, "external-secrets")]


async def test_private_ca_mounted_then_removed(kube: Kube, esc: EscHandle,
                                               start_operator: StartOperator,
                                               user_objects: UserObjects,
                                               cluster: Cluster) -> None:
    await install(start_operator, esc, BASE)
    # Named before it exists: Degraded, naming the field, and nothing changes.
    await esc.patch_spec({"appConfig": {"trustedCABundle": {"configMapName": "private-ca",
                                                            "key": "vault.pem"}}})
    degraded = await wait_condition(esc, "Degraded", "True", reason="TrustedCABundleNotFound")
    assert "spec.appConfig.trustedCABundle.configMapName" in degraded["message"]
    controller = await kube.get(_deployment_path("external-secrets"))
    assert controller is not None
    assert "trusted-ca-user" not in str(controller["spec"]["template"])

    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}/configmaps/private-ca", {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "private-ca", "namespace": NAMESPACE},
        "data": {"vault.pem": "-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n"},
    }, field_manager="integration-tests")

    async def mounted() -> None:
        deployment = await kube.get(_deployment_path("external-secrets"))
        assert deployment is not None
        pod = deployment["spec"]["template"]["spec"]
        volumes = {v["name"]: v for v in pod.get("volumes") or []}
        assert "trusted-ca-user" in volumes, volumes
        assert volumes["trusted-ca-user"]["configMap"] == {
            "name": "private-ca", "items": [{"key": "vault.pem", "path": "ca-bundle.crt"}],
            "defaultMode": 420}
        container = pod["containers"][0]
        assert {"name": "trusted-ca-user", "mountPath": "/etc/external-secrets/trusted-ca",
                "readOnly": True} in container["volumeMounts"]
        env = {e["name"]: e.get("value") for e in container.get("env") or []}
        assert env.get("SSL_CERT_DIR") == (
            "/etc/ssl/certs:/etc/pki/tls/certs:/etc/external-secrets/trusted-ca")
        webhook = await kube.get(_deployment_path("external-secrets-webhook"))
        assert webhook is not None
        assert "trusted-ca-user" not in str(webhook["spec"]["template"])

    await eventually(mounted, RECONFIGURE)
    if cluster.simulated is not None:  # the operand process itself reads the variable
        async def process_reads_it() -> None:
            assert "/etc/ssl/certs:/etc/pki/tls/certs:/etc/external-secrets/trusted-ca" in (
                _controller_cert_dirs(cluster))

        await eventually(process_reads_it, 60)

    await esc.patch_spec({"appConfig": {"trustedCABundle": None}})

    async def removed() -> None:
        deployment = await kube.get(_deployment_path("external-secrets"))
        assert deployment is not None
        template = deployment["spec"]["template"]
        assert "trusted-ca-user" not in str(template)
        assert "SSL_CERT_DIR" not in str(template)

    await eventually(removed, RECONFIGURE)
    if cluster.simulated is not None:
        async def process_without_it() -> None:
            dirs = _controller_cert_dirs(cluster)
            assert dirs
            assert set(dirs) == {None}, dirs

        await eventually(process_without_it, 60)


async def test_annotation_added_then_removed_from_every_object(
        kube: Kube, esc: EscHandle, start_operator: StartOperator,
        user_objects: UserObjects) -> None:
    await install(start_operator, esc, BASE)
    key = "example.com/knobs-test"

    await esc.patch_spec({"controllerConfig": {"annotations": {key: "on"}}})

    async def everywhere() -> int:
        found = await managed_objects(kube, NAMESPACE)
        objects = {k: o for k, o in found.items() if k[0] != "Namespace"}
        assert objects
        missing = [k for k, o in objects.items()
                   if (o["metadata"].get("annotations") or {}).get(key) != "on"]
        assert not missing, missing
        for k, obj in objects.items():
            if k[0] == "Deployment":
                annotations = obj["spec"]["template"]["metadata"].get("annotations") or {}
                assert annotations.get(key) == "on", k
        return len(objects)

    count = await eventually(everywhere, RECONFIGURE)
    assert count >= 20

    await esc.patch_spec({"controllerConfig": {"annotations": None}})

    async def nowhere() -> None:
        found = await managed_objects(kube, NAMESPACE)
        left = [k for k, o in found.items()
                if key in (o["metadata"].get("annotations") or {})
                or (k[0] == "Deployment"
                    and key in (o["spec"]["template"]["metadata"].get("annotations") or {}))]
        assert not left, left

    await eventually(nowhere, RECONFIGURE)


async def test_replicas_left_to_kubectl_scale_when_asked(kube: Kube, esc: EscHandle,
                                                         start_operator: StartOperator,
                                                         user_objects: UserObjects) -> None:
    await install(start_operator, esc, BASE)
    path = _deployment_path("external-secrets-webhook")

    async def scale(replicas: int) -> None:
        await kube.merge_patch(f"{path}/scale", {"spec": {"replicas": replicas}},
                               field_manager="kubectl")

    async def replicas_are(replicas: int) -> None:
        deployment = await kube.get(path)
        assert deployment is not None
        assert deployment["spec"]["replicas"] == replicas

    # By default the operator owns replicas: a kubectl scale is drift, and is repaired.
    await scale(2)
    await eventually(lambda: replicas_are(1), RECONFIGURE)

    await esc.patch_spec({"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", "deploymentConfigs": {"manageReplicas": "false"}}]}})

    async def released() -> None:
        deployment = await kube.get(path)
        assert deployment is not None
        ours = [entry for entry in deployment["metadata"]["managedFields"]
                if entry["manager"] == "external-secrets-operator"
                and entry["operation"] == "Apply"]
        assert ours
        assert "f:replicas" not in ours[0]["fieldsV1"]["f:spec"]

    await eventually(released, RECONFIGURE)
    await scale(2)
    # Another pass re-applies every object (a new annotation): replicas stay as scaled.
    await esc.patch_spec({"controllerConfig": {"annotations": {"example.com/pass": "2"}}})

    async def annotated_and_still_scaled() -> None:
        deployment = await kube.get(path)
        assert deployment is not None
        assert (deployment["metadata"].get("annotations") or {}).get("example.com/pass") == "2"
        assert deployment["spec"]["replicas"] == 2

    await eventually(annotated_and_still_scaled, RECONFIGURE)


async def test_a_rotated_then_deleted_ca(kube: Kube, esc: EscHandle,
                                        start_operator: StartOperator,
                                        user_objects: UserObjects) -> None:
    """The trustedCABundle ConfigMap rotated while the stack runs: the controller (which reads
    it once, at start) rolls, the webhook does not. Then deleted: the controller's
    Deployment is held back as it is, and Degraded says so; everything else is still
    repaired: a deleted webhook Deployment comes back."""
    configmap = f"/api/v1/namespaces/{NAMESPACE}/configmaps/private-ca"

    async def put_ca(pem: str) -> None:
        await kube.apply(configmap, {
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "private-ca", "namespace": NAMESPACE},
            "data": {"ca.pem": pem}}, field_manager="integration-tests")

    await put_ca("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n")
    await install(start_operator, esc, {**BASE, "appConfig": {"trustedCABundle": {
        "configMapName": "private-ca", "key": "ca.pem"}}})
    first = await kube.get(_deployment_path("external-secrets"))
    webhook = await kube.get(_deployment_path("external-secrets-webhook"))
    assert first is not None
    assert webhook is not None

    await put_ca("-----BEGIN CERTIFICATE-----\nrotated\n-----END CERTIFICATE-----\n")

    async def rolled() -> dict[str, Any]:
        found = await kube.get(_deployment_path("external-secrets"))
        assert found is not None
        assert found["metadata"]["generation"] > first["metadata"]["generation"]
        return found

    controller = await eventually(rolled, RECONFIGURE)
    annotation = "operator.openshift.io/loaded-content-hash"
    assert (controller["spec"]["template"]["metadata"]["annotations"][annotation]
            != first["spec"]["template"]["metadata"]["annotations"][annotation])
    await wait_condition(esc, "Ready", "True", timeout=90)
    still = await kube.get(_deployment_path("external-secrets-webhook"))
    assert still is not None
    assert still["metadata"]["generation"] == webhook["metadata"]["generation"]

    await kube.delete(configmap)
    degraded = await wait_condition(esc, "Degraded", "True", reason="TrustedCABundleNotFound")
    assert "spec.appConfig.trustedCABundle.configMapName" in degraded["message"]
    assert (f"Held back until then: Deployment {NAMESPACE}/external-secrets; everything else "
            "is applied") in await esc.failure_message()
    assert (await esc.get())["status"]["failure"]["object"] == f"ConfigMap {NAMESPACE}/private-ca"

    await kube.delete(_deployment_path("external-secrets-webhook"))

    async def webhook_back() -> None:
        found = await kube.get(_deployment_path("external-secrets-webhook"))
        assert found is not None, "the webhook Deployment was not re-created"
        assert found["metadata"]["uid"] != webhook["metadata"]["uid"]

    await eventually(webhook_back, RECONFIGURE)
    # The held Deployment was left as it was: still mounting the ConfigMap.
    held = await kube.get(_deployment_path("external-secrets"))
    assert held is not None
    assert held["metadata"]["generation"] == controller["metadata"]["generation"]
    assert "private-ca" in str(held["spec"]["template"]["spec"]["volumes"])
    condition = await esc.condition("Degraded")
    assert condition is not None
    assert condition["reason"] == "TrustedCABundleNotFound"


def _env(deployment: dict[str, Any]) -> dict[str, str | None]:
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value") for e in container.get("env") or []}


async def test_a_proxy_reaches_only_the_controller_and_never_in_cluster_traffic(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, user_objects: UserObjects,
        cluster: Cluster) -> None:
    """NO_PROXY carries the administrator's entries, then the `kubernetes` Service's real
    ClusterIP and the in-cluster names; the webhook and the cert-controller, which only call
    the API server, get no proxy at all."""
    proxy = {"httpProxy": "http://proxy.invalid:3128", "httpsProxy": "http://proxy.invalid:3128",
             "noProxy": "vault.corp,.svc"}
    await install(start_operator, esc, {**BASE, "appConfig": {"proxy": proxy}})
    service = await kube.get("/api/v1/namespaces/default/services/kubernetes")
    assert service is not None
    addresses = service["spec"].get("clusterIPs") or [service["spec"]["clusterIP"]]
    expected = ",".join(["vault.corp", ".svc", *addresses, "kubernetes.default.svc",
                         ".cluster.local", "localhost", "127.0.0.1"])

    controller = await kube.get(_deployment_path("external-secrets"))
    assert controller is not None
    env = _env(controller)
    assert env["NO_PROXY"] == env["no_proxy"] == expected
    assert env["HTTPS_PROXY"] == env["HTTP_PROXY"] == "http://proxy.invalid:3128"
    for name in ("external-secrets-webhook", "external-secrets-cert-controller"):
        deployment = await kube.get(_deployment_path(name))
        assert deployment is not None
        assert not {"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"} & set(
            _env(deployment)), name
        assert "trusted-ca-bundle" not in str(deployment["spec"]["template"]), name

    if cluster.simulated is not None:  # what the running processes were given
        simulated = cluster.simulated

        async def processes_have_it() -> None:
            controllers = simulated.processes(NAMESPACE, "external-secrets")
            webhooks = simulated.processes(NAMESPACE, "webhook")
            assert controllers
            assert webhooks
            assert {p.env.get("NO_PROXY") for p in controllers} == {expected}
            assert all("HTTPS_PROXY" not in p.env and "HTTP_PROXY" not in p.env
                       for p in webhooks)

        await eventually(processes_have_it, 60)
