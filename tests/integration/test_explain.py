"""`kubectl explain` is enough to use the API: ranges, defaults and effects, from the served
CRDs."""

from __future__ import annotations

from tests.conftest import Cluster
from tests.integration.conftest import eventually


async def test_kubectl_explain_gives_range_default_and_effect(cluster: Cluster,
                                                             operator_crds: None) -> None:
    async def explain(field: str) -> str:
        # The API server publishes a new CRD's OpenAPI a moment after it is served.
        result = cluster.kubectl("explain", field, check=False)
        assert result.returncode == 0, result.stderr
        return " ".join(result.stdout.split())

    log_level = await eventually(lambda: explain("esc.spec.appConfig.logLevel"), timeout=30)
    for text in ("Range 1 to 5", "give `info`", "give `debug`", "Default: 1"):
        assert text in log_level, log_level
    state = await explain("esc.spec.managementState")
    for text in ("Unmanaged", "drift is reported", "Removed", "Default: Managed"):
        assert text in state, state
    namespace = await explain("esc.spec.controllerConfig.namespace")
    assert "To move the operand, delete the ExternalSecretsConfig" in namespace
    assert "inspect" in await explain("esc.status.failure")
