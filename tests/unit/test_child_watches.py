"""The watches on the operator's children (runtime/pass_watches.py)."""

from __future__ import annotations

from typing import Any

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import EffectiveConfig, OperatorEnvironment, effective_config
from manager.render import render_operand
from manager.runtime.pass_watches import CHILD_WATCHES


def config(app: dict[str, Any] | None = None, namespace: str | None = None) -> EffectiveConfig:
    spec: dict[str, Any] = {"appConfig": app} if app else {}
    if namespace:
        spec["controllerConfig"] = {"namespace": namespace}
    return effective_config(ExternalSecretsConfigSpec.model_validate(spec),
                            ExternalSecretsManagerSpec.model_validate({}),
                            OperatorEnvironment.from_environ({}))


CERT_MANAGER = {"certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"}}}


def test_children_are_watched_by_our_label_in_every_namespace_and_cached() -> None:
    desired = render_operand(config(CERT_MANAGER, namespace="es"))
    assert {(spec.api_version, spec.kind) for spec in CHILD_WATCHES} >= {
        (obj["apiVersion"], obj["kind"]) for obj in desired.objects()}
    for spec in CHILD_WATCHES:
        assert spec.label_selector == "app.kubernetes.io/managed-by=external-secrets-operator"
        assert spec.namespace is None  # what a moved operand left behind is found too
        assert spec.cached
