"""The committed Kubernetes schema snapshot is what the API server under test serves."""

from __future__ import annotations

import json

from manager.api import core_schemas
from tests.conftest import Cluster


def test_snapshot_matches_the_servers_openapi(cluster: Cluster) -> None:
    snapshot = core_schemas.load_snapshot()
    version = json.loads(cluster.kubectl("get", "--raw", "/version").stdout)["gitVersion"]
    assert version == snapshot["kubernetesVersion"], (
        "the control plane runs another Kubernetes version than the snapshot; run "
        "`python -m manager generate --refresh-core-schemas`")
    served = {path: json.loads(cluster.kubectl("get", "--raw", path).stdout)
              for path in core_schemas.OPENAPI_PATHS}
    assert core_schemas.extract(served, version) == snapshot
