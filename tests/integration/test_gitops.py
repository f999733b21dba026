"""GitOps without loops (issue 37, item 7; docs/gitops.md).

The Argo CD health checks of docs/gitops/ are installed into an `argocd-cm` ConfigMap by the
command docs/gitops.md gives, read back from it and run as Argo CD runs a health script: a
Lua 5.1 interpreter (lupa, from PyPI; Argo CD's own is gopher-lua, a Lua 5.1) without the
string, math, io, os, coroutine and debug libraries, the object as the global `obj`, a table
with a valid `status` and a string `message` as the answer. They judge the ExternalSecretsConfig
and the ExternalSecretsManager as the operator, running in this process, really wrote them:
before any status, during the rollout, Ready, Degraded (an Issuer that does not exist; an
unknown feature in the ESM) and for an older generation.

The loop test applies one sparse ExternalSecretsConfig ten times as Argo CD's self-heal does
(server-side apply, its own field manager, no force) over a Ready stack while the operator
runs a pass every second, and proves that nothing moves: no request the operator sends is a
write, and no resourceVersion, generation or managedFields entry of the operator changes on
the ESC, the ESM or any operand object. Twice: with the ESC created by Argo CD's first sync
(every apply is then a no-op at the server), and with an ESC an administrator created that
Argo CD adopts (its first apply adds its annotation and field manager, a real change that
wakes the operator). It prints the figures docs/gitops.md quotes.
"""

from __future__ import annotations

import os
import re
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import pytest
from lupa import lua51

from manager.client.kube import APPLY_PATCH, Kube, install_crds
from manager.names import CRD_COLLECTION, FIELD_MANAGER
from manager.paths import REPO_ROOT
from manager.runtime.operator import load_crds
from tests.conftest import Cluster
from tests.integration.conftest import (
    ESC_API,
    ESM_PATH,
    EscHandle,
    OperatorThread,
    StartOperator,
    UserObjects,
    esm_entries,
    eventually,
    managed_objects,
    wait_condition,
    wait_installed,
)
from tests.integration.test_controller_toggles import remove_cert_manager_crds

GITOPS_DOC = REPO_ROOT / "docs" / "gitops.md"
HEALTH_KEY = "resource.customizations.health.operator.openshift.io_{kind}"
KINDS = ("ExternalSecretsConfig", "ExternalSecretsManager")
ARGOCD_NAMESPACE = "argocd"
ARGOCD_CM = f"/api/v1/namespaces/{ARGOCD_NAMESPACE}/configmaps/argocd-cm"

# The statuses Argo CD accepts from a health script (gitops-engine's HealthStatusCode); any
# other answer becomes Unknown with "Lua returned an invalid health status".
ARGO_HEALTH_STATUSES = frozenset({"Healthy", "Progressing", "Degraded", "Suspended",
                                  "Missing", "Unknown"})
# Argo CD opens only the base, package and table libraries (and a reduced os) for a script
# whose useOpenLibs is off, the default for scripts in argocd-cm. Stricter here: no os.
SANDBOX = ("string, math, io, os, coroutine, debug = nil, nil, nil, nil, nil, nil\n"
           "getmetatable('').__index = nil")

HEALTH_NAMESPACE = "eso-it-gitops-health"
LOOP_NAMESPACE = "eso-it-gitops-loop-{origin}"  # one per variant: a deleted one lingers
ARGOCD_MANAGER = "argocd-controller"
APPLIES = 10
ESC_KEY = "ExternalSecretsConfig cluster"
ESM_KEY = "ExternalSecretsManager cluster"
MODIFIED_ESC = "modified ExternalSecretsConfig cluster"  # the reason its watch gives a pass
PASS_RECORD = re.compile(r"^action=pass number=(?P<number>\d+) result=(?P<result>\S+) "
                         r"writes=(?P<writes>\d+) ")


# --- the health scripts, as Argo CD runs them -------------------------------------------------


def run_health(script: str, obj: dict[str, Any]) -> tuple[str, str]:
    """(status, message) of `script` for `obj`, under Argo CD's contract (module doc)."""
    lua = lua51.LuaRuntime(register_eval=False, register_builtins=False)
    lua.execute(SANDBOX)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    started = time.monotonic()
    answer = lua.execute(script)
    assert time.monotonic() - started < 1.0, "Argo CD stops a health script after 1 s"
    assert lua51.lua_type(answer) == "table", f"a health script returns a table, not {answer!r}"
    status, message = answer["status"], answer["message"]
    assert status in ARGO_HEALTH_STATUSES, f"Argo CD would say Unknown for {status!r}"
    assert message is None or isinstance(message, str), repr(message)
    return str(status), message or ""


def documented_install_command() -> str:
    """The shell block of docs/gitops.md that writes the scripts into argocd-cm."""
    blocks = re.findall(r"```sh\n(.*?)```", GITOPS_DOC.read_text(), flags=re.DOTALL)
    found = [block for block in blocks if HEALTH_KEY.format(kind=KINDS[0]) in block]
    assert len(found) == 1, f"docs/gitops.md should hold one such block, not {len(found)}"
    return found[0]


async def install_health_checks(cluster: Cluster, kube: Kube) -> dict[str, str]:
    """An argocd-cm as Argo CD's install leaves it, the documented command run against it
    (kubectl as `kubectl`, from the repository root), and the scripts read back by kind."""
    await kube.apply(f"/api/v1/namespaces/{ARGOCD_NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ARGOCD_NAMESPACE}},
        field_manager="argocd-install")
    await kube.apply(ARGOCD_CM, {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "argocd-cm", "namespace": ARGOCD_NAMESPACE,
                     "labels": {"app.kubernetes.io/name": "argocd-cm",
                                "app.kubernetes.io/part-of": "argocd"}},
        "data": {"timeout.reconciliation": "180s"}}, field_manager="argocd-install")
    with tempfile.TemporaryDirectory(prefix="kubectl-") as bin_dir:
        (Path(bin_dir) / "kubectl").symlink_to(cluster.kubectl_path)
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}",
               "KUBECONFIG": str(cluster.kubeconfig)}
        result = subprocess.run(["bash", "-euo", "pipefail", "-c", documented_install_command()],
                                cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                                timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    data = (await kube.request("GET", ARGOCD_CM))["data"]
    assert data["timeout.reconciliation"] == "180s", "the command replaced argocd-cm's data"
    scripts = {kind: data[HEALTH_KEY.format(kind=kind)] for kind in KINDS}
    for kind, script in scripts.items():
        path = REPO_ROOT / "docs" / "gitops" / "operator.openshift.io" / kind / "health.lua"
        assert script == path.read_text(), kind
    return scripts


class Verdicts:
    """Runs the scripts on objects as read, and keeps each verdict for the test's output."""

    def __init__(self, scripts: dict[str, str]):
        self.scripts = scripts
        self.seen: list[str] = []

    def expect(self, obj: dict[str, Any], status: str, *parts: str) -> str:
        kind, when = obj["kind"], f"generation {obj['metadata'].get('generation')}"
        verdict, message = run_health(self.scripts[kind], obj)
        self.seen.append(f"{kind} ({when}): {verdict}: {message}")
        assert verdict == status, f"{kind}: {verdict}: {message}\n{obj.get('status')}"
        for part in parts:
            assert part in message, f"{kind}: {message!r} lacks {part!r}"
        return message


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    conditions = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == kind), {})


def entry_condition(esm: dict[str, Any], name: str, kind: str) -> dict[str, Any]:
    entry = esm_entries(esm).get(name) or {}
    return next((c for c in entry.get("conditions") or [] if c["type"] == kind), {})


async def both(esc: EscHandle, kube: Kube) -> tuple[dict[str, Any], dict[str, Any]]:
    return await esc.get(), await kube.request("GET", ESM_PATH)


async def test_health_scripts_judge_what_the_operator_writes(
        kube: Kube, cluster: Cluster, esc: EscHandle, start_operator: StartOperator, *,
        user_objects: UserObjects, crd_dir: Path) -> None:
    verdicts = Verdicts(await install_health_checks(cluster, kube))
    try:
        await _judge_each_state(kube, esc, start_operator, crd_dir, verdicts)
    finally:
        print("\n".join(["", "health.lua verdicts on the objects as written:", *verdicts.seen]))
        await kube.merge_patch(ESM_PATH, {"spec": {"features": None}},
                               field_manager="integration-tests")
        await remove_cert_manager_crds(kube)
        await kube.delete(f"/api/v1/namespaces/{ARGOCD_NAMESPACE}")
    await user_objects.assert_untouched(kube)


async def _judge_each_state(kube: Kube, esc: EscHandle, start_operator: StartOperator,
                            crd_dir: Path, verdicts: Verdicts) -> None:
    # Created, no operator yet: no status at all.
    created = await esc.create({"controllerConfig": {"namespace": HEALTH_NAMESPACE}})
    verdicts.expect(created, "Progressing", "waiting for the operator")

    # The operator installs the operand: both objects as written while it rolls out.
    operator = await start_operator()

    async def rolling_out() -> tuple[dict[str, Any], dict[str, Any]]:
        live, esm = await both(esc, kube)
        assert condition(live, "Progressing").get("status") == "True", live.get("status")
        controller = entry_condition(esm, "external-secrets-controller", "Progressing")
        assert controller.get("status") == "True", esm.get("status")
        return live, esm

    live, esm = await eventually(rolling_out, timeout=60, interval=0.05)
    verdicts.expect(live, "Progressing", "WaitingForOperand")
    verdicts.expect(esm, "Progressing", "external-secrets-controller: WaitingForOperand")

    # Ready.
    await wait_installed(esc, HEALTH_NAMESPACE)

    async def ready() -> tuple[dict[str, Any], dict[str, Any]]:
        live, esm = await both(esc, kube)
        assert (esm.get("status") or {}).get("controllersReady") == "3/3", esm.get("status")
        return live, esm

    live, esm = await eventually(ready)
    verdicts.expect(live, "Healthy", "Reconciled")
    verdicts.expect(esm, "Healthy", "controllers Ready: 3/3")

    # Not upgradeable (an operand CRD stores a version it no longer serves): a reason to
    # hold an upgrade, not a health problem. Both stay Healthy.
    stored = f"{CRD_COLLECTION}/externalsecrets.external-secrets.io/status"
    await kube.merge_patch(stored, {"status": {"storedVersions": ["v1beta1", "v1"]}},
                           field_manager="integration-tests")
    try:
        async def held() -> tuple[dict[str, Any], dict[str, Any]]:
            live, esm = await eventually(ready)
            upgradeable = condition(live, "Upgradeable")
            assert (upgradeable.get("status"), upgradeable.get("reason")) == (
                "False", "StoredVersionsNotServed"), live.get("status")
            return live, esm

        live, esm = await eventually(held)
        verdicts.expect(live, "Healthy", "Reconciled")
        verdicts.expect(esm, "Healthy", "controllers Ready: 3/3")
    finally:
        await kube.merge_patch(stored, {"status": {"storedVersions": ["v1"]}},
                               field_manager="integration-tests")

    # The ESM's own problem: a feature this operator does not have. The ESC stays Healthy.
    await kube.merge_patch(ESM_PATH, {"spec": {"features": [
        {"name": "NoSuchFeature", "enabled": "true"}]}}, field_manager="integration-tests")

    async def unknown_feature() -> dict[str, Any]:
        esm = await kube.request("GET", ESM_PATH)
        degraded = entry_condition(esm, "external-secrets-manager", "Degraded")
        assert degraded.get("reason") == "UnknownFeature", esm.get("status")
        return esm

    verdicts.expect(await eventually(unknown_feature), "Degraded",
                    "external-secrets-manager: UnknownFeature", "NoSuchFeature")
    verdicts.expect(await esc.get(), "Healthy")
    await kube.merge_patch(ESM_PATH, {"spec": {"features": None}},
                           field_manager="integration-tests")
    verdicts.expect((await eventually(ready))[1], "Healthy", "controllers Ready: 3/3")

    # Degraded: cert-manager's API is served, the Issuer the spec names does not exist.
    await install_crds(kube, load_crds(crd_dir / "cert-manager"), field_manager="cert-manager")
    await esc.patch_spec({"appConfig": {"certManagerConfig": {
        "enabled": "true", "issuerRef": {"name": "no-such-issuer", "kind": "Issuer"}}}})
    await wait_condition(esc, "Degraded", "True", reason="IssuerNotFound")

    async def degraded() -> tuple[dict[str, Any], dict[str, Any]]:
        live, esm = await both(esc, kube)
        controller = entry_condition(esm, "external-secrets-controller", "Degraded")
        assert controller.get("reason") == "IssuerNotFound", esm.get("status")
        return live, esm

    live, esm = await eventually(degraded)
    verdicts.expect(live, "Degraded", "IssuerNotFound", "issuerRef")
    verdicts.expect(esm, "Degraded", "external-secrets-controller: IssuerNotFound")

    # A status for an older generation: the operator stopped, both specs changed since.
    await operator.stop()
    await esc.patch_spec({"appConfig": {"logLevel": 2}})
    await kube.merge_patch(ESM_PATH, {"spec": {"features": [
        {"name": "OperandMonitoring", "enabled": "false"}]}}, field_manager="integration-tests")
    live, esm = await both(esc, kube)
    assert condition(live, "Degraded").get("status") == "True", "still the Degraded status"
    generation = live["metadata"]["generation"]
    verdicts.expect(live, "Progressing", f"generation {generation - 1}",
                    f"spec is at {generation}")
    verdicts.expect(esm, "Progressing", f"spec is at {esm['metadata']['generation']}")


# --- the loop -------------------------------------------------------------------------------


def sparse_esc(namespace: str) -> dict[str, Any]:
    """The ExternalSecretsConfig as a Git repository holds it, with the tracking annotation
    Argo CD adds to what it applies."""
    return {"apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
            "metadata": {"name": "cluster", "annotations": {
                "argocd.argoproj.io/tracking-id":
                    "external-secrets:operator.openshift.io/ExternalSecretsConfig:/cluster"}},
            "spec": {"controllerConfig": {"namespace": namespace}}}


async def argo_apply(kube: Kube, namespace: str) -> dict[str, Any]:
    """One sync as Argo CD's self-heal does it with ServerSideApply=true: its own field
    manager, no force (a field another manager owns with another value is a conflict)."""
    return await kube.request("PATCH", f"{ESC_API}/cluster", body=sparse_esc(namespace),
                              content_type=APPLY_PATCH,
                              query={"fieldManager": ARGOCD_MANAGER, "force": "false"})


Snapshot = dict[str, tuple[str, int | None, tuple[tuple[str, str, str], ...]]]


async def snapshot(kube: Kube, namespace: str) -> Snapshot:
    """For the ESC, the ESM and every operand object: resourceVersion, generation and the
    operator's managedFields entries (operation, subresource, time)."""
    objects = {f"{kind} {ns}/{name}".replace(" /", " "): obj
               for (kind, ns, name), obj in (await managed_objects(kube, namespace)).items()}
    objects[ESC_KEY] = await kube.request("GET", f"{ESC_API}/cluster")
    objects[ESM_KEY] = await kube.request("GET", ESM_PATH)
    return {key: (obj["metadata"]["resourceVersion"], obj["metadata"].get("generation"),
                  tuple((e.get("operation", ""), e.get("subresource", ""), e.get("time", ""))
                        for e in obj["metadata"].get("managedFields") or []
                        if e.get("manager") == FIELD_MANAGER))
            for key, obj in objects.items()}


async def at_rest(operator: OperatorThread, timeout: float = 60.0) -> None:
    """Until two whole passes in a row sent no write (the passes run every second here)."""
    deadline = time.monotonic() + timeout
    while True:
        writes, passes = len(operator.log.writes()), operator.passes
        await operator.wait_until(lambda n=passes: operator.passes >= n + 2, 30, "two passes")
        if len(operator.log.writes()) == writes:
            return
        assert time.monotonic() < deadline, "the operator kept writing after Ready"


def logged_passes(operator: OperatorThread, after: int) -> list[tuple[int, str, int]]:
    """(number, result, writes) of each pass numbered above `after`, from its log line."""
    found = []
    for record in list(operator.log.records):
        match = PASS_RECORD.match(record.getMessage())
        if match and int(match["number"]) > after:
            found.append((int(match["number"]), match["result"], int(match["writes"])))
    return sorted(found)


@pytest.mark.parametrize("origin", ["created", "adopted"])
async def test_gitops_self_heal_applies_make_the_operator_write_nothing(
        kube: Kube, esc: EscHandle, start_operator: StartOperator, *,
        user_objects: UserObjects, origin: str) -> None:
    """Argo CD's first sync creates the ESC; or an administrator created it and Argo CD takes
    it over, so that its first apply adds the tracking annotation and its field manager (a
    write of Argo CD's that wakes the operator; the nine after it are no-ops)."""
    namespace = LOOP_NAMESPACE.format(origin=origin)
    operator = await start_operator(resync_seconds=1.0)
    if origin == "created":
        created = await argo_apply(kube, namespace)
    else:
        created = await esc.create(sparse_esc(namespace)["spec"])
    await wait_installed(esc, namespace)
    await at_rest(operator)

    before = await snapshot(kube, namespace)
    operator.log.forget_requests()
    first_pass = operator.passes
    versions = []
    for _ in range(APPLIES):
        versions.append((await argo_apply(kube, namespace))["metadata"]["resourceVersion"])
        applied_at = operator.passes
        # A whole pass runs after each apply, so there is something to answer it with.
        await operator.wait_until(lambda n=applied_at: operator.passes >= n + 2, 30,
                                  "a pass after the apply")
    writes = operator.log.writes()
    after = await snapshot(kube, namespace)
    passes = logged_passes(operator, first_pass)
    woken = [n for n, reasons in operator.log.pass_reasons().items()
             if n > first_pass and MODIFIED_ESC in reasons]

    live = await esc.get()
    others = [key for key in before if key != ESC_KEY]
    moved = [key for key in others if before[key][0] != after[key][0]]
    generations = [key for key in before if before[key][1] != after[key][1]]
    print(f"\nGitOps loop ({origin}): {APPLIES} server-side applies by {ARGOCD_MANAGER} "
          f"(force=false) of the same ESC over a Ready stack; ESC resourceVersion before "
          f"{before[ESC_KEY][0]}, after each apply {versions}; passes woken by the ESC's "
          f"change: {len(woken)}; operator passes meanwhile: {len(passes)} (results "
          f"{sorted({p[1] for p in passes})}, logged writes {sum(p[2] for p in passes)}); "
          f"operator write requests: {len(writes)}; objects compared: {len(before)} (ESC, ESM "
          f"and {len(before) - 2} operand objects); resourceVersions moved besides the ESC's: "
          f"{len(moved)}; generations moved: {len(generations)} (ESC generation "
          f"{live['metadata']['generation']}, ESM generation {after[ESM_KEY][1]})")

    assert writes == [], writes
    assert len(passes) >= APPLIES, passes
    assert {p[1] for p in passes} == {"Ready"}, passes
    assert sum(p[2] for p in passes) == 0, passes
    assert len(before) > 20, sorted(before)
    assert {key: after[key] for key in others} == {key: before[key] for key in others}, {
        key: (before[key], after[key]) for key in others if before[key] != after[key]}
    # The ESC: the same generation and the same entries of the operator; its resourceVersion
    # moves only with Argo CD's own first write when Argo CD adopts it.
    assert after[ESC_KEY][1:] == before[ESC_KEY][1:], (before[ESC_KEY], after[ESC_KEY])
    if origin == "created":
        assert set(versions) == {before[ESC_KEY][0]}, versions
        assert woken == []
    else:
        assert versions[0] != before[ESC_KEY][0], versions
        assert set(versions[1:]) == {versions[0]}, versions
        assert woken, operator.log.pass_reasons()
    # The operator owns only the ESC's status: nothing Argo CD applies is ever its field.
    entries = live["metadata"]["managedFields"]
    assert {e.get("subresource", "") for e in entries
            if e["manager"] == FIELD_MANAGER} == {"status"}, entries
    assert any(e["manager"] == ARGOCD_MANAGER and e["operation"] == "Apply" for e in entries)
    assert live["metadata"]["generation"] == created["metadata"]["generation"]
    await user_objects.assert_untouched(kube)
