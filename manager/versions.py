"""Pinned versions: the one place that decides them.

Shell scripts read these assignments with `hack/version.sh NAME`; keep each on one
line in the form NAME = "value".
"""

from typing import Final

# The operand: its image, its version label and the CRDs the bundle ships.
EXTERNAL_SECRETS_VERSION: Final = "v1.3.2"
EXTERNAL_SECRETS_IMAGE: Final = (
    f"ghcr.io/external-secrets/external-secrets:{EXTERNAL_SECRETS_VERSION}"
)
BITWARDEN_SDK_SERVER_VERSION: Final = "v0.5.2"
BITWARDEN_SDK_SERVER_IMAGE: Final = (
    f"ghcr.io/external-secrets/bitwarden-sdk-server:{BITWARDEN_SDK_SERVER_VERSION}"
)
# cert-manager: the CRDs (Certificate, Issuer, ClusterIssuer, ...) tests and the bundle docs use.
CERT_MANAGER_VERSION: Final = "v1.21.2"
# The Kubernetes release of the local control plane.
KUBE_VERSION: Final = "v1.34.4"
# The operator-framework's validators (github.com/operator-framework/api) that
# hack/validate-bundle.sh builds to check bundle/.
OPERATOR_FRAMEWORK_API_VERSION: Final = "v0.43.0"
