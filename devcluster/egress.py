"""Egress addresses: what a pod of the simulated cluster may reach besides the API server.

A pod's network namespace reaches nothing but the API server (netns.py). A test that plays a
service outside the cluster (a proxy, say) listens in the cluster's namespace and declares an
address for it here: every pod started afterwards finds that address inside its namespace,
relayed to the test's listener. Pods already running keep what they had.
"""

from __future__ import annotations

import json
from pathlib import Path

FILE = "egress.json"
Address = tuple[str, int]


def load(state_dir: Path) -> dict[Address, Address]:
    """{address inside every pod: address in the cluster's namespace}."""
    try:
        entries = json.loads((state_dir / FILE).read_text())
    except FileNotFoundError:
        return {}
    return {(e["address"][0], e["address"][1]): (e["target"][0], e["target"][1])
            for e in entries}


def add(state_dir: Path, address: Address, target: Address) -> None:
    """Relay `address` inside every new pod to `target`."""
    _save(state_dir, {**load(state_dir), address: target})


def remove(state_dir: Path, address: Address) -> None:
    _save(state_dir, {k: v for k, v in load(state_dir).items() if k != address})


def _save(state_dir: Path, entries: dict[Address, Address]) -> None:
    partial = state_dir / f".{FILE}.tmp"
    partial.write_text(json.dumps([{"address": list(k), "target": list(v)}
                                   for k, v in sorted(entries.items())]))
    partial.replace(state_dir / FILE)  # the runner never reads half a file
