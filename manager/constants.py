"""Names the operator shares with the cluster: API group, singletons, labels, field manager."""

from typing import Final

GROUP: Final = "operator.openshift.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

ESC_KIND: Final = "ExternalSecretsConfig"
ESC_PLURAL: Final = "externalsecretsconfigs"
ESM_KIND: Final = "ExternalSecretsManager"
ESM_PLURAL: Final = "externalsecretsmanagers"
SINGLETON_NAME: Final = "cluster"

OPERATOR_NAME: Final = "external-secrets-operator"
FIELD_MANAGER: Final = OPERATOR_NAME
DEFAULT_OPERAND_NAMESPACE: Final = "external-secrets"
OPERATOR_NAMESPACE: Final = "external-secrets-operator"

OPERATOR_DEPLOYMENT: Final = f"{OPERATOR_NAME}-controller-manager"  # and its ServiceAccount
OPERATOR_CONTAINER: Final = "manager"

ESC_PATH: Final = f"/apis/{API_VERSION}/{ESC_PLURAL}/{SINGLETON_NAME}"
ESM_PATH: Final = f"/apis/{API_VERSION}/{ESM_PLURAL}/{SINGLETON_NAME}"

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"
