"""The Events a pass leaves (reporting/events.py, pass_events.py)."""

from __future__ import annotations

import re
from pathlib import Path

from manager.apply.results import Action, ObjectRef, ObjectResult
from manager.client.kube import own_namespace
from manager.config import EffectiveConfig
from manager.reporting import events, outcomes, pass_events, summary
from manager.reporting.status import Outcome, OutcomeKind
from manager.steps.removed_providers import StoreOnRemovedProvider
from tests.unit.configs import CERT_MANAGER, config


def _results(*actions: Action, name: str = "external-secrets") -> list[ObjectResult]:
    return [ObjectResult(ObjectRef("apps/v1", "Deployment", "es", f"{name}-{i}"), action)
            for i, action in enumerate(actions)]


def test_a_pass_summary_counts_what_it_wrote() -> None:
    assert pass_events.summary(_results(Action.UNCHANGED)) is None
    assert pass_events.summary(_results(Action.CREATED, Action.CREATED, Action.UPDATED)) == \
        "applied 3 objects (2 created, 1 updated)"
    assert pass_events.summary(_results(Action.UPDATED, Action.DELETED, Action.DELETED)) == \
        "applied 1 object (1 updated), pruned 2"
    assert pass_events.summary(_results(Action.DELETED)) == "pruned 1 object"


def test_the_cause_names_what_changed_since_the_last_converged_pass() -> None:
    plain, bitwarden = config(), config({"bitwardenSecretManagerProvider": {
        "enabled": "true", "secretRef": {"name": "tls"}}})
    created, deleted = _results(Action.CREATED), _results(Action.DELETED)
    assert pass_events.change_cause(None, plain, created) == "installed"
    assert "operator started" in pass_events.change_cause(None, plain, deleted)
    # Switching bitwarden says so, not the settings and policies that follow from it.
    assert pass_events.change_cause(bitwarden, plain, deleted) == "bitwarden switched off"
    assert pass_events.change_cause(plain, bitwarden, created) == "bitwarden switched on"
    assert pass_events.change_cause(plain, config({"logLevel": 4}), created) == "logLevel 1 -> 4"
    assert pass_events.change_cause(plain, config(namespace="other"), created) == \
        "operand moved from namespace external-secrets to other"
    assert pass_events.change_cause(plain, plain, created).startswith("repaired drift")
    # A rotation is named; a source that comes or goes with a setting is not.
    loaded = bitwarden.model_copy(update={"loaded_once": {"bitwarden-tls": "a"}})
    rotated = bitwarden.model_copy(update={"loaded_once": {"bitwarden-tls": "b"}})
    assert pass_events.change_cause(loaded, rotated, created) == (
        "the content of bitwarden's TLS Secret changed, so the pods that load it roll")
    assert pass_events.change_cause(loaded, plain, deleted) == "bitwarden switched off"
    with_cert_manager = config(CERT_MANAGER)
    assert "cert-controller goes" in pass_events.change_cause(
        with_cert_manager, with_cert_manager, _results(Action.DELETED,
                                                       name="external-secrets-cert-controller"))
    # A new CA, then the overlap of old and new in the caBundle, then its end; the cluster
    # facts alone are not "certManagerConfig changed".
    def facts(**update: object) -> EffectiveConfig:
        return with_cert_manager.model_copy(update={
            "cert_manager": with_cert_manager.cert_manager.model_copy(update=update)})

    updated = _results(Action.UPDATED)
    old, new, both = facts(ca_bundle="A"), facts(ca_bundle="B"), facts(
        ca_bundle="B", bundle_overlap="BA", overlap_until=1.0)
    assert pass_events.change_cause(old, both, updated) == (
        "cert-manager issued a new webhook CA, the caBundle trusts the previous CA too until "
        "every webhook pod serves the new certificate")
    assert pass_events.change_cause(both, new, updated) == (
        "every webhook pod serves the new certificate, so the caBundle drops the previous CA")
    assert pass_events.change_cause(facts(mount_previous=True), new, updated) == \
        "cert-manager issued a new webhook CA"


NOT_DEGRADED = pass_events.Before(False, "Reconciled")
DEGRADED_BEFORE = pass_events.Before(True, "IssuerNotFound")


def test_a_pass_posts_one_summary_and_warns_while_degraded() -> None:
    ready = Outcome(OutcomeKind.READY, "Reconciled", "running", True)
    degraded = Outcome(OutcomeKind.DEGRADED, "IssuerNotFound", "Issuer x not found")
    retrying = Outcome(OutcomeKind.RETRYING, "APIError", "503")
    writes = _results(Action.CREATED, Action.ADOPTED)
    posted = pass_events.pass_events(writes, ready, NOT_DEGRADED, None, config())
    assert [(e.type, e.reason) for e in posted] == [("Normal", "Adopted"), ("Normal", "Applied")]
    assert pass_events.pass_events([], ready, NOT_DEGRADED, None, config()) == []
    warned = pass_events.pass_events([], degraded, NOT_DEGRADED, None, None)
    assert [(e.type, e.reason, e.note) for e in warned] == [
        ("Warning", "IssuerNotFound", "Issuer x not found")]
    recovered = pass_events.pass_events([], ready, DEGRADED_BEFORE, None, config())
    assert [(e.type, e.reason) for e in recovered] == [("Normal", "Recovered")]
    assert pass_events.pass_events([], retrying, DEGRADED_BEFORE, None, config()) == []


def test_management_state_transitions_are_announced_once() -> None:
    unmanaged = Outcome(OutcomeKind.UNMANAGED, "Unmanaged", "paused")
    assert [(e.type, e.reason) for e in pass_events.pass_events(
        [], unmanaged, NOT_DEGRADED, None, config())] == [("Normal", "Unmanaged")]
    assert pass_events.pass_events([], unmanaged, pass_events.Before(False, "Unmanaged",
                                                                     "paused"),
                                   None, config()) == []
    # What the Ready summary says changed (other drift): the Event gives the whole of it.
    drifted = Outcome(OutcomeKind.UNMANAGED, "Unmanaged", "paused; 2 objects differ: a; b",
                      summary="paused, drift in 2 objects: a and 1 more")
    assert [e.note for e in pass_events.pass_events(
        [], drifted, pass_events.Before(False, "Unmanaged", "paused"), None, config())] == [
        "paused; 2 objects differ: a; b"]
    removing = pass_events.pass_events(_results(Action.DELETED), Outcome(
        OutcomeKind.PROGRESSING, "Removing", "left"), NOT_DEGRADED, None, None,
        cause="managementState is Removed")
    assert [e.note for e in removing] == ["pruned 1 object: managementState is Removed"]


def test_event_notes_stay_within_the_api_limit() -> None:
    note = events._bounded("é" * 2000)
    assert len(note.encode()) <= events.NOTE_LIMIT
    assert note.endswith("(see the status)")
    assert events._bounded("short") == "short"


def test_event_times_are_rfc3339_utc() -> None:
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", events.now_rfc3339())
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", events.now_micro())


def test_the_operators_namespace_comes_from_the_environment_or_its_service_account(
        tmp_path: Path) -> None:
    namespace_file = tmp_path / "namespace"
    assert own_namespace({"POD_NAMESPACE": "ops"}, namespace_file) == "ops"
    assert own_namespace({}, namespace_file) is None  # not in a pod
    namespace_file.write_text("eso-operator\n")
    assert own_namespace({}, namespace_file) == "eso-operator"
    assert own_namespace({"POD_NAMESPACE": ""}, namespace_file) == "eso-operator"


def test_stores_on_a_removed_provider_warn_in_ready_and_in_one_event() -> None:
    """Ready stays True with its reason (the stores work on today's operand); its line names
    the first store and the count, the Warning Event all of them, once per change."""
    stores = [StoreOnRemovedProvider("SecretStore", "apps", f"store-{i}", "alibaba")
              for i in range(3)]
    ready = Outcome(OutcomeKind.READY, "Reconciled", "external-secrets v1.3.2 is running", True)
    warned = outcomes.with_removed_providers(ready, stores)
    ready_condition = warned.conditions()[0]
    assert (ready_condition.status, ready_condition.reason) == ("True", "Reconciled")
    assert ready_condition.message == (
        "warning: 3 stores use providers the next release drops: SecretStore apps/store-0 "
        "(alibaba) and 2 more; see kubectl describe esc cluster")
    assert len(ready_condition.message) <= summary.LIMIT
    assert warned.message.startswith("external-secrets v1.3.2 is running; warning: 3 stores")
    posted = pass_events.pass_events([], warned, NOT_DEGRADED, None, config())
    assert [(e.type, e.reason) for e in posted] == [("Warning", "RemovedProviderInUse")]
    assert "apps/store-2 (alibaba)" in posted[0].note
    assert "move it to a supported provider or delete it" in posted[0].note
    seen = pass_events.Before(False, "Reconciled", ready_condition.message)
    assert pass_events.pass_events([], warned, seen, None, config()) == []
    # Long names: the line still fits, cut in the store's name.
    long = [StoreOnRemovedProvider("SecretStore", "n" * 63, "s" * 253, "device42")]
    assert len(outcomes.with_removed_providers(ready, long).line) <= summary.LIMIT
    # Nothing to say, or not Ready (its conditions say what matters first): unchanged.
    assert outcomes.with_removed_providers(ready, []) is ready
    waiting = Outcome(OutcomeKind.PROGRESSING, "WaitingForOperand", "waiting")
    assert outcomes.with_removed_providers(waiting, stores) is waiting
