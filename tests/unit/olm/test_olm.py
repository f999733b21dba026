"""Pure parts of the OLM packaging: RBAC to CSV permissions, names, YAML output."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from manager import versions
from manager.olm import bundle, descriptors, identity, operator_manifests, rbac, yamlfile
from manager.olm.csv import cluster_service_version
from manager.paths import REPO_ROOT

SA = identity.SERVICE_ACCOUNT


def _role(kind: str, name: str, *resources: str, namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
            "rules": [{"verbs": ["get", "list"], "apiGroups": [""], "resources": list(resources)}]}


def _binding(kind: str, name: str, role_kind: str, role: str, *, subject: str = SA,
             namespace: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind, "metadata": metadata,
            "roleRef": {"apiGroup": rbac.RBAC_GROUP, "kind": role_kind, "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": subject,
                          "namespace": identity.NAMESPACE}]}


def test_bindings_decide_cluster_and_namespace_permissions() -> None:
    objects = [
        _role("ClusterRole", "operator", "secrets"),
        _binding("ClusterRoleBinding", "operator", "ClusterRole", "operator"),
        _role("Role", "events", "events", namespace=identity.NAMESPACE),
        _binding("RoleBinding", "events", "Role", "events", namespace=identity.NAMESPACE),
        _role("ClusterRole", "users-view", "configmaps"),
    ]
    permissions = rbac.from_objects(objects, SA)
    assert permissions.cluster_rules == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]
    assert permissions.namespace_rules == [
        {"apiGroups": [""], "resources": ["events"], "verbs": ["get", "list"]}]
    # A ClusterRole nobody grants to the operator ships as an object of its own.
    assert [role["metadata"]["name"] for role in permissions.other_objects] == ["users-view"]


def test_bindings_of_other_subjects_grant_nothing() -> None:
    objects = [_role("ClusterRole", "operator", "secrets"),
               _binding("ClusterRoleBinding", "operator", "ClusterRole", "operator",
                        subject="someone-else")]
    with pytest.raises(rbac.RbacError, match="no binding grants"):
        rbac.from_objects(objects, SA)


def test_binding_to_an_undefined_role_is_an_error() -> None:
    objects = [_binding("ClusterRoleBinding", "operator", "ClusterRole", "missing")]
    with pytest.raises(rbac.RbacError, match="does not define"):
        rbac.from_objects(objects, SA)


def test_role_binding_outside_the_operator_namespace_is_rejected() -> None:
    objects = [_role("Role", "leases", "leases", namespace="elsewhere"),
               _binding("RoleBinding", "leases", "Role", "leases", namespace="elsewhere")]
    with pytest.raises(rbac.RbacError, match="only in the operator's namespace"):
        rbac.from_objects(objects, SA)


def test_missing_rbac_file_names_the_file(tmp_path: Path) -> None:
    with pytest.raises(rbac.RbacError, match=r"rbac\.yaml does not exist"):
        rbac.load(tmp_path / "rbac.yaml")


def test_duplicate_rules_are_listed_once() -> None:
    objects = [_role("ClusterRole", "a", "secrets"), _role("ClusterRole", "b", "secrets"),
               _binding("ClusterRoleBinding", "a", "ClusterRole", "a"),
               _binding("ClusterRoleBinding", "b", "ClusterRole", "b")]
    assert len(rbac.from_objects(objects, SA).cluster_rules) == 1


@pytest.mark.parametrize(("kind", "expected"), [
    ("ACRAccessToken", "ACR Access Token"),
    ("SSHKey", "SSH Key"),
    ("MFA", "MFA"),
    ("ExternalSecret", "External Secret"),
    ("STSSessionToken", "STS Session Token"),
])
def test_display_names_split_kinds_into_words(kind: str, expected: str) -> None:
    assert descriptors.display_name(kind) == expected


def test_unknown_operand_kind_falls_back_to_its_schema_description() -> None:
    owned = descriptors.operand_kind("NewThing", "NewThing makes things. It is new.", "g.io")
    assert owned.description == "NewThing makes things."
    assert owned.display_name == "New Thing"


def test_deployment_environment_carries_the_pins() -> None:
    env = {item["name"]: item.get("value") for item in operator_manifests.environment()}
    assert env["RELATED_IMAGE_EXTERNAL_SECRETS"] == versions.EXTERNAL_SECRETS_IMAGE
    assert env["RELATED_IMAGE_BITWARDEN_SDK_SERVER"] == versions.BITWARDEN_SDK_SERVER_IMAGE
    assert env["OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION"] == versions.EXTERNAL_SECRETS_VERSION
    assert env["BITWARDEN_SDK_SERVER_IMAGE_VERSION"] == versions.BITWARDEN_SDK_SERVER_VERSION
    assert env["OPERATOR_IMAGE_VERSION"] == identity.OPERATOR_VERSION
    assert env["POD_NAMESPACE"] is None  # from the downward API, not a literal


def test_deployment_probes_hit_the_port_kopf_serves() -> None:
    container = operator_manifests.deployment("img")["spec"]["template"]["spec"]["containers"][0]
    liveness = next(arg for arg in container["args"] if arg.startswith("--liveness="))
    assert liveness.endswith(f":{identity.HEALTH_PORT}{identity.HEALTH_PATH}")
    port = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"]["path"] == identity.HEALTH_PATH
        assert port[container[probe]["httpGet"]["port"]] == identity.HEALTH_PORT


def test_the_operator_pod_pins_the_scc_its_security_context_is_written_for() -> None:
    template = operator_manifests.deployment("img")["spec"]["template"]
    assert template["metadata"]["annotations"]["openshift.io/required-scc"] == "restricted-v2"
    assert template["spec"]["securityContext"]["runAsNonRoot"] is True


def test_dockerfile_labels_repeat_the_bundle_annotations() -> None:
    dockerfile = bundle.bundle_dockerfile()
    for key, value in bundle.bundle_annotations().items():
        assert f"LABEL {key}={value}\n" in dockerfile
    assert identity.DEFAULT_CHANNEL in identity.CHANNELS


def test_yaml_output_round_trips_and_keeps_multiline_text_as_blocks() -> None:
    document = {"b": 1, "a": ["x", {"text": "line one\nline two\n"}], "empty": {}}
    text = yamlfile.dump(document, "header line")
    assert text.startswith("# header line\n")
    assert "text: |" in text
    assert yamlfile.load(text) == document
    assert list(yamlfile.load(text)) == ["b", "a", "empty"]  # insertion order, not sorted


def test_cluster_role_bindings_of_other_subjects_ship_as_objects() -> None:
    objects = [_role("ClusterRole", "operator", "secrets"),
               _binding("ClusterRoleBinding", "operator", "ClusterRole", "operator"),
               _role("ClusterRole", "reader", "pods"),
               _binding("ClusterRoleBinding", "reader", "ClusterRole", "reader",
                        subject="prometheus")]
    permissions = rbac.from_objects(objects, SA)
    assert [(o["kind"], o["metadata"]["name"]) for o in permissions.other_objects] == [
        ("ClusterRole", "reader"), ("ClusterRoleBinding", "reader")]
    assert permissions.cluster_rules == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]


def test_the_monitoring_stack_may_read_metrics_and_the_operator_may_review_tokens() -> None:
    permissions = rbac.load(Path(bundle.RBAC_FILE))
    shipped = {(o["kind"], o["metadata"]["name"]): o for o in permissions.other_objects}
    reader = "external-secrets-operator-metrics-reader"
    assert shipped["ClusterRole", reader]["rules"] == [
        {"nonResourceURLs": ["/metrics"], "verbs": ["get"]}]
    namespace, name = identity.PROMETHEUS_SERVICE_ACCOUNT
    assert shipped["ClusterRoleBinding", reader]["subjects"] == [
        {"kind": "ServiceAccount", "name": name, "namespace": namespace},
        {"kind": "ServiceAccount", "name": identity.METRICS_SCRAPER,
         "namespace": identity.NAMESPACE}]
    for group, resource in (("authentication.k8s.io", "tokenreviews"),
                            ("authorization.k8s.io", "subjectaccessreviews")):
        assert {"apiGroups": [group], "resources": [resource], "verbs": ["create"]} \
            in permissions.cluster_rules


def test_metrics_certificate_secret_is_requested_mounted_optional_and_named_by_the_flags() -> None:
    service = operator_manifests.metrics_service()
    secret = service["metadata"]["annotations"][identity.SERVING_CERT_ANNOTATION]
    pod = operator_manifests.deployment("img")["spec"]["template"]["spec"]
    [volume] = [v for v in pod["volumes"] if "secret" in v]
    assert volume["secret"] == {"secretName": secret, "optional": True}
    container = pod["containers"][0]
    [mount] = [m for m in container["volumeMounts"] if m["name"] == volume["name"]]
    assert "--metrics-secure" in container["args"]
    assert f"--metrics-cert-file={mount['mountPath']}/tls.crt" in container["args"]
    assert f"--metrics-key-file={mount['mountPath']}/tls.key" in container["args"]
    [endpoint] = operator_manifests.service_monitor()["spec"]["endpoints"]
    assert endpoint["scheme"] == "https"
    assert endpoint["tlsConfig"]["serverName"].startswith(f"{service['metadata']['name']}.")


def test_the_operator_service_monitor_reads_no_file_of_the_prometheus_container() -> None:
    """User-workload monitoring refuses ServiceMonitors that name files (bearerTokenFile,
    tlsConfig caFile/certFile/keyFile): the token and the CA come from objects the bundle
    ships, and the token's ServiceAccount may read /metrics."""
    [endpoint] = operator_manifests.service_monitor()["spec"]["endpoints"]
    files = {"bearerTokenFile", "caFile", "certFile", "keyFile"}
    assert not files & (endpoint.keys() | endpoint["tlsConfig"].keys())
    credentials = endpoint["authorization"]["credentials"]
    token = operator_manifests.scraper_token()
    assert credentials == {"name": token["metadata"]["name"], "key": "token"}
    assert token["type"] == "kubernetes.io/service-account-token"
    scraper = token["metadata"]["annotations"]["kubernetes.io/service-account.name"]
    assert scraper == operator_manifests.scraper_service_account()["metadata"]["name"]
    ca = endpoint["tlsConfig"]["ca"]["configMap"]
    configmap = operator_manifests.metrics_ca()
    assert ca == {"name": configmap["metadata"]["name"], "key": identity.SERVICE_CA_KEY}
    assert configmap["metadata"]["annotations"] == {identity.INJECT_CA_ANNOTATION: "true"}
    objects = yamlfile.load_all(Path("manifests/operator/rbac.yaml").read_text())
    [binding] = [o for o in objects if o["kind"] == "ClusterRoleBinding"
                 and o["roleRef"]["name"] == "external-secrets-operator-metrics-reader"]
    assert {"kind": "ServiceAccount", "name": scraper, "namespace": identity.NAMESPACE} \
        in binding["subjects"]


MUST_GATHER_IMAGE = "operators.openshift.io/must-gather-image"


def test_the_csv_names_the_operator_image_as_its_must_gather_image() -> None:
    """`oc adm must-gather --all-images` runs /usr/bin/gather of the image the CSV names: the
    operator image, which installs hack/gather there; by digest when the bundle is (mirrored
    bundles rewrite both annotations alike)."""
    image = "registry.example/eso/operator@sha256:" + "a" * 64
    csv = cluster_service_version(
        deployment={"metadata": {"name": "op", "labels": {}}, "spec": {}},
        permissions=rbac.OperatorPermissions([], []), owned=[], image=image)
    annotations = csv["metadata"]["annotations"]
    assert annotations[MUST_GATHER_IMAGE] == annotations["containerImage"] == image
    assert "COPY --chown=0:0 --chmod=0755 hack/gather /usr/bin/gather\n" in (
        REPO_ROOT / "Dockerfile").read_text()


def test_the_committed_csv_carries_must_gather_and_cluster_monitoring() -> None:
    """`make bundle` has been run: the committed CSV has both annotations."""
    committed = yamlfile.load((REPO_ROOT / "bundle/manifests" /
                               f"{identity.PACKAGE}.clusterserviceversion.yaml").read_text())
    annotations = committed["metadata"]["annotations"]
    assert annotations[MUST_GATHER_IMAGE] == annotations["containerImage"] == (
        identity.OPERATOR_IMAGE)
    assert annotations["operatorframework.io/cluster-monitoring"] == "true"
