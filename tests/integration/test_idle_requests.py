"""No polling (issue 34): on plain Kubernetes, without cert-manager, the Prometheus Operator
or OpenShift's config API, an idle operator sends no request outside its periodic resync,
and its resync asks discovery nothing about those three groups: their CRD watches have said
nothing, so nothing about them can have changed. Counted at the API server (its audit log),
for the operator as a process of its own identity, with no ExternalSecretsConfig and with an
installed stack. A CRD that arrives later is still noticed within seconds, by its watch.

Before the fix (2026-11-28; resync 10 s, a 25 s window opened a second after the last pass):
with no ESC, 16 requests outside passes, all discovery GETs of the three groups (the
watches' rechecks of their kinds, 2, 4 and 8 s apart, which followed every start); with the
stack installed, 4 such GETs outside passes and 6 in its 3 resync passes (each asked the
three groups, unless a lookup of the 5 s before had). After: 0 outside passes in both, and
the resync passes send only the CRD annotator's list.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import pytest
import pytest_asyncio

from manager.apply import discovery as discovery_module
from manager.apply.discovery import Discovery
from manager.client.kube import Kube, install_crds
from manager.runtime.operator import load_crds
from tests.e2e.operator_process import assert_log_clean
from tests.integration.conftest import EscHandle, remove_openshift_config
from tests.integration.test_controller_toggles import remove_cert_manager_crds
from tests.integration.test_monitoring import remove_monitoring_crds
from tests.resilience.conftest import (  # noqa: F401 (fixtures)
    AuditLog,
    OperatorProcess,
    audit,
    control_plane,
    esc,
    operator_kubeconfig,
    wait_condition,
)
from tests.waiting import eventually

# Bounds on time: a CRD's arrival is noticed within seconds (hack/run-tests.py runs these last).
pytestmark = pytest.mark.timing

NAMESPACE = "eso-it-idle"
RESYNC_SECONDS = 10.0
WINDOW_SECONDS = 25.0  # two resyncs, whatever the phase of the operator's timer
# The optional APIs, absent here: their discovery documents.
ABSENT_GROUPS = ("/apis/cert-manager.io/v1", "/apis/monitoring.coreos.com/v1",
                 "/apis/config.openshift.io/v1")
# Once a CRD is served, the operator's watch of its kind lists it within this many seconds.
NOTICED_WITHIN = 5.0
PASS_LINE = re.compile(r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) .* action=pass "
                       r"number=(?P<number>\d+) .* seconds=(?P<seconds>[\d.]+).* "
                       r"reasons=(?P<reasons>.*)$", re.MULTILINE)
SLACK = 0.05  # the log's times are to the millisecond


def passes(log: str) -> list[tuple[float, float, str]]:
    """(started, ended, reasons) of every pass logged, in seconds since the epoch."""
    found = []
    for match in PASS_LINE.finditer(log):
        ended = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").timestamp()
        found.append((ended - float(match["seconds"]), ended, match["reasons"]))
    return found


def received(entry: dict[str, Any]) -> float:
    return datetime.fromisoformat(entry["requestReceivedTimestamp"]).timestamp()


def during(entry: dict[str, Any], runs: list[tuple[float, float, str]]) -> bool:
    return any(start - SLACK <= received(entry) <= end + SLACK for start, end, _ in runs)


def line(entry: dict[str, Any]) -> str:
    return f"{entry.get('verb')} {entry.get('requestURI', '').split('?')[0]}"


def discovery_of_absent_groups(entries: list[dict[str, Any]]) -> list[str]:
    return [line(e) for e in entries
            if e.get("verb") == "get" and e.get("requestURI", "").split("?")[0] in ABSENT_GROUPS]


@pytest_asyncio.fixture(loop_scope="session")
async def plain_kubernetes(kube: Kube, crd_dir: Path) -> AsyncIterator[None]:
    """None of the optional APIs is served, before and after the test."""
    await remove_cert_manager_crds(kube)
    await remove_monitoring_crds(kube)
    await remove_openshift_config(kube, crd_dir)
    yield
    await remove_cert_manager_crds(kube)
    await remove_monitoring_crds(kube)


async def idle_window(operator: OperatorProcess, audit_log: AuditLog,
                      capsys: pytest.CaptureFixture[str], what: str) -> None:
    """Count the operator's requests for WINDOW_SECONDS, opened a second after its last pass;
    none outside its passes, and no pass asks about the absent groups."""
    async def quiet() -> None:
        logged = passes(operator.log())
        assert logged, "no pass yet"
        assert time.time() - logged[-1][1] >= 1.0, "a pass ran within the second"

    await eventually(quiet, timeout=60, interval=0.2)
    mark, opened = audit_log.mark(), time.time()
    await asyncio.sleep(WINDOW_SECONDS)
    closed = time.time()
    await asyncio.sleep(1.0)  # a pass that started at the end of the window ends
    runs = [p for p in passes(operator.log()) if opened <= p[0] < closed]
    entries = [e for e in audit_log.entries(mark) if received(e) < closed or during(e, runs)]
    outside = [f"{line(e)} at {received(e) - opened:+.2f} s" for e in entries
               if not during(e, runs)]
    resyncs = [p for p in runs if "periodic resync" in p[2]]
    asked = discovery_of_absent_groups([e for e in entries if during(e, runs)])
    with capsys.disabled():
        print(f"\n[idle, {what}] {WINDOW_SECONDS:g} s: {len(entries)} requests, "
              f"{len(outside)} outside {len(runs)} passes ({len(resyncs)} resyncs); "
              f"discovery of the absent groups in passes: {len(asked)}")
        for start, end, reasons in runs:
            print(f"  pass at {start - opened:+.2f} s ({reasons}): " + ", ".join(
                line(e) for e in entries if during(e, [(start, end, reasons)])))
        for text in outside:
            print(f"  outside passes: {text}")
    assert resyncs, f"no periodic resync in the window: {runs}"
    assert outside == [], f"{len(outside)} requests outside passes: {outside}"
    assert asked == [], f"passes asked discovery about absent groups: {asked}"


async def test_an_idle_operator_without_an_esc_sends_nothing_outside_its_resync(
        *, kube: Kube, operator_kubeconfig: Path, audit: AuditLog,  # noqa: F811 (fixtures)
        plain_kubernetes: None, crd_dir: Path, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert await kube.get("/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs/"
                          "cluster") is None, "an ESC was left behind"
    operator = OperatorProcess(operator_kubeconfig, tmp_path / "operator.log",
                               arguments=("--resync-seconds", f"{RESYNC_SECONDS:g}")).start()
    try:
        await operator.wait_started()
        await idle_window(operator, audit, capsys, "no ESC")

        # cert-manager's and the Prometheus Operator's CRDs arrive: the watches of their kinds
        # list them within seconds of being served.
        mark = audit.mark()
        for directory in ("cert-manager", "prometheus-operator"):
            await install_crds(kube, load_crds(crd_dir / directory),
                               field_manager="integration-tests")
        served_at = time.time()

        async def listed() -> None:
            resources = {(e.get("objectRef") or {}).get("resource") for e in audit.entries(mark)
                         if e.get("verb") in ("list", "watch")
                         and (e.get("responseStatus") or {}).get("code") == 200}
            assert {"certificates", "servicemonitors", "prometheusrules"} <= resources, \
                resources

        await eventually(listed, timeout=30, interval=0.1)
        noticed = time.time() - served_at
        with capsys.disabled():
            print(f"[idle] the new kinds listed {noticed:.2f} s after their CRDs were served")
        assert noticed <= NOTICED_WITHIN
    finally:
        operator.stop()
        assert_log_clean(operator.log(), str(operator.log_path))


async def test_an_idle_operator_with_an_installed_stack_sends_nothing_outside_its_resync(
        *, kube: Kube, operator_kubeconfig: Path, audit: AuditLog,  # noqa: F811 (fixtures)
        esc: EscHandle, plain_kubernetes: None, tmp_path: Path,  # noqa: F811
        capsys: pytest.CaptureFixture[str]) -> None:
    operator = OperatorProcess(operator_kubeconfig, tmp_path / "operator.log",
                               arguments=("--resync-seconds", f"{RESYNC_SECONDS:g}")).start()
    try:
        await operator.wait_started()
        await esc.create({"controllerConfig": {"namespace": NAMESPACE}})
        await wait_condition(kube, "Ready", "True", timeout=120)
        await idle_window(operator, audit, capsys, "stack installed")
    finally:
        operator.stop()
        assert_log_clean(operator.log(), str(operator.log_path))



class Served:
    """No cluster: a server whose discovery document of cert-manager.io/v1 lists `kinds`; it
    counts the GETs."""

    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.gets = 0

    async def request(self, _method: str, _path: str, **_: object) -> dict[str, Any]:
        self.gets += 1
        return {"resources": [{"name": f"{kind.lower()}s", "kind": kind, "namespaced": True}
                              for kind in self.kinds]}


def test_a_crd_watch_vouches_for_the_absence_of_its_groups_kinds(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Discovery asks again about an absent kind only while no CRD watch vouches for its
    group, or while discovery and the watches disagree (the CRD exists, its kind is not
    served yet); a CRD event makes it ask once."""
    monkeypatch.setattr(discovery_module, "ABSENT_TTL", 0.0)  # no memory without a vouch
    api, crd, watch = "cert-manager.io/v1", "certificates.cert-manager.io", object()

    async def scenario() -> list[int]:
        server = Served()
        discovery = Discovery(cast(Kube, server))
        gets = []

        async def lookups(count: int = 3) -> None:
            for _ in range(count):
                await discovery.resolve(api, "Certificate")
            gets.append(server.gets)

        await lookups()  # nothing vouches: each lookup asks
        discovery.crd_watched(watch, crd, exists=False)
        await lookups()  # its CRD watch has listed, no such CRD: no request
        discovery.crd_changed(crd)
        discovery.crd_watched(watch, crd, exists=True)
        await lookups()  # the CRD came, its kind not served yet: each lookup asks
        server.kinds = ["Certificate"]
        await lookups()  # served: the first lookup asks, the others find it
        assert await discovery.resolve(api, "Certificate") is not None
        discovery.crd_changed(crd)
        discovery.crd_watched(watch, crd, exists=False)
        server.kinds = []
        await lookups()  # gone: one request, then the watch vouches again
        discovery.crd_unwatched(watch)
        await lookups()  # the watch stopped: each lookup asks again
        return gets

    assert asyncio.run(scenario()) == [3, 3, 6, 7, 8, 11]
