"""Credentials that change while the operator runs, against the real API server.

In a pod the ServiceAccount token is a bound token that the kubelet replaces about hourly
(and the simulated cluster's pod runner does the same). The operator must use the new token
from the next request on, and a 401 must lead to reading the credential again, not to a
crash loop. Who the API server thinks we are comes from a SelfSubjectReview.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from manager.client.credentials import Credentials, TokenFile, load_credentials
from manager.client.kube import ApiError, Kube
from tests.conftest import Cluster

NAMESPACE = "eso-it-credentials"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"


async def whoami(kube: Kube) -> str:
    review = await kube.request("POST", WHOAMI, body={
        "apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    return str(review["status"]["userInfo"]["username"])


@pytest_asyncio.fixture(loop_scope="session")
async def tokens(kube: Kube) -> AsyncIterator[dict[str, str]]:
    """Fresh tokens of two ServiceAccounts, by name."""
    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        field_manager="integration-tests")
    found = {}
    for name in ("first", "second"):
        accounts = f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts"
        await kube.apply(f"{accounts}/{name}", {"apiVersion": "v1", "kind": "ServiceAccount",
                                                "metadata": {"name": name}},
                         field_manager="integration-tests")
        found[name] = (await kube.request("POST", f"{accounts}/{name}/token", body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": 3600}}))["status"]["token"]
    yield found


def token_file_credentials(cluster: Cluster, token_file: Path) -> Credentials:
    """The admin kubeconfig's cluster, authenticated by whatever token the file holds."""
    admin = load_credentials(cluster.kubeconfig)
    return Credentials(admin.server, ca_data=admin.ca_data, ca_file=admin.ca_file,
                       token_file=TokenFile(token_file), source="a token file")


async def test_a_replaced_token_file_is_used_from_the_next_request_on(
        cluster: Cluster, tokens: dict[str, str], tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(tokens["first"])
    kube = Kube(token_file_credentials(cluster, token_file))
    try:
        assert await whoami(kube) == f"system:serviceaccount:{NAMESPACE}:first"
        token_file.write_text(tokens["second"])  # what the kubelet does, about hourly
        assert await whoami(kube) == f"system:serviceaccount:{NAMESPACE}:second"
    finally:
        await kube.close()


async def test_a_401_makes_the_credential_read_again(
        cluster: Cluster, tokens: dict[str, str], tmp_path: Path) -> None:
    """The file changes in a way its size and time do not show (as after a clock jump): the
    stale token earns a 401, which makes the file read again, and the request succeeds."""
    token_file = tmp_path / "token"
    valid = tokens["first"]
    token_file.write_text("x" * len(valid))
    kube = Kube(token_file_credentials(cluster, token_file))
    try:
        with pytest.raises(ApiError) as rejected:
            await whoami(kube)
        assert rejected.value.status == 401  # retried once after re-reading: still invalid
        before = token_file.stat()
        token_file.write_text(valid)
        os.utime(token_file, ns=(before.st_atime_ns, before.st_mtime_ns))
        assert await whoami(kube) == f"system:serviceaccount:{NAMESPACE}:first"
    finally:
        await kube.close()


async def test_a_kubeconfig_token_file_and_an_exec_plugin_work_end_to_end(
        cluster: Cluster, tokens: dict[str, str], tmp_path: Path) -> None:
    """What cloud kubeconfigs use: a user with an exec credential plugin (here a script
    printing a ServiceAccount token), and one with tokenFile."""
    config = yaml.safe_load(cluster.kubeconfig.read_text())
    plugin = tmp_path / "credential-plugin"
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
                  "status": {"token": tokens["second"]}}
    plugin.write_text(f"#!/bin/sh\ncat <<'EOF'\n{json.dumps(credential)}\nEOF\n")
    plugin.chmod(0o700)
    (tmp_path / "token").write_text(tokens["first"])
    config["users"] = [
        {"name": "exec", "user": {"exec": {"apiVersion": "client.authentication.k8s.io/v1",
                                           "command": str(plugin)}}},
        {"name": "file", "user": {"tokenFile": "token"}}]
    cluster_name = config["clusters"][0]["name"]
    config["contexts"] = [{"name": name, "context": {"cluster": cluster_name, "user": name}}
                          for name in ("exec", "file")]
    for context, account in (("exec", "second"), ("file", "first")):
        config["current-context"] = context
        path = tmp_path / "config"
        path.write_text(yaml.safe_dump(config))
        kube = Kube.connect(path)
        try:
            assert await whoami(kube) == f"system:serviceaccount:{NAMESPACE}:{account}"
        finally:
            await kube.close()
