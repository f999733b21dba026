"""The caBundle while the webhook pods move to a new CA (manager/steps/ca_overlap.py)."""

from __future__ import annotations

import base64

import pytest

from manager.config import CertManagerSettings
from manager.names import WEBHOOK_SECRET, WEBHOOK_SECRET_CERT_MANAGER
from manager.render.context import webhook_secret
from manager.steps import ca_overlap
from manager.steps.readiness import certificates
from tests.certificates import self_signed_ca

NEW_SECRET = WEBHOOK_SECRET_CERT_MANAGER


@pytest.fixture(scope="module")
def cas(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    directory = tmp_path_factory.mktemp("cas")
    return {name: self_signed_ca(directory, name) for name in ("old", "new", "other")}


def deployment(secret: str, *, rolled_out: bool = True) -> dict[str, object]:
    return {
        "metadata": {"generation": 2},
        "spec": {"replicas": 2, "template": {"spec": {"volumes": [
            {"name": "certs", "secret": {"secretName": secret}}]}}},
        "status": {"observedGeneration": 2, "replicas": 3 if not rolled_out else 2,
                   "updatedReplicas": 1 if not rolled_out else 2,
                   "availableReplicas": 2}}


def test_an_overlap_lasts_while_the_pods_move_to_the_secret() -> None:
    moving = ca_overlap.overlap(deployment(WEBHOOK_SECRET), NEW_SECRET, 0.0, now=10_000.0)
    assert moving is not None
    assert moving.until is None  # the Deployment's status changes end it
    assert f"move to Secret {NEW_SECRET}" in moving.reason
    rolling = ca_overlap.overlap(deployment(NEW_SECRET, rolled_out=False), NEW_SECRET, 0.0,
                                 now=10_000.0)
    assert rolling is not None
    assert rolling.until is None


def test_an_overlap_lasts_a_fixed_time_after_the_secret_changes() -> None:
    written = 1_000.0
    during = ca_overlap.overlap(deployment(NEW_SECRET), NEW_SECRET, written,
                                now=written + ca_overlap.OVERLAP_SECONDS - 1)
    assert during is not None
    assert during.until == written + ca_overlap.OVERLAP_SECONDS
    assert ca_overlap.overlap(deployment(NEW_SECRET), NEW_SECRET, written,
                              now=written + ca_overlap.OVERLAP_SECONDS) is None


def test_no_pods_no_overlap() -> None:
    assert ca_overlap.overlap(None, NEW_SECRET, 0.0, now=1.0) is None


def test_the_bundle_trusts_the_previous_cas_only_during_an_overlap(
        cas: dict[str, str]) -> None:
    live = [cas["old"], cas["old"]]  # both webhooks carry the old CA
    assert ca_overlap.trusted_bundle(cas["new"], live, keep_previous=False) == cas["new"]
    both = ca_overlap.trusted_bundle(cas["new"], live, keep_previous=True)
    assert certificates(both) == certificates(cas["new"]) | certificates(cas["old"])
    # The published CA comes first, and each previous CA once.
    text = base64.b64decode(both).decode()
    assert text.count("BEGIN CERTIFICATE") == 2
    assert text.startswith(base64.b64decode(cas["new"]).decode().rstrip("\n"))


def test_a_steady_bundle_is_the_published_ca_exactly(cas: dict[str, str]) -> None:
    # Nothing else in the live bundles: the rendered value is unchanged, so nothing is written.
    assert ca_overlap.trusted_bundle(cas["new"], [cas["new"]], keep_previous=True) == cas["new"]
    # An overlap already rendered keeps its value from pass to pass.
    both = ca_overlap.trusted_bundle(cas["new"], [cas["old"]], keep_previous=True)
    assert ca_overlap.trusted_bundle(cas["new"], [both, both], keep_previous=True) == both


def test_unreadable_bundles_are_not_carried_over(cas: dict[str, str]) -> None:
    junk = base64.b64encode(b"not a certificate").decode()
    assert ca_overlap.trusted_bundle(cas["new"], [junk, "%%%"], keep_previous=True) == cas["new"]


def test_live_bundles_of_both_configurations(cas: dict[str, str]) -> None:
    configurations = [
        {"webhooks": [{"clientConfig": {"caBundle": cas["old"]}}, {"clientConfig": {}}]},
        None,
        {"webhooks": [{"clientConfig": {"caBundle": cas["other"]}}]}]
    assert ca_overlap.live_bundles(configurations) == [cas["old"], cas["other"]]


def test_the_webhook_moves_to_cert_managers_secret_only_once_it_is_issued() -> None:
    assert webhook_secret(CertManagerSettings()) == WEBHOOK_SECRET
    assert webhook_secret(CertManagerSettings(enabled=True)) == WEBHOOK_SECRET_CERT_MANAGER
    assert webhook_secret(CertManagerSettings(enabled=True, mount_previous=True)) == \
        WEBHOOK_SECRET


# --- the way back to the cert-controller ------------------------------------------------


def configuration(bundle: str | None, *, labelled: bool = True) -> dict[str, object]:
    labels = {"external-secrets.io/component": "webhook"} if labelled else {}
    client = {"caBundle": bundle} if bundle else {}
    return {"metadata": {"labels": labels}, "webhooks": [{"clientConfig": client}]}


def test_the_webhook_stays_on_cert_managers_secret_on_the_way_back_until_it_is_replaced(
        ) -> None:
    assert webhook_secret(CertManagerSettings(mount_previous=True)) == NEW_SECRET
    assert webhook_secret(CertManagerSettings()) == WEBHOOK_SECRET


def test_settled_on_the_cert_controller_only_when_nothing_is_left_to_bridge(
        cas: dict[str, str]) -> None:
    settled = [configuration(cas["old"]), configuration(cas["old"])]
    assert ca_overlap.settled_on_cert_controller(deployment(WEBHOOK_SECRET), settled)
    assert ca_overlap.settled_on_cert_controller(None, [None, None])
    # Still on cert-manager's Secret; a configuration without the cert-controller's label;
    # a caBundle that trusts two CAs (the operator's bridge): each is a way back under way.
    assert not ca_overlap.settled_on_cert_controller(deployment(NEW_SECRET), settled)
    assert not ca_overlap.settled_on_cert_controller(
        deployment(WEBHOOK_SECRET), [configuration(cas["old"]),
                                     configuration(cas["old"], labelled=False)])
    both = ca_overlap.union_bundle([cas["old"], cas["new"]])
    assert both is not None
    assert not ca_overlap.settled_on_cert_controller(
        deployment(WEBHOOK_SECRET), [configuration(both), configuration(cas["old"])])


def test_before_the_cert_controller_made_its_ca_the_webhook_stays_and_every_ca_is_kept(
        cas: dict[str, str]) -> None:
    live = [cas["new"], cas["other"]]  # cert-manager's CA, and one more trusted before
    way = ca_overlap.way_back(deployment(NEW_SECRET), live, None, secret_written=0.0,
                              now=10.0)
    assert way.mount_previous
    assert way.bundle is not None
    assert certificates(way.bundle) == certificates(cas["new"]) | certificates(cas["other"])
    assert (way.until, way.handover) == (None, None)
    # A webhook that no longer mounts cert-manager's Secret is not moved back to it.
    assert not ca_overlap.way_back(deployment(WEBHOOK_SECRET), live, None,
                                   secret_written=0.0, now=10.0).mount_previous


def test_the_cert_controllers_ca_is_added_until_every_pod_serves_it(
        cas: dict[str, str]) -> None:
    live = [cas["new"], cas["new"]]  # cert-manager's CA in both configurations
    written = 1_000.0
    moving = ca_overlap.way_back(deployment(WEBHOOK_SECRET), live, cas["old"],
                                 secret_written=written, now=written + 1)
    assert not moving.mount_previous
    assert moving.bundle is not None
    assert certificates(moving.bundle) == certificates(cas["old"]) | certificates(cas["new"])
    assert moving.until == written + ca_overlap.OVERLAP_SECONDS
    # The overlap over: the label comes back and the same caBundle stays until the
    # cert-controller writes its own.
    handed = ca_overlap.way_back(deployment(WEBHOOK_SECRET), live, cas["old"],
                                 secret_written=written,
                                 now=written + ca_overlap.OVERLAP_SECONDS)
    assert (handed.bundle, handed.until) == (None, None)
    assert handed.handover == moving.bundle


def test_a_cabundle_of_the_cert_controllers_ca_alone_is_the_end_of_the_way_back(
        cas: dict[str, str]) -> None:
    assert ca_overlap.way_back(deployment(WEBHOOK_SECRET), [cas["old"], cas["old"]],
                               cas["old"], secret_written=0.0, now=1.0) == ca_overlap.WayBack()
