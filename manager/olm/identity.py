"""Names and versions that identify the operator to OLM and to the cluster."""

from __future__ import annotations

from typing import Final

from manager import __version__, versions
from manager.names import OPERATOR_DEPLOYMENT, OPERATOR_NAME, OPERATOR_NAMESPACE

PACKAGE: Final = OPERATOR_NAME
OPERATOR_VERSION: Final = __version__
CSV_NAME: Final = f"{PACKAGE}.v{OPERATOR_VERSION}"
# "stable" prefix per OLM's channel naming convention; -v0 keeps 0.x releases apart from
# a future 1.x line.
CHANNELS: Final = ("stable-v0",)
DEFAULT_CHANNEL: Final = "stable-v0"
# Every earlier release upgrades straight to this one.
SKIP_RANGE: Final = f"<{OPERATOR_VERSION}"
# The CRDs use CEL transition rules and messageExpression; the Go operator this replaces
# declared the same floor.
MIN_KUBE_VERSION: Final = "1.31.0"

NAMESPACE: Final = OPERATOR_NAMESPACE
# The name the Go operator used, so RBAC audits and runbooks keep working.
SERVICE_ACCOUNT: Final = OPERATOR_DEPLOYMENT
DEPLOYMENT: Final = OPERATOR_DEPLOYMENT
CONTAINER: Final = "manager"
APP_LABEL: Final = OPERATOR_NAME

# Where release builds push the image (`make image IMG=...` overrides it for other builds).
OPERATOR_IMAGE_REPOSITORY: Final = "quay.io/external-secrets-operator/external-secrets-operator"
OPERATOR_IMAGE: Final = f"{OPERATOR_IMAGE_REPOSITORY}:v{OPERATOR_VERSION}"

# kopf's health endpoint (`kopf run --liveness=...`), which `python -m manager run` serves.
HEALTH_PORT: Final = 8081
HEALTH_PATH: Final = "/healthz"
# The operator's Prometheus metrics (`python -m manager run --metrics-addr`, manager.metrics).
METRICS_PORT: Final = 8080
METRICS_SERVICE: Final = f"{OPERATOR_NAME}-metrics"
# The Secret holding the metrics serving certificate (tls.crt, tls.key): OpenShift's service CA
# fills it (the Service's annotation below); mounted optional, so the pod starts without it.
METRICS_TLS_SECRET: Final = f"{OPERATOR_NAME}-metrics-tls"
METRICS_TLS_DIR: Final = "/var/run/secrets/metrics-tls"
SERVING_CERT_ANNOTATION: Final = "service.beta.openshift.io/serving-cert-secret-name"
# The scrape credentials of the operator's ServiceMonitor (which the operator applies at run
# time, manager/sidetasks/operator_monitoring.py): a ServiceAccount granted the read of
# /metrics (rbac.yaml), its token Secret, and a ConfigMap the service CA fills with its CA.
# Secrets and ConfigMaps, not files: user-workload monitoring refuses ServiceMonitors that name
# files in the Prometheus container (bearerTokenFile, caFile).
METRICS_SCRAPER: Final = f"{OPERATOR_NAME}-metrics-scraper"
METRICS_SCRAPER_TOKEN: Final = f"{METRICS_SCRAPER}-token"
METRICS_CA_CONFIGMAP: Final = f"{OPERATOR_NAME}-metrics-ca"
INJECT_CA_ANNOTATION: Final = "service.beta.openshift.io/inject-cabundle"
SERVICE_CA_KEY: Final = "service-ca.crt"
# The operator's own ServiceMonitor and PrometheusRule, in its namespace.
OPERATOR_RULE: Final = OPERATOR_NAME
# The monitoring stack's ServiceAccount on OpenShift, granted the read of /metrics (rbac.yaml).
PROMETHEUS_SERVICE_ACCOUNT: Final = ("openshift-monitoring", "prometheus-k8s")
# Namespaces whose Prometheus may scrape the operator (the NetworkPolicy's only ingress on the
# metrics port): OpenShift's platform and user-workload monitoring, and the `monitoring`
# namespace kube-prometheus installs into.
MONITORING_NAMESPACES: Final = ("openshift-monitoring", "openshift-user-workload-monitoring",
                                "monitoring")

# relatedImages: every image the operator can deploy, for mirroring in disconnected clusters.
# The defaults are the pinned upstream tags; a published bundle names the images it was built
# with by digest (hack/publish-images.sh: BundleSources.related_images), and a mirrored one
# the mirror's (hack/mirror-images.sh).
RelatedImages = tuple[tuple[str, str], ...]  # (name, image reference), in the CSV's order
RELATED_IMAGES: Final[RelatedImages] = (
    ("external-secrets", versions.EXTERNAL_SECRETS_IMAGE),
    ("bitwarden-sdk-server", versions.BITWARDEN_SDK_SERVER_IMAGE),
)


def related_image_variable(name: str) -> str:
    """The operator Deployment's variable that carries the related image `name` (OLM's
    convention, which manager.config.OperatorEnvironment reads): RELATED_IMAGE_<NAME>."""
    return "RELATED_IMAGE_" + name.upper().replace("-", "_")
