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

Run with `-s` to see the timeline and the checks.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from manager.olm import identity
from manager.paths import REPO_ROOT
from tests.olm.conftest import CSVS, ESC_SPEC, FIELD_MANAGER, NAMESPACE, SUBSCRIPTION, OlmCluster
from tests.upgrade.snapshot import Renderings, judge, release_environment, render_release
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

STORE = "/apis/external-secrets.io/v1/namespaces/{namespace}/secretstores/team-store"
OPERATOR_DEPLOYMENT = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments/{identity.DEPLOYMENT}"


def ready(esc: dict[str, Any]) -> dict[str, Any]:
    return next(c for c in esc["status"]["conditions"] if c["type"] == "Ready")


async def test_olm_upgrades_the_previous_release_in_place(
        olm_cluster: OlmCluster, previous_release: tuple[str, Path]) -> None:
    tag, previous_source = previous_release
    cluster, kube = olm_cluster, olm_cluster.kube
    print(f"\nupgrade through OLM from {tag} ({previous_source}) to the current code")

    # The previous release, from a catalog that holds only it.
    [previous] = await cluster.publish(previous_source)
    cluster.mark(f"catalog served: {previous.name}")
    await cluster.subscribe(previous)
    cluster.mark("Subscription created")
    await cluster.succeeded(previous)
    cluster.mark(f"CSV {previous.name} Succeeded")
    await eventually(lambda: kube.request("GET", ESM_PATH), 120,
                     what="the operator to create the ESM")
    await kube.merge_patch(ESM_PATH, {"spec": ESM_SPEC}, field_manager=FIELD_MANAGER)
    await cluster.configure()
    sampler = synced_sampler(kube, ESC_SPEC["controllerConfig"]["namespace"])
    await sampler.start()
    try:
        try:
            before = await settled(kube)
            esc_before = await kube.request("GET", ESC_PATH)
            deployment_before = await kube.request("GET", OPERATOR_DEPLOYMENT)

            # The catalog gains the current release.
            [_, current] = await cluster.publish(previous_source, REPO_ROOT)
            cluster.mark(f"catalog served: {previous.name}, {current.name}")
            csv = await cluster.succeeded(current)
            cluster.mark(f"CSV {current.name} Succeeded")
            assert csv["spec"]["replaces"] == previous.name, csv["spec"].get("replaces")

            async def previous_csv_gone() -> None:
                assert await kube.get(f"{CSVS}/{previous.name}") is None, "still there"

            await eventually(previous_csv_gone, 120, what=f"OLM to delete CSV {previous.name}")
            cluster.mark(f"CSV {previous.name} deleted")
            subscription = await kube.request("GET", SUBSCRIPTION)
            assert subscription["status"]["state"] == "AtLatestKnown", subscription["status"]
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
        forbidden = [line for line in log.splitlines() if "forbidden" in line.lower()]
        assert not forbidden, "\n".join(forbidden)
        print(f"  checked: the operator's Deployment was updated in place; only {current.name} "
              f"runs, 0 Forbidden in its {len(log.splitlines())} log lines")

        # The operand and the user's objects, judged as the process upgrade test judges them.
        assert esc_after["metadata"]["uid"] == esc_before["metadata"]["uid"]
        stayed = ready(esc_before)["lastTransitionTime"] == ready(esc_after)["lastTransitionTime"]
        print(f"  checked: ExternalSecretsConfig Ready=True for generation "
              f"{esc_after['metadata']['generation']} ({'stayed' if stayed else 'returned to'} "
              "True across the upgrade)")
        previous_rendering, current_rendering = (
            render_release(source, ESC_SPEC, ESM_SPEC, release_environment(source))
            for source in (previous_source, REPO_ROOT))
        renderings = Renderings(tag, previous_rendering, current_rendering)
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
