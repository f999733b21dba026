"""The operator's own Namespace, ServiceAccount and Deployment.

Images and versions come from manager/versions.py and the package version, so the one pin
there reaches the Deployment's environment, the CSV's relatedImages and the operand labels;
a published bundle gives the operand images it was built with instead (`related_images`).
"""

from __future__ import annotations

from typing import Any

from manager import versions
from manager.api.patterns import REQUIRED_SCC_ANNOTATION, RESTRICTED_SCC
from manager.olm import identity
from manager.olm.identity import RelatedImages

# Pod Security admission: the operator's namespace admits only restricted pods.
_POD_SECURITY = {
    f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "audit", "warn")
}


def common_labels() -> dict[str, str]:
    return {
        "app": identity.APP_LABEL,
        "app.kubernetes.io/name": identity.APP_LABEL,
        "app.kubernetes.io/part-of": identity.PACKAGE,
        "app.kubernetes.io/version": identity.OPERATOR_VERSION,
    }


def namespace() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": identity.NAMESPACE, "labels": {**common_labels(), **_POD_SECURITY}},
    }


def service_account() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": identity.SERVICE_ACCOUNT, "namespace": identity.NAMESPACE,
                     "labels": common_labels()},
    }


def environment(related_images: RelatedImages = identity.RELATED_IMAGES,
                ) -> list[dict[str, Any]]:
    """What the operator reads at start-up (manager.config.OperatorEnvironment): each of
    `related_images` (name, reference) as RELATED_IMAGE_<NAME>, the versions, the pod.

    OLM adds HTTP_PROXY, HTTPS_PROXY and NO_PROXY on proxied clusters.
    """
    plain = {
        **{identity.related_image_variable(name): image for name, image in related_images},
        "OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION": versions.EXTERNAL_SECRETS_VERSION,
        "BITWARDEN_SDK_SERVER_IMAGE_VERSION": versions.BITWARDEN_SDK_SERVER_VERSION,
        "OPERATOR_IMAGE_VERSION": identity.OPERATOR_VERSION,
    }
    env: list[dict[str, Any]] = [{"name": name, "value": value} for name, value in plain.items()]
    env.append({"name": "POD_NAMESPACE",
                "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}})
    # The leader-election identity (with a random suffix) and the Events' reportingInstance.
    env.append({"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    return env


def _probe(initial_delay: int, period: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": identity.HEALTH_PATH, "port": "health"},
        "initialDelaySeconds": initial_delay,
        "periodSeconds": period,
        "timeoutSeconds": 5,
        "failureThreshold": 3,
    }


def _container(image: str, related_images: RelatedImages) -> dict[str, Any]:
    return {
        "name": identity.CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        # The image's entrypoint is `python -m manager`.
        "args": ["run", f"--liveness=http://0.0.0.0:{identity.HEALTH_PORT}{identity.HEALTH_PATH}",
                 f"--metrics-addr=:{identity.METRICS_PORT}",
                 # HTTPS to allowed bearer tokens, with the certificate of the Secret below.
                 "--metrics-secure",
                 f"--metrics-cert-file={identity.METRICS_TLS_DIR}/tls.crt",
                 f"--metrics-key-file={identity.METRICS_TLS_DIR}/tls.key",
                 # One operator reconciles at a time, even while two pods overlap
                 # (docs/operations.md, "Leader election"); default timings.
                 "--leader-elect"],
        "env": environment(related_images),
        "ports": [{"name": "health", "containerPort": identity.HEALTH_PORT, "protocol": "TCP"},
                  {"name": "metrics", "containerPort": identity.METRICS_PORT,
                   "protocol": "TCP"}],
        "livenessProbe": _probe(initial_delay=15, period=20),
        "readinessProbe": _probe(initial_delay=5, period=10),
        "resources": {
            "requests": {"cpu": "50m", "memory": "128Mi"},
            "limits": {"cpu": "500m", "memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        # The root filesystem is read-only; Python and aiohttp may still want a scratch dir.
        "volumeMounts": [{"name": "tmp", "mountPath": "/tmp"},  # noqa: S108
                         {"name": "metrics-tls", "mountPath": identity.METRICS_TLS_DIR,
                          "readOnly": True}],
    }


def deployment(image: str = identity.OPERATOR_IMAGE,
               related_images: RelatedImages = identity.RELATED_IMAGES) -> dict[str, Any]:
    """One replica, replaced (not rolled). Leader election already keeps two operators from
    reconciling at once; Recreate also spares the new pod a wait of up to the lease duration
    for a Lease the old one holds (docs/olm.md, "Operator Deployment strategy")."""
    selector = {"app": identity.APP_LABEL}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": identity.DEPLOYMENT, "namespace": identity.NAMESPACE,
                     "labels": common_labels()},
        "spec": {
            "replicas": 1,
            "strategy": {"type": "Recreate"},
            "revisionHistoryLimit": 5,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {
                    "labels": common_labels(),
                    "annotations": {"kubectl.kubernetes.io/default-container": identity.CONTAINER,
                                    # the SCC its restricted securityContext is written for
                                    REQUIRED_SCC_ANNOTATION: RESTRICTED_SCC},
                },
                "spec": {
                    "serviceAccountName": identity.SERVICE_ACCOUNT,
                    # No run-as UID: OpenShift's restricted SCC assigns one; the image's USER
                    # is numeric, so runAsNonRoot can be verified anywhere.
                    "securityContext": {"runAsNonRoot": True,
                                        "seccompProfile": {"type": "RuntimeDefault"}},
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "terminationGracePeriodSeconds": 30,
                    "containers": [_container(image, related_images)],
                    "volumes": [
                        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
                        # Optional: without OpenShift's service CA nobody writes it, and the
                        # operator serves a self-signed certificate until it appears.
                        {"name": "metrics-tls", "secret": {
                            "secretName": identity.METRICS_TLS_SECRET, "optional": True}},
                    ],
                },
            },
        },
    }


def _metadata(name: str, *, namespaced: bool) -> dict[str, Any]:
    """In the bundle OLM sets the namespace (the one the operator is installed into)."""
    metadata: dict[str, Any] = {"name": name, "labels": common_labels()}
    if namespaced:
        metadata["namespace"] = identity.NAMESPACE
    return metadata


def metrics_service(*, namespaced: bool = True) -> dict[str, Any]:
    """The operator's /metrics (manager.metrics), for the ServiceMonitor below. On OpenShift
    the annotation has the service CA write the serving certificate into the Secret the
    Deployment mounts (and renew it there)."""
    metadata = _metadata(identity.METRICS_SERVICE, namespaced=namespaced)
    metadata["annotations"] = {identity.SERVING_CERT_ANNOTATION: identity.METRICS_TLS_SECRET}
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {
            "type": "ClusterIP",
            "selector": {"app": identity.APP_LABEL},
            "ports": [{"name": "metrics", "port": identity.METRICS_PORT,
                       "targetPort": "metrics", "protocol": "TCP"}],
        },
    }


def scraper_service_account(*, namespaced: bool = True) -> dict[str, Any]:
    """Whose token the operator's ServiceMonitor sends (bound to the metrics reader role)."""
    return {"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": _metadata(identity.METRICS_SCRAPER, namespaced=namespaced)}


def scraper_token(*, namespaced: bool = True) -> dict[str, Any]:
    """The scraper's token, which the token controller writes into this Secret: a
    ServiceMonitor can take a token only from a Secret on user-workload monitoring."""
    metadata = _metadata(identity.METRICS_SCRAPER_TOKEN, namespaced=namespaced)
    metadata["annotations"] = {"kubernetes.io/service-account.name": identity.METRICS_SCRAPER}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": metadata,
            "type": "kubernetes.io/service-account-token"}


def metrics_ca(*, namespaced: bool = True) -> dict[str, Any]:
    """The CA that signed the metrics certificate: OpenShift's service CA writes its bundle
    here (key service-ca.crt); elsewhere put the CA of your certificate there."""
    metadata = _metadata(identity.METRICS_CA_CONFIGMAP, namespaced=namespaced)
    metadata["annotations"] = {identity.INJECT_CA_ANNOTATION: "true"}
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata}


def run_time_labels() -> dict[str, str]:
    """The operator's labels, without the operand's managed-by label: the operand's watches,
    pruning and uninstall never see these objects (their owner is the field manager)."""
    return {**common_labels(), "app.kubernetes.io/component": "metrics"}


def service_monitor(namespace: str = identity.NAMESPACE) -> dict[str, Any]:
    """Prometheus scrapes the operator through its Service over HTTPS, with the scraper's
    token and the CA of the ConfigMap above, both read from objects (manager.metrics)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {"name": identity.METRICS_SERVICE, "namespace": namespace,
                     "labels": run_time_labels()},
        "spec": {
            "selector": {"matchLabels": {"app.kubernetes.io/name": identity.APP_LABEL}},
            "endpoints": [{
                "port": "metrics", "path": "/metrics", "scheme": "https", "interval": "30s",
                "authorization": {"type": "Bearer", "credentials": {
                    "name": identity.METRICS_SCRAPER_TOKEN, "key": "token"}},
                "tlsConfig": {
                    "ca": {"configMap": {"name": identity.METRICS_CA_CONFIGMAP,
                                         "key": identity.SERVICE_CA_KEY}},
                    "serverName": f"{identity.METRICS_SERVICE}.{namespace}.svc"}}],
        },
    }


def prometheus_rule(rules: list[dict[str, Any]],
                    namespace: str = identity.NAMESPACE) -> dict[str, Any]:
    """The operator's own alerts (manager.render.alerts.operator_alerts), beside its
    metrics: a scraper that enforces namespaces evaluates them against this namespace."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": identity.OPERATOR_RULE, "namespace": namespace,
                     "labels": run_time_labels()},
        "spec": {"groups": [{"name": "external-secrets-operator", "rules": rules}]},
    }


def network_policy(*, namespaced: bool = True) -> dict[str, Any]:
    """How the metrics endpoint is protected (docs/operations.md, "Metrics"): only pods of
    the monitoring namespaces reach the metrics port; the health port stays open to the
    kubelet's probes; the operator needs no other ingress. Egress is not restricted (the
    API server's address differs per cluster)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _metadata(f"{identity.APP_LABEL}-ingress", namespaced=namespaced),
        "spec": {
            "podSelector": {"matchLabels": {"app": identity.APP_LABEL}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {"from": [{"namespaceSelector": {"matchExpressions": [{
                    "key": "kubernetes.io/metadata.name", "operator": "In",
                    "values": list(identity.MONITORING_NAMESPACES)}]}}],
                 "ports": [{"port": identity.METRICS_PORT, "protocol": "TCP"}]},
                {"ports": [{"port": identity.HEALTH_PORT, "protocol": "TCP"}]},
            ],
        },
    }
