"""The watches on the operator's children (runtime/pass_watches.py)."""

from __future__ import annotations

from manager.render import render_operand
from manager.runtime.pass_watches import CHILD_WATCHES
from tests.unit.configs import CERT_MANAGER, config


def test_children_are_watched_by_our_label_in_every_namespace_and_cached() -> None:
    desired = render_operand(config(CERT_MANAGER, namespace="es"))
    assert {(spec.api_version, spec.kind) for spec in CHILD_WATCHES} >= {
        (obj["apiVersion"], obj["kind"]) for obj in desired.objects()}
    for spec in CHILD_WATCHES:
        assert spec.label_selector == "app.kubernetes.io/managed-by=external-secrets-operator"
        assert spec.namespace is None  # what a moved operand left behind is found too
        assert spec.cached
