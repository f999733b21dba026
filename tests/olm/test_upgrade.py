"""Upgrade through OLM: the catalog gains the current release, OLM replaces the previous one.

The previous release (hack/upgrade-test.sh previous: the newest tag `v*` not on HEAD, or
hack/releases.txt) is checked out and installed from a catalog that holds only it: its own
bundle, its operator running from its own source tree. It installs and configures the
operand and a user's secret syncs. Then the catalog gains the current release (a channel
entry that replaces the previous one, with a skipRange), as a new catalog image would, and:

- the Subscription moves to the current CSV, which replaces the previous one (deleted), and
  the operator's Deployment is updated in place: the current code runs, with the current
  CSV's permissions (0 Forbidden in its log);
- the verdict of the process upgrade test (tests/upgrade): no operand object re-created, no
  Deployment rolled unless the template the current code renders differs from the previous
  release's, the user's objects untouched, the synced Secret never deleted or emptied and
  still following its store;
- the ExternalSecretsConfig stays, or returns to, Ready=True for its generation.

The admission and sync samplers of the disruption suite (tests/disruption/figures.py) run
around each upgrade, which ends when the operand is whole and the ESC Ready again: refused
admissions, the sync gap, how long Ready was not True. The upgrade from the previous release
runs two webhook replicas and their PodDisruptionBudget, so no admission may be refused
(test_upgrade_image.py upgrades with one replica and measures the refusals). Two more
upgrades follow on the same cluster, each to a release rebuilt from the current tree at a
higher version (devcluster/catalog.py `rebuild`), so both are real OLM upgrades that replace
the operator's pod: one where no operand Deployment changes (only the version differs), and
one whose CSV names a rebuilt operand image (by digest), so every operand Deployment rolls.
With two replicas no admission may be refused.

Run with `-s` to see the timeline, the checks and the figures.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

import pytest

from devcluster import catalog
from manager import __version__, versions
from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.disruption.figures import (
    Kind,
    admissions_refused,
    assert_no_admission_refused,
    measure,
    wait_whole,
)
from tests.e2e.operator_process import assert_log_clean
from tests.olm.conftest import (
    CSVS,
    ESC_SPEC,
    FIELD_MANAGER,
    NAMESPACE,
    OPERAND_NAMESPACE,
    SUBSCRIPTION,
    Catalog,
    OlmCluster,
)
from tests.upgrade.snapshot import (
    Renderings,
    judge,
    release_environment,
    render_release,
    take_snapshot,
)
from tests.upgrade.test_upgrade import (
    ESC_PATH,
    ESM_PATH,
    ESM_SPEC,
    assert_user_objects_untouched,
    ready_for_current_generation,
    settled,
    synced_sampler,
    synced_value,
)
from tests.waiting import eventually

# Bounds on time and on refusals: run after the busiest neighbours (hack/run-tests.py).
pytestmark = pytest.mark.timing

STORE = "/apis/external-secrets.io/v1/namespaces/{namespace}/secretstores/team-store"
OPERATOR_DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{identity.DEPLOYMENT}"
OPERAND_PODS = f"/api/v1/namespaces/{OPERAND_NAMESPACE}/pods"
WEBHOOK_BUDGET = (f"/apis/policy/v1/namespaces/{OPERAND_NAMESPACE}/poddisruptionbudgets/"
                  "external-secrets-webhook")
# The releases after the current one, rebuilt from its tree: higher versions (semver
# pre-releases of the next patch), never published anywhere.
_MAJOR, _MINOR, _PATCH = (int(part) for part in __version__.split("-")[0].split("."))
NEXT_VERSION = f"{_MAJOR}.{_MINOR}.{_PATCH + 1}-rebuild.1"
NEXT_ROLLING_VERSION = f"{_MAJOR}.{_MINOR}.{_PATCH + 1}-rebuild.2"
# A rebuilt operand image: the pinned one, pinned by a digest (the simulated cluster runs an
# image by its repository, so the same binary runs; the pod templates change).
REBUILT_OPERAND_IMAGE = (f"{versions.EXTERNAL_SECRETS_IMAGE}@sha256:"
                         f"{hashlib.sha256(b'a rebuilt operand image').hexdigest()}")


def ready(esc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in esc["status"]["conditions"] if c["type"] == "Ready")


async def test_olm_upgrades_the_previous_release_in_place(
        olm_cluster: OlmCluster, previous_release: tuple[str, Path]) -> None:
    tag, previous_source = previous_release
    cluster = olm_cluster
    print(f"\nupgrade through OLM from {tag} ({previous_source}) to the current code")

    # The previous release, from a catalog that holds only it.
    [previous] = await cluster.publish(previous_source)
    cluster.mark(f"catalog served: {previous.name}")
    await cluster.subscribe(previous)
    cluster.mark("Subscription created")
    await configured(cluster, previous)
    # Two webhook replicas and their budget on the previous release (0.2.0 has the setting):
    # then no admission may be refused (test_upgrade_image.py measures one replica).
    await two_webhook_replicas(cluster)
    cluster.mark("two webhook replicas and their budget")
    # The catalog gains the current release.
    upgrade = await cluster.build_catalog(previous_source, REPO_ROOT)
    await upgraded_and_judged(cluster, previous_release, previous, upgrade, webhooks=2)


async def configured(cluster: OlmCluster, previous: catalog.Release) -> None:
    """Once subscribed to `previous`: its CSV Succeeded, the ESM its operator created given
    the scenario's spec, the ESC Ready and a user's secret synced."""
    await cluster.succeeded(previous)
    cluster.mark(f"CSV {previous.name} Succeeded")
    await eventually(lambda: cluster.kube.request("GET", ESM_PATH), 120,
                     what="the operator to create the ESM")
    await cluster.kube.merge_patch(ESM_PATH, {"spec": ESM_SPEC}, field_manager=FIELD_MANAGER)
    await cluster.configure()


async def upgraded_and_judged(cluster: OlmCluster, previous_release: tuple[str, Path],
                              previous: catalog.Release, upgrade: Catalog,
                              *, image: str | None = None, webhooks: int = 1,
                              ) -> catalog.Release:
    """Serve `upgrade` (the catalog that adds the current release; from its catalog `image`
    if given) with the samplers watching, until OLM has upgraded `previous` in place; judge
    the operator, the operand and the user's objects. With two `webhooks` replicas (and
    their budget) no admission may be refused; with one, the refusals are measured. The
    current release."""
    tag, previous_source = previous_release
    kube = cluster.kube
    current = upgrade.releases[-1]
    # v0.1.0 reports Ready before the webhook's pod is: the samplers start on a whole stack.
    await wait_whole(cluster.watched())
    sampler = synced_sampler(kube, ESC_SPEC["controllerConfig"]["namespace"])
    await sampler.start()
    try:
        try:
            before = await settled(kube)
            esc_before = await kube.request("GET", ESC_PATH)
            deployment_before = await kube.request("GET", OPERATOR_DEPLOYMENT)
            from_images = " (catalog, bundle and operator images)" if image else ""
            renderings = Renderings(tag, *(
                render_release(source, ESC_SPEC, ESM_SPEC, release_environment(source))
                for source in (previous_source, REPO_ROOT)))
            # The bounds follow what the upgrade does to the controller: a new pod template
            # rolls it, and the new process waits out the operand's leader-election lease.
            rolls = (renderings.previous.deployment_specs["external-secrets"]["template"]
                     != renderings.current.deployment_specs["external-secrets"]["template"])
            async with measure(cluster.watched(), f"OLM upgrade from the previous release "
                               f"({tag}) to the current one ({identity.OPERATOR_VERSION})"
                               f"{from_images}: operator pod replaced, "
                               + ("every operand Deployment rolls" if rolls
                                  else "the webhook Deployment rolls"),
                               kind=Kind.OLM_UPGRADE_NEW_CONTROLLER if rolls
                               else Kind.OLM_UPGRADE) as notes:
                await upgrade_through_olm(cluster, previous, current, upgrade, notes, image=image)
                notes.append(f"{webhooks} webhook replica{'s' if webhooks > 1 else ''}")
            if webhooks > 1:
                assert_no_admission_refused()
            else:
                print(f"FIGURES   1 replica: measured, not bounded; {admissions_refused()} "
                      "refused")
            esc_after = await ready_for_current_generation(kube)
            cluster.mark("ExternalSecretsConfig Ready=True after the upgrade")
            after = await settled(kube)
        finally:
            print(cluster.timeline())

        # The operator: its Deployment updated in place, now running the current code alone.
        deployment = await kube.request("GET", OPERATOR_DEPLOYMENT)
        assert deployment["metadata"]["uid"] == deployment_before["metadata"]["uid"]
        template = deployment["spec"]["template"]["spec"]["containers"][0]
        assert template["image"] in current.operator_images, template["image"]
        processes = cluster.simulated.processes(NAMESPACE, identity.CONTAINER)
        assert [p.env["OPERATOR_IMAGE_VERSION"] for p in processes] == [identity.OPERATOR_VERSION]
        log = cluster.operator_log(current)
        assert "action=pass" in log, log[-3000:]
        assert_log_clean(log, f"{current.name}'s operator", forbidden=True)
        print(f"  checked: the operator's Deployment was updated in place; only {current.name} "
              f"runs, no crash, traceback or Forbidden in its {len(log.splitlines())} log lines")

        # The operand and the user's objects, judged as the process upgrade test judges them.
        assert esc_after["metadata"]["uid"] == esc_before["metadata"]["uid"]
        stayed = ready(esc_before)["lastTransitionTime"] == ready(esc_after)["lastTransitionTime"]
        print(f"  checked: ExternalSecretsConfig Ready=True for generation "
              f"{esc_after['metadata']['generation']} ({'stayed' if stayed else 'returned to'} "
              "True across the upgrade)")
        verdict = judge(before, after, renderings)
        for note in verdict.notes:
            print(f"  checked: {note}")
        assert not verdict.problems, "\n".join(verdict.problems)
        await assert_user_objects_untouched(kube, cluster.user_objects)
        namespace = ESC_SPEC["controllerConfig"]["namespace"]
        await kube.merge_patch(STORE.format(namespace=namespace), {"spec": {"provider": {"fake": {
            "data": [{"key": "k", "value": "after-the-upgrade"}]}}}}, field_manager=FIELD_MANAGER)
        await eventually(lambda: synced_value(kube, "after-the-upgrade"), 30,
                         what="the synced Secret to follow its store")
        await sampler.stop(expect_value="after-the-upgrade")
        assert not sampler.harm, sampler.harm
        print(f"  checked: {len(cluster.user_objects)} user objects untouched; the synced Secret "
              f"was never deleted or emptied (watched throughout: {sampler.summary()}) and "
              "follows its store after the upgrade")
    finally:
        await sampler.discard()
    return current


async def upgrade_through_olm(cluster: OlmCluster, previous: catalog.Release,
                              release: catalog.Release, built: Catalog, notes: list[str], *,
                              image: str | None = None) -> None:
    """Serve `built` (a catalog that adds `release`; from its catalog `image` if given: the
    CatalogSource's spec.image switched to it), then until OLM has replaced `previous` by
    `release` and `release`'s operator has finished a pass over the operand."""
    kube = cluster.kube
    started = time.monotonic()
    await (cluster.serve_image(built, image) if image else cluster.serve(built))
    cluster.mark(f"catalog {'image ' if image else ''}served: "
                 f"{', '.join(r.name for r in built.releases)}")
    csv = await cluster.succeeded(release)
    cluster.mark(f"CSV {release.name} Succeeded")
    notes.append(f"CSV Succeeded after {time.monotonic() - started:.1f} s")
    assert csv["spec"]["replaces"] == previous.name, csv["spec"].get("replaces")

    async def previous_csv_gone() -> None:
        assert await kube.get(f"{CSVS}/{previous.name}") is None, "still there"

    await eventually(previous_csv_gone, 120, what=f"OLM to delete CSV {previous.name}")
    cluster.mark(f"CSV {previous.name} deleted")
    subscription = await kube.request("GET", SUBSCRIPTION)
    assert subscription["status"]["state"] == "AtLatestKnown", subscription["status"]
    assert subscription["status"]["installedCSV"] == release.name, subscription["status"]
    await cluster.operator_passed(release)
    cluster.mark(f"{release.name}'s operator passed")


async def installed(cluster: OlmCluster, source: Path) -> catalog.Release:
    """The release of `source`, installed by the test before (the tests of this module run
    in order, on one cluster)."""
    subscription = await cluster.kube.request("GET", SUBSCRIPTION)
    installed_csv = (subscription.get("status") or {}).get("installedCSV")
    try:
        release = cluster.release(source)
    except KeyError:
        release = None
    if release is None or installed_csv != release.name:
        pytest.fail(f"needs the release of {source} installed by the test before "
                    f"(installed: {installed_csv})", pytrace=False)
    return release


async def two_webhook_replicas(cluster: OlmCluster) -> None:
    """componentConfigs: two webhook replicas, and so their PodDisruptionBudget
    (maxUnavailable 1), as the disruption suite configures them; until the disruption
    controller allows one disruption."""
    watched = cluster.watched()
    await watched.esc.patch_spec({"controllerConfig": {"componentConfigs": [
        {"componentName": "Webhook", "deploymentConfigs": {"replicas": 2}}]}})

    async def budget_filled() -> None:
        budget = await cluster.kube.get(WEBHOOK_BUDGET)
        assert budget is not None, "no PodDisruptionBudget yet"
        status = budget.get("status") or {}
        assert status.get("expectedPods") == 2, status
        assert status.get("disruptionsAllowed") == 1, status

    await eventually(budget_filled, 90, what="the webhook's budget to allow one disruption")
    await ready_for_current_generation(cluster.kube)


async def operand_pods(cluster: OlmCluster) -> dict[str, str]:
    """uid -> name of every operand pod."""
    return {p["metadata"]["uid"]: p["metadata"]["name"]
            for p in (await cluster.kube.list(OPERAND_PODS))["items"]}


async def test_olm_upgrade_with_two_webhooks_where_no_deployment_changes(
        olm_cluster: OlmCluster, previous_release: tuple[str, Path]) -> None:
    """The current release replaced through OLM by a rebuild of it at a higher version: the
    operator's pod is replaced, the operand's Deployments render the same and do not roll."""
    cluster, kube = olm_cluster, olm_cluster.kube
    current = await installed(cluster, REPO_ROOT)
    await two_webhook_replicas(cluster)
    cluster.mark("two webhook replicas and their budget")
    source = await cluster.rebuilt(NEXT_VERSION)
    built = await cluster.build_catalog(previous_release[1], REPO_ROOT, source)
    following = built.releases[-1]
    before = await take_snapshot(kube, OPERAND_NAMESPACE)
    pods_before = await operand_pods(cluster)
    operator_before = cluster.simulated.processes(NAMESPACE, identity.CONTAINER)
    async with measure(cluster.watched(), f"OLM upgrade from the current release to a rebuild "
                       f"of it ({NEXT_VERSION}): operator pod replaced, no operand Deployment "
                       "changes", kind=Kind.OLM_UPGRADE) as notes:
        await upgrade_through_olm(cluster, current, following, built, notes)
    print(cluster.timeline())
    assert_no_admission_refused()
    after = await take_snapshot(kube, OPERAND_NAMESPACE)
    for name, old in before.deployments.items():
        new = after.deployments[name]
        assert (new.uid, new.generation, new.template_hash) == (
            old.uid, old.generation, old.template_hash), f"Deployment {name} changed"
    assert await operand_pods(cluster) == pods_before, "an operand pod was replaced"
    operator_after = cluster.simulated.processes(NAMESPACE, identity.CONTAINER)
    assert {p.pod for p in operator_after}.isdisjoint({p.pod for p in operator_before})
    print(f"  checked: the operator's pod was replaced; {len(before.deployments)} Deployments "
          f"kept their generation and template, {len(pods_before)} operand pods their uid")


async def test_olm_upgrade_with_two_webhooks_where_every_deployment_rolls(
        olm_cluster: OlmCluster, previous_release: tuple[str, Path]) -> None:
    """Then a rebuild whose CSV names a rebuilt operand image (RELATED_IMAGE_EXTERNAL_SECRETS
    by digest): the operator's pod is replaced, and every operand Deployment rolls."""
    cluster, kube = olm_cluster, olm_cluster.kube
    previous_source = cluster.workdir / "rebuilt" / NEXT_VERSION
    current = await installed(cluster, previous_source)
    source = await cluster.rebuilt(NEXT_ROLLING_VERSION, REBUILT_OPERAND_IMAGE)
    built = await cluster.build_catalog(previous_release[1], REPO_ROOT, previous_source, source)
    following = built.releases[-1]
    pods_before = await operand_pods(cluster)
    async with measure(cluster.watched(), f"OLM upgrade to a release ({NEXT_ROLLING_VERSION}) "
                       "whose CSV names a rebuilt operand image: operator pod replaced, every "
                       "operand Deployment rolls", kind=Kind.OLM_UPGRADE_NEW_CONTROLLER) as notes:
        await upgrade_through_olm(cluster, current, following, built, notes)
    print(cluster.timeline())
    assert_no_admission_refused()
    deployments = (await kube.list(f"/apis/apps/v1/namespaces/{OPERAND_NAMESPACE}/deployments",
                                   ))["items"]
    images = {d["metadata"]["name"]: d["spec"]["template"]["spec"]["containers"][0]["image"]
              for d in deployments}
    assert set(images.values()) == {REBUILT_OPERAND_IMAGE}, images
    left = set(pods_before) & set(await operand_pods(cluster))
    assert not left, f"operand pods not replaced: {[pods_before[uid] for uid in left]}"
    print(f"  checked: {len(images)} Deployments rolled onto the rebuilt image; none of the "
          f"{len(pods_before)} operand pods is left")
