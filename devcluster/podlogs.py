"""Container logs the API server serves: `kubectl logs` on the simulated cluster.

The API server answers `pods/log` by asking the node's kubelet (`/containerLogs/...` at the
Node's InternalIP and `status.daemonEndpoints.kubeletEndpoint.Port`). kwok serves that
endpoint for its fake nodes (its `--node-port`, TLS with a throw-away certificate, which the
API server does not verify without `--kubelet-certificate-authority`), reading the files that
a `Logs` object (kwok.x-k8s.io/v1alpha1, named and namespaced like the pod, `--enable-crds=Logs`)
names, in the CRI log format a kubelet writes: `<RFC 3339 time> <stream> F <line>`.

The runner keeps each container's raw output in `<container>.log` (every run appended, as
tests read it) and copies it line by line, as it arrives, into `<container>.cri.log`, the
current run's log; a restart moves that one to `<container>.previous.cri.log`, the one
previous instance a kubelet keeps (`kubectl logs --previous`). stdout and stderr share one
file here, so every line is labelled `stdout`. A line reaches `kubectl logs` up to 0.1 s
after the process wrote it (the supervisor's loop).
"""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from manager.versions import KWOK_VERSION

KWOK_API_VERSION = "kwok.x-k8s.io/v1alpha1"
LOGS_CRD_FILE = "kustomize/crd/bases/kwok.x-k8s.io_logs.yaml"


@cache
def logs_crd_path() -> Path:
    """kwok's `Logs` CRD, from its module in the Go module cache (hack/build-tool.sh kwok put
    it there)."""
    found = subprocess.run(["go", "mod", "download", "-json", f"sigs.k8s.io/kwok@{KWOK_VERSION}"],
                           capture_output=True, text=True, check=False, cwd="/")
    try:
        directory = json.loads(found.stdout)["Dir"]
    except (ValueError, KeyError):
        raise RuntimeError(f"kwok's module is not in the Go module cache: {found.stderr}"
                           ) from None
    return Path(directory) / LOGS_CRD_FILE


def logs_object(pod: dict[str, Any], directory: Path, containers: list[str]) -> dict[str, Any]:
    """The `Logs` object that points kwok at the pod's log files; the pod owns it."""
    meta = pod["metadata"]
    return {
        "apiVersion": KWOK_API_VERSION, "kind": "Logs",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"],
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": meta["name"],
                                          "uid": meta["uid"]}]},
        "spec": {"logs": [{"containers": [name],
                           "logsFile": str(directory / f"{name}.cri.log"),
                           "previousLogsFile": str(directory / f"{name}.previous.cri.log")}
                          for name in containers]},
    }


def cri_line(line: bytes, moment: datetime | None = None) -> bytes:
    stamp = (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.encode() + b" stdout F " + line + b"\n"


class CriLog:
    """One container's CRI log files, fed from its raw output file."""

    def __init__(self, directory: Path, container: str):
        self.raw = directory / f"{container}.log"
        self.current = directory / f"{container}.cri.log"
        self.previous = directory / f"{container}.previous.cri.log"
        self._offset = 0
        self._pending = b""

    def start_run(self) -> None:
        """Before a process starts: the last run's log becomes the previous one."""
        self.pump(final=True)
        if self.current.exists():
            self.current.replace(self.previous)
        self._offset = self.raw.stat().st_size if self.raw.exists() else 0
        self._pending = b""
        self.current.touch()

    def pump(self, *, final: bool = False) -> None:
        """Copy the complete lines written since the last call (with `final`, the rest)."""
        try:
            with self.raw.open("rb") as raw:
                raw.seek(self._offset)
                data = raw.read()
        except OSError:
            return
        self._offset += len(data)
        *lines, self._pending = (self._pending + data).split(b"\n")
        if final and self._pending:
            lines.append(self._pending)
            self._pending = b""
        if lines:
            with self.current.open("ab") as out:
                out.write(b"".join(cri_line(line) for line in lines))
