"""What the upgrade gate tells OLM (manager/sidetasks/upgrade_gate.py `decide`); the
publishing is tested against the real API server (tests/integration/test_upgrade_gate.py) and
the real OLM (tests/olm/test_upgrade_gate.py)."""

from __future__ import annotations

from manager.api.models import ExternalSecretsConfigSpec
from manager.config import OperatorEnvironment, effective_config
from manager.management import MANAGED, UNMANAGED
from manager.reporting.status import Outcome, OutcomeKind
from manager.sidetasks.upgrade_gate import Gate, decide
from manager.steps.removed_providers import StoreOnRemovedProvider
from manager.steps.stored_versions import Unserved, unserved_versions

ENV = OperatorEnvironment.from_environ({})
PLAIN = effective_config(None, None, ENV)
READY = Outcome(OutcomeKind.READY, "Reconciled", "ok", True)
OVERRIDDEN = effective_config(ExternalSecretsConfigSpec.model_validate(
    {"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", "overrideArgs": ["--enable-http2=true"]}]}}), None, ENV)


def test_true_without_an_esc_and_while_managed_even_degraded() -> None:
    """A Degraded pass (a missing Issuer, a fault of this release) is no worse after an
    upgrade, and the next release may be its fix: OLM must not hold it back."""
    assert decide(None, None, "", []).status == "True"
    for kind in (OutcomeKind.READY, OutcomeKind.PROGRESSING, OutcomeKind.RETRYING,
                 OutcomeKind.REMOVED, OutcomeKind.DEGRADED):
        gate = decide(Outcome(kind, "R", "m"), PLAIN, MANAGED, [])
        assert gate == Gate("True", "AsExpected", gate.message), kind


def test_each_blocker_says_what_to_do() -> None:
    unmanaged = decide(Outcome(OutcomeKind.UNMANAGED, "Unmanaged", "m"), PLAIN, UNMANAGED, [])
    assert (unmanaged.reason, unmanaged.status) == ("Unmanaged", "False")
    assert "set it to Managed (or Removed)" in unmanaged.message
    overridden = decide(READY, OVERRIDDEN, MANAGED, [])
    assert (overridden.reason, overridden.status) == ("UnsupportedOverrides", "False")
    assert "1 componentConfigs[].overrideArgs are set" in overridden.message
    assert "remove them" in overridden.message
    stored = decide(READY, PLAIN, MANAGED, [Unserved("secretstores.external-secrets.io",
                                                     ("v1beta1",))])
    assert (stored.reason, stored.status) == ("StoredVersionsNotServed", "False")
    assert ("remove v1beta1 from the CRD's status.storedVersions" in stored.message)


def test_every_blocker_is_named_and_the_first_gives_the_reason() -> None:
    gate = decide(Outcome(OutcomeKind.UNMANAGED, "Unmanaged", "m"), OVERRIDDEN, UNMANAGED,
                  [Unserved("externalsecrets.external-secrets.io", ("v1beta1",))])
    assert gate.reason == "Unmanaged"
    assert "managementState Unmanaged" in gate.message
    assert "overrideArgs" in gate.message
    assert "externalsecrets.external-secrets.io" in gate.message


def test_unserved_versions_are_the_stored_ones_not_served() -> None:
    crd = {"spec": {"versions": [{"name": "v1", "served": True},
                                 {"name": "v1beta1", "served": False}]},
           "status": {"storedVersions": ["v1beta1", "v1"]}}
    assert unserved_versions(crd) == ("v1beta1",)
    crd["status"]["storedVersions"] = ["v1"]
    assert unserved_versions(crd) == ()
    assert unserved_versions({"spec": {}}) == ()


ALIBABA = StoreOnRemovedProvider("SecretStore", "apps", "vault-a", "alibaba")
DEVICE42 = StoreOnRemovedProvider("ClusterSecretStore", "", "inventory", "device42")


def test_stores_on_a_removed_provider_hold_the_upgrade_and_are_named() -> None:
    """They work today (Ready stays True), but the next release's operand no longer has their
    provider: False, naming each store and what to do."""
    gate = decide(READY, PLAIN, MANAGED, [], [ALIBABA, DEVICE42])
    assert (gate.status, gate.reason) == ("False", "RemovedProviderInUse")
    assert gate.message.startswith(
        "2 stores use providers that external-secrets v2.9.0, the operand of the next release "
        "(0.3.0), no longer has: SecretStore apps/vault-a (alibaba), ClusterSecretStore "
        "inventory (device42); "), gate.message
    assert gate.message.endswith("move it to a supported provider or delete it; then upgrade")
    # Also without an ESC (the operand may still run), and after the other blockers.
    assert decide(None, None, "", [], [ALIBABA]).reason == "RemovedProviderInUse"
    both = decide(READY, OVERRIDDEN, MANAGED, [], [DEVICE42])
    assert both.reason == "UnsupportedOverrides"
    assert "inventory (device42)" in both.message
    assert decide(READY, PLAIN, MANAGED, [], []).status == "True"


def test_many_stores_are_capped_with_a_count() -> None:
    stores = [StoreOnRemovedProvider("SecretStore", f"team-{i}", "s", "alibaba")
              for i in range(12)]
    gate = decide(READY, PLAIN, MANAGED, [], stores)
    assert "team-4/s (alibaba) and 7 more;" in gate.message, gate.message
    assert "team-5/" not in gate.message


def test_the_esc_condition_is_the_decision_itself() -> None:
    """The ESC's Upgradeable (OLM v1 has no OperatorCondition) says what OLM v0 is told: one
    decision, two places; a message too long for a condition is cut, never dropped."""
    gate = decide(READY, OVERRIDDEN, MANAGED, [])
    condition = gate.condition
    assert (condition.type, condition.status, condition.reason, condition.message) == (
        "Upgradeable", gate.status, gate.reason, gate.message)
    huge = Gate("False", "StoredVersionsNotServed", "x" * 40000)
    assert len(huge.condition.message) == 32768
    assert huge.condition.message.startswith("x" * 100)
