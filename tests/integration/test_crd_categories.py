"""A namespaced command on the operand's category never reaches the operator's singletons.

The operand's CRDs share the category `external-secrets`; if the operator's two CRDs had it
too, `kubectl delete external-secrets --all -n team-a` would delete ExternalSecretsConfig/cluster
and ExternalSecretsManager/cluster. Observed with a server-side dry run, as the issue did, in
a namespace that holds a user's SecretStore and ExternalSecret: the command must succeed and
name those (the category resolved and the deletion reached its objects), not the singletons.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from manager.client.kube import Kube
from tests.conftest import Cluster
from tests.integration.conftest import ESC_API, ESM_PATH, USER_NAMESPACE, UserObjects

ESC_BODY = {"apiVersion": "operator.openshift.io/v1alpha1", "kind": "ExternalSecretsConfig",
            "metadata": {"name": "cluster"}, "spec": {}}
ESM_BODY = {**ESC_BODY, "kind": "ExternalSecretsManager"}


@pytest_asyncio.fixture(loop_scope="session")
async def singletons(kube: Kube, operator_crds: None, operand_crds: None,
                     ) -> AsyncIterator[None]:
    """Both singletons exist (no operator runs: nothing else is created)."""
    await kube.delete(f"{ESC_API}/cluster")
    await kube.apply(f"{ESC_API}/cluster", ESC_BODY, field_manager="integration-tests")
    await kube.apply(ESM_PATH, ESM_BODY, field_manager="integration-tests")
    yield
    await kube.delete(f"{ESC_API}/cluster")


async def test_delete_of_the_operand_category_spares_the_singletons(
        cluster: Cluster, singletons: None, user_objects: UserObjects) -> None:
    deleted = cluster.kubectl("delete", "external-secrets", "--all", "-n", USER_NAMESPACE,
                              "--dry-run=server", "-o", "name", check=False)
    assert deleted.returncode == 0, deleted
    # The category resolved, and the deletion reached the user's objects in the namespace...
    assert {"externalsecret.external-secrets.io/user-external-secret",
            "secretstore.external-secrets.io/user-store"} <= set(deleted.stdout.split()), deleted
    # ...and not the operator's cluster-scoped singletons.
    assert "operator.openshift.io" not in deleted.stdout + deleted.stderr, deleted

    # The operator's own category still finds both.
    listed = cluster.kubectl("get", "external-secrets-operator", "-o", "name").stdout.split()
    assert "externalsecretsconfig.operator.openshift.io/cluster" in listed
    assert "externalsecretsmanager.operator.openshift.io/cluster" in listed
