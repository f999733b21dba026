"""Pinned versions: the one place that decides them.

Shell scripts read these assignments with `hack/version.sh NAME`; keep each on one
line in the form NAME = "value".
"""

from typing import Final

# The operand: its image, its version label and the CRDs the bundle ships; the simulated
# cluster runs the same releases, built from their source trees (hack/build-tool.sh).
EXTERNAL_SECRETS_VERSION: Final = "v2.9.0"
EXTERNAL_SECRETS_IMAGE: Final = (
    f"ghcr.io/external-secrets/external-secrets:{EXTERNAL_SECRETS_VERSION}"
)
BITWARDEN_SDK_SERVER_VERSION: Final = "v0.5.2"
BITWARDEN_SDK_SERVER_IMAGE: Final = (
    f"ghcr.io/external-secrets/bitwarden-sdk-server:{BITWARDEN_SDK_SERVER_VERSION}"
)
# cert-manager: the CRDs (Certificate, Issuer, ClusterIssuer, ...) the tests install and the
# binaries the simulated cluster runs, one version. v1.20.3: v1.21's controller needs a Venafi
# module the Go module proxy here refuses (hack/build-tool.sh builds it from its source tree).
CERT_MANAGER_VERSION: Final = "v1.20.3"
# prometheus-operator: the monitoring.coreos.com CRDs (ServiceMonitor, PrometheusRule) that
# tests install and the operand-monitoring objects are written against.
PROMETHEUS_OPERATOR_VERSION: Final = "v0.85.0"
# The Kubernetes release of the local control plane.
KUBE_VERSION: Final = "v1.34.4"
# The operator-framework's validators (github.com/operator-framework/api) that
# hack/validate-bundle.sh builds to check bundle/.
OPERATOR_FRAMEWORK_API_VERSION: Final = "v0.43.0"

# --- Development and test tools: never shipped, built by hack/build-*.sh into a cache. ---
# promtool (Prometheus 3.16.0; the Go module versions Prometheus as v0.MINOR.PATCH) checks the
# rendered PrometheusRule and runs its unit tests (tests/unit/render/test_promtool.py).
PROMETHEUS_VERSION: Final = "v0.316.0"
# kwok simulates the nodes and pods of the local cluster (docs/development.md).
KWOK_VERSION: Final = "v0.8.0"
# OLM (olm-operator, catalog-operator) and opm for the OLM install and upgrade tests
# (tests/olm, docs/olm.md): the newest releases the Go module proxy serves; OLM v0.42.0
# requires exactly this operator-registry release.
OLM_VERSION: Final = "v0.42.0"
OPM_VERSION: Final = "v1.65.0"
# grpc_health_probe, which OLM's registry pods run as their exec probes (`grpc_health_probe
# -addr=:50051`): in the opm base image of the catalog image (hack/opm-base-image.sh), as in
# upstream's opm image.
GRPC_HEALTH_PROBE_VERSION: Final = "v0.4.62"
# openshift/api (no releases: a pseudo-version of its master branch, 2026-04-20), whose
# config.openshift.io/v1 CRDs (APIServer, Proxy) the simulated cluster serves in its opt-in
# OpenShift mode (hack/fetch-crds.sh, devcluster/crds.py): the TLS security profile tests.
OPENSHIFT_API_VERSION: Final = "v0.0.0-20260420151639-34e60874783e"
