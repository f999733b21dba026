"""Effective configs for the unit tests, as a pass builds them from an ESC spec."""

from __future__ import annotations

from typing import Any

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import EffectiveConfig, OperatorEnvironment, effective_config

CERT_MANAGER = {"certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"}}}


def config(app: dict[str, Any] | None = None, namespace: str | None = None) -> EffectiveConfig:
    """The effective config of an ESC with this appConfig (and operand namespace), no ESM."""
    spec: dict[str, Any] = {"appConfig": app} if app else {}
    if namespace:
        spec["controllerConfig"] = {"namespace": namespace}
    return effective_config(ExternalSecretsConfigSpec.model_validate(spec),
                            ExternalSecretsManagerSpec.model_validate({}),
                            OperatorEnvironment.from_environ({}))
