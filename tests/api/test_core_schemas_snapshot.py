"""The committed core/v1 snapshot is what the API server under test actually serves."""

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
    served = json.loads(cluster.kubectl("get", "--raw", core_schemas.OPENAPI_PATH).stdout)
    assert core_schemas.extract(served, version) == snapshot
