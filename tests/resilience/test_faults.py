"""Faults: the operator killed mid-install, the API server restarted under it, a writer that
keeps fighting over a managed field, and a hand edit in the middle of a pass.

Every operator is a separate process authenticated as its own ServiceAccount (see
conftest.py); its requests are counted in the API server's audit log.
"""

from __future__ import annotations

import asyncio
import os
import random
import re
import time
from typing import Any

from devcluster.controlplane import LocalControlPlane
from manager.client.kube import Kube
from tests.integration.conftest import EscHandle, eventually, managed_objects
from tests.resilience.conftest import (
    AuditLog,
    Key,
    OperatorProcess,
    Rounds,
    StartOperator,
    delete_esc,
    resource_of,
    restart_apiserver,
    retry_api,
    snapshot,
    wait_condition,
    wait_quiet,
    wipe_operand,
    writes,
)

KILL_ROUNDS = 10
# The kill delays are random but reproducible: RESILIENCE_SEED=<n> replays a run.
SEED = int(os.environ.get("RESILIENCE_SEED", "20250515"))

DEPLOYMENTS = "/apis/apps/v1/namespaces/{namespace}/deployments"


def spec_for(namespace: str, **labels: str) -> dict[str, Any]:
    """A spec that renders every default component plus the proxy's ConfigMap."""
    return {"controllerConfig": {"namespace": namespace,
                                 "labels": {"resilience": "faults", **labels}},
            "appConfig": {"proxy": {"httpProxy": "http://proxy.invalid:3128",
                                    "noProxy": ".cluster.local"}}}


def differences(reference: dict[Key, Any], found: dict[Key, Any]) -> list[str]:
    problems = [f"missing {key}" for key in sorted(set(reference) - set(found))]
    problems += [f"leftover or duplicate {key}" for key in sorted(set(found) - set(reference))]
    problems += [f"differs {key}" for key in sorted(set(reference) & set(found))
                 if reference[key] != found[key]]
    return problems


async def converged_to(kube: Kube, namespace: str, reference: dict[Key, Any],
                       timeout: float = 45.0) -> None:
    async def check() -> None:
        problems = differences(reference, await snapshot(kube, namespace))
        assert not problems, problems

    await eventually(check, timeout, interval=0.1)


# --- 1. SIGKILL at random points of an install ------------------------------------------------


async def test_killed_mid_install_converges_to_a_clean_install(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, audit: AuditLog,
        rounds: Rounds) -> None:
    namespace = "eso-rs-kill"
    spec = spec_for(namespace)

    # The reference: a clean, uninterrupted install; the time until every object is applied
    # (not until the operand is available) sizes the kill window.
    await wipe_operand(kube, namespace)
    clean = await start_operator()
    created = time.monotonic()
    await esc.create(spec)
    await wait_condition(kube, "Ready", "False", reason="WaitingForOperand")
    install_seconds = time.monotonic() - created
    await wait_condition(kube, "Ready", "True")
    await wait_quiet(audit)
    clean.stop()
    reference = await snapshot(kube, namespace)
    assert len(reference) >= 25, sorted(reference)
    window = max(0.5, install_seconds * 1.2)
    rng = random.Random(SEED)  # noqa: S311  (timing, not cryptography)
    rounds.add(f"seed={SEED} clean install {install_seconds:.2f}s, {len(reference)} objects, "
               f"kill window 0..{window:.2f}s after the ESC is created")

    partial_kills = 0
    for number in range(1, KILL_ROUNDS + 1):
        await delete_esc(kube)
        await wipe_operand(kube, namespace)
        victim = await start_operator()
        delay = rng.uniform(0.0, window)
        await esc.create(spec)
        await asyncio.sleep(delay)  # the random kill point is the point of this test
        victim.kill()
        at_kill = len(await snapshot(kube, namespace))
        partial_kills += 0 < at_kill < len(reference)

        survivor = await start_operator()
        with_restart = time.monotonic()
        await converged_to(kube, namespace, reference)
        await wait_condition(kube, "Ready", "True")
        rounds.add(f"round {number}: SIGKILL {delay:.3f}s after the ESC was created, "
                   f"{at_kill}/{len(reference)} objects existed; the restarted operator "
                   f"converged in {time.monotonic() - with_restart:.2f}s")
        survivor.stop()
    # The window is sized so that most kills land in the middle of the install.
    assert partial_kills >= 3, rounds.lines


# --- 2. the API server restarted under a running operator -------------------------------------


async def test_operator_survives_an_api_server_restart(
        *, kube: Kube, esc: EscHandle, start_operator: StartOperator, audit: AuditLog,
        control_plane: LocalControlPlane, rounds: Rounds) -> None:
    namespace = "eso-rs-apiserver"
    operator = await start_operator()
    await esc.create(spec_for(namespace))
    await wait_condition(kube, "Ready", "True")
    await wait_quiet(audit)
    reference = await snapshot(kube, namespace)
    pid = operator.pid

    with_restart = time.monotonic()
    await asyncio.to_thread(restart_apiserver, control_plane, 2.0, 1.0)
    rounds.add(f"kube-apiserver down for 2s, back after {time.monotonic() - with_restart:.1f}s")
    assert operator.alive, operator.log()[-3000:]

    # Drift after the restart is repaired by the same process: the child watches recovered.
    webhook = f"{DEPLOYMENTS.format(namespace=namespace)}/external-secrets-webhook"
    await retry_api(lambda: kube.delete(webhook))
    repaired = time.monotonic()
    await converged_to(kube, namespace, reference)
    rounds.add(f"deleted Deployment re-created {time.monotonic() - repaired:.1f}s later")

    # A spec change reaches every object: kopf's watch of the ESC recovered too.
    await retry_api(lambda: esc.patch_spec({"controllerConfig": {"labels": {"after": "restart"}}}))
    await wait_condition(kube, "Ready", "True")

    async def relabelled() -> None:
        found = await managed_objects(kube, namespace)
        assert set(found) == set(reference)
        stale = [key for key, obj in found.items()
                 if obj["metadata"]["labels"].get("after") != "restart"]
        assert not stale, stale

    await eventually(relabelled, timeout=30)
    assert operator.alive, operator.log()[-3000:]
    assert operator.pid == pid


# --- 3. another writer fights over a managed field --------------------------------------------

FIGHT_SECONDS = 10.0
FIGHT_INTERVAL = 0.1
MIN_PASS_INTERVAL = 0.2  # manager.runtime.queue.MIN_PASS_INTERVAL_SECONDS
# The slow round: a writer far slower than the limiter, so the limiter bounds nothing and the
# passes must be paid for by the foreign writes themselves (see the round's comments).
SLOW_WRITES = 6
SLOW_INTERVAL = 1.5
# Beyond an idle pass: the repair, its Event, a status write of each custom resource, and
# the pods of the Deployment mid-rollout (read to say why it is not available yet).
PER_PASS_EXTRA = 5


def requests_of(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Requests that did work (a watch is logged only when it ends)."""
    return [e for e in entries if e["verb"] != "watch"]


def pass_count(log: str) -> int:
    """Passes in a stretch of the operator's log: one line each (`action=pass`). The audit log
    cannot count them: a pass that finds everything converged sends no request."""
    return log.count("action=pass ")


async def passes_settled(operator: OperatorProcess, quiet: float = 1.0,
                         timeout: float = 10.0) -> None:
    """Until no pass has ended for `quiet` seconds."""
    deadline = time.monotonic() + timeout
    count, since = pass_count(operator.log()), time.monotonic()
    while time.monotonic() - since < quiet:
        assert time.monotonic() < deadline, "the operator kept running passes"
        await asyncio.sleep(0.1)
        if (now := pass_count(operator.log())) != count:
            count, since = now, time.monotonic()


def pass_writes(log: str) -> list[int]:
    """The number of objects each pass in a stretch of the log wrote, in order."""
    return [int(found) for found in re.findall(r"action=pass number=\d+ result=\S+ writes=(\d+)",
                                               log)]


async def test_a_fighting_writer_causes_no_hot_loop(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, audit: AuditLog,
        rounds: Rounds) -> None:
    namespace = "eso-rs-fight"
    operator = await start_operator()
    await esc.create(spec_for(namespace))
    await wait_condition(kube, "Ready", "True")
    await wait_quiet(audit)
    controller = f"{DEPLOYMENTS.format(namespace=namespace)}/external-secrets"
    desired_args = (await kube.request("GET", controller))["spec"]["template"]["spec"][
        "containers"][0]["args"]

    # An idle pass (triggered by a harmless foreign label; nothing to repair) is the unit.
    start, log_start = audit.mark(), len(operator.log())
    await kube.merge_patch(f"/api/v1/namespaces/{namespace}/serviceaccounts/external-secrets",
                           {"metadata": {"labels": {"touched-by": "resilience"}}},
                           field_manager="resilience-writer")

    async def a_pass_ran() -> None:
        assert pass_count(operator.log()[log_start:]) >= 1

    await eventually(a_pass_ran, timeout=10)
    await wait_quiet(audit)
    idle = requests_of(audit.entries(start, audit.mark()))
    assert pass_count(operator.log()[log_start:]) == 1, operator.log()[log_start:]
    assert not writes(idle), idle
    idle_pass = len(idle)

    start, log_start = audit.mark(), len(operator.log())
    began = time.monotonic()
    foreign = 0
    while time.monotonic() - began < FIGHT_SECONDS:
        await kube.request(
            "PATCH", controller, query={"fieldManager": "resilience-writer"},
            body=[{"op": "replace", "path": "/spec/template/spec/containers/0/args/0",
                   "value": f"--concurrent={foreign + 2}"}],
            content_type="application/json-patch+json")
        foreign += 1
        await asyncio.sleep(FIGHT_INTERVAL)
    elapsed = time.monotonic() - began
    fight_end, fight_log = audit.mark(), operator.log()[log_start:]

    async def restored() -> None:
        live = await kube.request("GET", controller)
        assert live["spec"]["template"]["spec"]["containers"][0]["args"] == desired_args

    await eventually(restored, timeout=15)
    settled = time.monotonic()
    # The restored template rolls out once more; passes follow that rollout until Ready.
    await wait_condition(kube, "Ready", "True", timeout=60)
    await wait_quiet(audit, quiet=1.0, timeout=10)  # the pass its own write triggers, then none
    settle_seconds = time.monotonic() - settled
    quiet_start = audit.mark()
    await asyncio.sleep(3.0)  # an idle operator sends nothing: this interval is the measurement
    after = requests_of(audit.entries(quiet_start, audit.mark()))

    fight = requests_of(audit.entries(start, fight_end))
    passes = pass_count(fight_log)
    repairs = [e for e in writes(fight) if resource_of(e) == ("apps", "deployments")
               and e["objectRef"].get("name") == "external-secrets"]
    rounds.add(f"{foreign} foreign writes in {elapsed:.1f}s; the operator ran {passes} passes "
               f"({passes / elapsed:.1f}/s), sent {len(fight)} requests "
               f"({len(fight) / elapsed:.0f}/s, an idle pass is {idle_pass}), "
               f"{len(writes(fight))} writes, {len(repairs)} to the contested Deployment; "
               f"Ready and quiet {settle_seconds:.1f}s after the writer stopped, then "
               f"{len(after)} requests in 3s")
    assert len(repairs) >= 2, rounds.lines  # it did keep repairing...
    # ...once per pass at most; a pass in flight when the window closed wrote its repair in
    # the window but logs its line after it.
    assert len(repairs) <= min(passes + 1, foreign), rounds.lines
    assert passes <= elapsed / MIN_PASS_INTERVAL + 1, rounds.lines
    # The same pass in flight sent its requests in the window too: one pass more.
    assert len(fight) <= (passes + 1) * (idle_pass + PER_PASS_EXTRA), rounds.lines
    assert after == [], after

    # The slow round. Above, the limiter alone would hold `passes` down even if every pass
    # caused another. Here a writer changes a label the operator sets on a ServiceAccount (no
    # status, no controller writes it back: nothing else moves) once every SLOW_INTERVAL,
    # 7.5 times the limiter's interval, each write after the previous repair, so the limiter
    # bounds nothing and every pass must be paid for by a foreign write. Each may cost two:
    # the repair, and the pass that the watch event of the operator's own repair write starts
    # (the watch cannot tell whose write it saw; that pass finds everything converged and
    # writes nothing). One pass more is slack for an unrelated event in the ~9 s (an operand
    # pod's readiness changing). An idle pass takes about 50 ms, so an operator that woke
    # itself again after a pass would run about 5 passes a second, 7 per foreign write.
    account = f"/api/v1/namespaces/{namespace}/serviceaccounts/external-secrets"

    async def relabelled() -> None:
        live = await kube.request("GET", account)
        assert live["metadata"]["labels"]["resilience"] == "faults", live["metadata"]

    await wait_quiet(audit)
    start, log_start = audit.mark(), len(operator.log())
    for number in range(SLOW_WRITES):  # each write lands after the previous one was repaired
        written_at = time.monotonic()
        await kube.merge_patch(account, {"metadata": {"labels": {"resilience": f"fight-{number}"}}},
                               field_manager="resilience-writer")
        await eventually(relabelled, timeout=15)
        await asyncio.sleep(max(0.0, written_at + SLOW_INTERVAL - time.monotonic()))
    await wait_quiet(audit, quiet=1.0, timeout=10)
    await passes_settled(operator)  # an echo pass sends no request: watch the log too
    slow_log = operator.log()[log_start:]
    slow = requests_of(audit.entries(start, audit.mark()))
    slow_repairs = [e for e in writes(slow) if resource_of(e) == ("", "serviceaccounts")
                    and e["objectRef"].get("name") == "external-secrets"]
    written = pass_writes(slow_log)
    repair_passes = sum(1 for count in written if count)
    rounds.add(f"slow round: {SLOW_WRITES} foreign writes {SLOW_INTERVAL}s apart; the operator "
               f"ran {len(written)} passes ({repair_passes} wrote, "
               f"{len(written) - repair_passes} found nothing to do), "
               f"{len(slow_repairs)} writes to the contested ServiceAccount")
    assert len(written) == pass_count(slow_log), slow_log  # every pass line was parsed
    assert len(slow_repairs) == SLOW_WRITES, rounds.lines  # each write repaired, once
    assert repair_passes <= SLOW_WRITES, rounds.lines
    assert len(written) - repair_passes <= repair_passes + 1, rounds.lines  # only the echoes
    assert len(written) <= 2 * SLOW_WRITES + 1, rounds.lines
    assert operator.alive



# --- 4. a hand edit while a pass runs ---------------------------------------------------------


async def test_hand_edit_during_a_pass_ends_converged(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, audit: AuditLog,
        rounds: Rounds) -> None:
    """Edits land while a pass is re-applying everything: one on an object that pass already
    applied (it cannot see it), one on an object it has yet to apply, one deletion. The
    watch events that arrive during the pass must yield one more pass that repairs all."""
    namespace = "eso-rs-midpass"
    operator = await start_operator()
    await esc.create(spec_for(namespace))
    await wait_condition(kube, "Ready", "True")
    await wait_quiet(audit)
    objects = len(await snapshot(kube, namespace))

    log_start = len(operator.log())
    await esc.patch_spec({"controllerConfig": {"labels": {"pass": "two"}}})
    deadline = time.monotonic() + 20
    while "action=apply result=updated kind=ServiceAccount" not in operator.log()[log_start:]:
        assert time.monotonic() < deadline, operator.log()[-2000:]
        await asyncio.sleep(0.005)
    applied_before_edit = operator.log()[log_start:].count("action=apply result=updated")
    base = f"/api/v1/namespaces/{namespace}"
    await kube.merge_patch(f"{base}/serviceaccounts/external-secrets",
                           {"metadata": {"labels": {"pass": "hand"}}}, field_manager="by-hand")
    await kube.request(
        "PATCH", f"{DEPLOYMENTS.format(namespace=namespace)}/external-secrets-webhook",
        query={"fieldManager": "by-hand"},
        body=[{"op": "replace", "path": "/spec/template/spec/containers/0/args/1",
               "value": "--dns-name=attacker.example.com"}],
        content_type="application/json-patch+json")
    await kube.delete(f"/apis/networking.k8s.io/v1/namespaces/{namespace}/networkpolicies/"
                      "deny-all-traffic")
    applied_at_edit = operator.log()[log_start:].count("action=apply result=updated")
    rounds.add(f"edits made after {applied_before_edit} and done after {applied_at_edit} of "
               f"{objects} objects were re-applied by the pass")
    assert applied_at_edit < objects - 2, "the edits did not land during the pass"

    async def converged() -> None:
        found = await managed_objects(kube, namespace)
        assert len(found) == objects
        wrong = [key for key, obj in found.items()
                 if obj["metadata"]["labels"].get("pass") != "two"]
        assert not wrong, wrong
        webhook = found[("Deployment", namespace, "external-secrets-webhook")]
        args = webhook["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--dns-name=external-secrets-webhook.{namespace}.svc" in args, args

    await eventually(converged, timeout=30)
    await wait_condition(kube, "Ready", "True")
    await wait_quiet(audit)
    await converged()
    assert operator.alive
