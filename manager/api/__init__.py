"""The operator's two APIs (operator.openshift.io/v1alpha1) as pydantic models.

`manager.api.models` is the single source of truth; `manager.api.crd` generates the CRDs
from it. Dump models with `model_dump(by_alias=True, exclude_none=True)`.
"""

from manager.api.models import (
    ApplicationConfig,
    BitwardenSecretManagerProvider,
    BoolString,
    CertManagerConfig,
    CommonConfigs,
    Condition,
    ConditionStatus,
    ControllerConfig,
    ControllerStatus,
    ExternalSecretsConfig,
    ExternalSecretsConfigSpec,
    ExternalSecretsConfigStatus,
    ExternalSecretsManager,
    ExternalSecretsManagerSpec,
    ExternalSecretsManagerStatus,
    Feature,
    GlobalConfig,
    MetaCondition,
    ObjectReference,
    ProxyConfig,
    SecretReference,
    WebhookConfig,
)

__all__ = [
    "ApplicationConfig",
    "BitwardenSecretManagerProvider",
    "BoolString",
    "CertManagerConfig",
    "CommonConfigs",
    "Condition",
    "ConditionStatus",
    "ControllerConfig",
    "ControllerStatus",
    "ExternalSecretsConfig",
    "ExternalSecretsConfigSpec",
    "ExternalSecretsConfigStatus",
    "ExternalSecretsManager",
    "ExternalSecretsManagerSpec",
    "ExternalSecretsManagerStatus",
    "Feature",
    "GlobalConfig",
    "MetaCondition",
    "ObjectReference",
    "ProxyConfig",
    "SecretReference",
    "WebhookConfig",
]
