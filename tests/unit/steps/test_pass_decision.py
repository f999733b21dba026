"""manager.steps.pass_decision: the rules a pass, `plan` and their comparison test
(tests/integration/test_plan.py) share, on hand-made observations."""

from __future__ import annotations

from typing import Any

from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.apply import ObjectRef, Observed, Resource
from manager.client.kube import JsonObject
from manager.config import EffectiveConfig, OperatorEnvironment, effective_config
from manager.names import FIELD_MANAGER
from manager.render import render_operand
from manager.reporting.outcomes import drift_of_decision
from manager.steps.pass_decision import Observation, decide, refs
from manager.steps.preflight import MissingDependencyError, deployments

OURS = {"managedFields": [{"manager": FIELD_MANAGER, "operation": "Apply"}]}
THEIRS = {"managedFields": [{"manager": "helm", "operation": "Update"}]}
CERT_MANAGER = {"certManagerConfig": {"enabled": "true", "issuerRef": {"name": "ca"}}}


def config(app: dict[str, Any] | None = None, adopt: bool = False) -> EffectiveConfig:
    spec: dict[str, Any] = {"appConfig": app or {}}
    if adopt:
        spec["controllerConfig"] = {"adoptExistingObjects": "true"}
    return effective_config(ExternalSecretsConfigSpec.model_validate(spec),
                            ExternalSecretsManagerSpec.model_validate({}),
                            OperatorEnvironment.from_environ({}))


def observed(cfg: EffectiveConfig, owners: dict[str, JsonObject | None]) -> list[Observed]:
    """Every rendered object, live as ours unless `owners` says otherwise (by kind/name;
    None: absent)."""
    found = []
    for obj in render_operand(cfg).objects():
        ref = ObjectRef.of(obj)
        meta = owners.get(f"{ref.kind}/{ref.name}", OURS)
        live = None if meta is None else {**obj, "metadata": {**obj["metadata"], **meta}}
        found.append(Observed(obj, ref, live))
    return found


def unwanted(kind: str, name: str, app: str) -> tuple[Resource, JsonObject]:
    return (Resource("v1", kind, kind.lower() + "s", True),
            {"apiVersion": "v1", "kind": kind, "metadata": {
                "name": name, "namespace": "external-secrets",
                "labels": {"app.kubernetes.io/name": app}}})


CERT_CONTROLLER_SA = unwanted("ServiceAccount", "external-secrets-cert-controller",
                              "external-secrets-cert-controller")
OLD_BITWARDEN_SA = unwanted("ServiceAccount", "bitwarden-sdk-server", "bitwarden-sdk-server")


def test_steady_state_applies_everything_and_prunes_what_is_no_longer_rendered() -> None:
    cfg = config()
    seen = observed(cfg, {})
    decision = decide(Observation(cfg, seen, (), (OLD_BITWARDEN_SA,)))
    assert decision.refusal is None
    assert decision.blocked is None
    assert [o.ref.kind for o in decision.namespace] == ["Namespace"]
    assert len(decision.namespace) + len(decision.apply) == len(seen)
    assert refs(decision.prune) == [ObjectRef.of(OLD_BITWARDEN_SA[1])]
    assert decision.deferred == ()


def test_an_object_someone_else_manages_stops_everything_until_adoption_is_asked_for() -> None:
    cfg = config()
    seen = observed(cfg, {"ServiceAccount/external-secrets": THEIRS})
    decision = decide(Observation(cfg, seen, (), (OLD_BITWARDEN_SA,)))
    assert decision.refusal is not None
    assert [str(ref) for ref in decision.refusal.refs] == [
        "ServiceAccount external-secrets/external-secrets"]
    assert (decision.namespace, decision.apply, decision.prune) == ((), (), ())
    adopting = config(adopt=True)
    decision = decide(Observation(adopting, observed(adopting, {
        "ServiceAccount/external-secrets": THEIRS}), (), ()))
    assert decision.refusal is None
    assert "ServiceAccount/external-secrets" in {f"{o.ref.kind}/{o.ref.name}"
                                                 for o in decision.apply}


def test_a_namespace_someone_else_created_is_used_as_it_is_never_written() -> None:
    cfg = config()
    decision = decide(Observation(cfg, observed(cfg, {"Namespace/external-secrets": THEIRS}),
                                  (), ()))
    assert decision.refusal is None
    assert decision.namespace == ()
    assert all(o.ref.kind != "Namespace" for o in decision.apply)


def test_a_missing_dependency_holds_back_its_dependants_and_blocks_every_deletion() -> None:
    cfg = config()
    missing = MissingDependencyError("CertManagerIssuerNotFound", "spec.x", "absent",
                                     subject="Issuer ca", inspect="kubectl get issuer ca",
                                     holds=deployments("webhook"))
    decision = decide(Observation(cfg, observed(cfg, {}), (missing,),
                                  (OLD_BITWARDEN_SA, CERT_CONTROLLER_SA)))
    assert [o.ref.name for o in decision.held] == ["external-secrets-webhook"]
    assert all(o.ref.name != "external-secrets-webhook" or o.ref.kind != "Deployment"
               for o in decision.apply)
    assert decision.blocked is not None
    assert decision.blocked.held == tuple(o.ref for o in decision.held)
    assert (decision.prune, decision.deferred) == ((), ())


def test_with_cert_manager_the_cert_controller_goes_last() -> None:
    cfg = config(CERT_MANAGER)
    decision = decide(Observation(cfg, observed(cfg, {}), (),
                                  (OLD_BITWARDEN_SA, CERT_CONTROLLER_SA)))
    assert refs(decision.prune) == [ObjectRef.of(OLD_BITWARDEN_SA[1])]
    assert refs(decision.deferred) == [ObjectRef.of(CERT_CONTROLLER_SA[1])]
    # Without cert-manager a leftover cert-controller object is an ordinary deletion.
    plain = config()
    decision = decide(Observation(plain, observed(plain, {}), (), (CERT_CONTROLLER_SA,)))
    assert refs(decision.prune) == [ObjectRef.of(CERT_CONTROLLER_SA[1])]
    assert decision.deferred == ()


def test_unmanaged_drift_is_read_off_the_decision() -> None:
    cfg = config()
    drift = drift_of_decision(decide(Observation(
        cfg, observed(cfg, {"ServiceAccount/external-secrets": None}), (), (OLD_BITWARDEN_SA,))))
    # (OURS carries no applied fields, so every live object here also "differs")
    assert [str(d) for d in drift if d.what != "differs from the spec"] == [
        "ServiceAccount external-secrets/external-secrets is missing",
        "ServiceAccount external-secrets/bitwarden-sdk-server is no longer rendered "
        "(it would be deleted)"]
    # Someone else's object stops a pass before any write: only it is reported.
    refused = drift_of_decision(decide(Observation(
        cfg, observed(cfg, {"Deployment/external-secrets": THEIRS}), (), (OLD_BITWARDEN_SA,))))
    assert [str(d) for d in refused] == [
        "Deployment external-secrets/external-secrets exists but the operator did not create it"]


TERMINATING = {**OURS, "deletionTimestamp": "2026-11-28T00:00:00Z", "finalizers": ["x/y"]}


def test_an_object_being_deleted_is_a_wait_for_it_alone() -> None:
    """A stuck finalizer on one NetworkPolicy must not stop the repair of the rest."""
    cfg = config()
    seen = observed(cfg, {"NetworkPolicy/deny-all-traffic": TERMINATING,
                          "Deployment/external-secrets": None})
    decision = decide(Observation(cfg, seen, (), (OLD_BITWARDEN_SA,)))
    assert [str(o.ref) for o in decision.waiting] == [
        "NetworkPolicy external-secrets/deny-all-traffic"]
    assert "Deployment external-secrets/external-secrets" in {str(o.ref) for o in decision.apply}
    assert len(decision.namespace) + len(decision.apply) == len(seen) - 1
    assert refs(decision.prune) == [ObjectRef.of(OLD_BITWARDEN_SA[1])]
    assert ("NetworkPolicy external-secrets/deny-all-traffic is being deleted"
            in [str(d) for d in drift_of_decision(decision)])


def test_a_namespace_being_deleted_is_a_wait_for_everything() -> None:
    cfg = config()
    seen = observed(cfg, {"Namespace/external-secrets": TERMINATING})
    decision = decide(Observation(cfg, seen, (), (OLD_BITWARDEN_SA,)))
    assert (decision.namespace, decision.apply, decision.prune) == ((), (), ())
    assert len(decision.waiting) == len(seen)
