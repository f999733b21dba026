"""Shared fixtures: a real cluster for every test that asks for one.

By default the simulated cluster (devcluster: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler built from the published Go modules, two kwok nodes, and the pod runner that
runs the operand's real binaries) is started once per session. With USE_EXISTING_CLUSTER=1
the same tests run against the cluster in $KUBECONFIG instead (kind, OpenShift).
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import pytest_asyncio

from devcluster import controlplane
from devcluster.cluster import SimulatedCluster
from devcluster.controlplane import ensure_tool
from manager.client.kube import Kube
from tests import samplers

UNIT_TESTS = Path(__file__).parent / "unit"
_SESSION: dict[str, object] = {"version": None, "started": time.monotonic()}


@dataclass(frozen=True)
class Cluster:
    """What tests need to reach the API server under test."""

    kubeconfig: Path
    kubectl_path: str
    version: str
    simulated: SimulatedCluster | None

    @property
    def local(self) -> controlplane.LocalControlPlane | None:
        """The local control plane (restarts, audit log), when the cluster is simulated."""
        return self.simulated.plane if self.simulated else None

    def kubectl(self, *args: str, check: bool = True, input: str | None = None,
                ) -> subprocess.CompletedProcess[str]:
        """Run kubectl against this cluster, as the admin."""
        return subprocess.run(
            [self.kubectl_path, f"--kubeconfig={self.kubeconfig}", *args],
            capture_output=True, text=True, check=check, input=input, timeout=120,
        )


def _existing_cluster() -> Cluster:
    kubeconfig = Path(os.environ.get("KUBECONFIG", Path.home() / ".kube" / "config"))
    kubectl_path = os.environ.get("KUBECTL", "kubectl")
    version = subprocess.run(
        [kubectl_path, f"--kubeconfig={kubeconfig}", "version", "-o", "json"],
        capture_output=True, text=True, check=True,
    ).stdout
    return Cluster(kubeconfig, kubectl_path, version, None)


@dataclass
class CertManager:
    """cert-manager's controller and CA injector (CERT_MANAGER_VERSION, built from its
    release tree, the same version as the CRDs) as processes with the admin's kubeconfig:
    the operator only consumes cert-manager's API, so how cert-manager itself is deployed is
    not under test."""

    cluster: Cluster
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self) -> None:
        bin_dir = ensure_tool("cert-manager")
        kubeconfig = f"--kubeconfig={self.cluster.kubeconfig}"
        logs = self.cluster.kubeconfig.parent
        for name, args in (("cert-manager-controller", [
                "--cluster-resource-namespace=kube-system",
                "--metrics-listen-address=127.0.0.1:0"]),
                           ("cert-manager-cainjector", [])):
            with (logs / f"{name}.log").open("ab") as log:
                self.processes.append(subprocess.Popen(  # killed with this process, too
                    ["setpriv", "--pdeathsig=KILL", "--", str(bin_dir / name), kubeconfig,
                     "--leader-elect=false", *args],
                    # v1.20's CA injector builds its client from controller-runtime's
                    # configuration, which reads $KUBECONFIG, not the flag.
                    env={**os.environ, "KUBECONFIG": str(self.cluster.kubeconfig)},
                    stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL))

    def stop(self) -> None:
        for process in self.processes:
            process.terminate()
        for process in self.processes:
            process.wait(15)
        self.processes.clear()


@pytest.fixture
def cert_manager(cluster: Cluster) -> Iterator[CertManager]:
    if cluster.simulated is None:
        pytest.skip("on an existing cluster, install cert-manager yourself")
    running = CertManager(cluster)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if os.environ.get("USE_EXISTING_CLUSTER") == "1":
        yield _existing_cluster()
        return
    controlplane.require_loopback_only_network()
    # The audit log lets tests count the operator's requests at the server (tests/resilience).
    simulated = SimulatedCluster(tmp_path_factory.mktemp("cluster"), audit=True)
    with simulated:
        plane = simulated.plane
        _SESSION["version"] = plane.version
        yield Cluster(plane.kubeconfig, str(plane.kubectl), plane.version, simulated)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def kube(cluster: Cluster) -> AsyncIterator[Kube]:
    """An admin client of the operator's own client class (raw JSON, any kind)."""
    admin = Kube.connect(cluster.kubeconfig)
    yield admin
    await admin.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "cluster" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.cluster)


def pytest_runtest_setup(item: pytest.Item) -> None:
    # The unit tests drive samplers with scripted clients: no lane can starve them.
    samplers.TIMED_TEST["marked"] = (item.get_closest_marker("timing") is not None
                                     or item.path.is_relative_to(UNIT_TESTS))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if _SESSION.get("verdict"):
        terminalreporter.write_line(str(_SESSION["verdict"]), red=True)
    outcomes = terminalreporter.getreports("passed") + terminalreporter.getreports("failed")
    reports = [r for r in outcomes if r.when == "call" and "cluster" in r.keywords]
    if _SESSION["version"]:
        terminalreporter.write_line(
            f"simulated cluster: kube-apiserver {_SESSION['version']}; "
            f"{len(reports)} tests ran against it"
        )


def pytest_sessionfinish(session: pytest.Session) -> None:
    _skips_fail_under_ci(session)
    _write_disruption_results(session)


def _skips_fail_under_ci(session: pytest.Session) -> None:
    """Under CI=true a skipped test fails the run: CI installs everything every test needs, so
    a skip there is a test that did not run, and a green run must not hide it."""
    if os.environ.get("CI") != "true" or session.exitstatus not in (0, 5):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = [r for r in (reporter.stats.get("skipped", []) if reporter else [])
               if getattr(r, "skipped", False)]
    if skipped:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
        names = ", ".join(sorted({r.nodeid for r in skipped}))
        _SESSION["verdict"] = f"CI=true: {len(skipped)} skipped tests fail the run: {names}"


def _write_disruption_results(session: pytest.Session) -> None:
    """With DISRUPTION_RESULTS=PATH (`make bench-disruption`), a session that passed writes the
    figures its disruption scenarios measured to PATH (tests/disruption/figures.py)."""
    path = os.environ.get("DISRUPTION_RESULTS")
    if not path:
        return
    # Imported only when asked for: it imports the integration suite's conftest.
    from manager import versions  # noqa: PLC0415
    from tests.disruption import figures  # noqa: PLC0415

    if session.exitstatus != 0 or not figures.FIGURES:
        print(f"\n{path} not written: "
              + ("the session did not pass" if session.exitstatus != 0 else "no scenario measured"))
        return
    figures.write_results(Path(path), kube_version=str(_SESSION["version"]
                                                       or versions.KUBE_VERSION),
                          tests=session.testscollected - session.testsfailed,
                          seconds=time.monotonic() - float(str(_SESSION["started"])))
    print(f"\n{path}: the figures of {len(figures.FIGURES)} scenarios")
