"""Scraping the operator's /metrics as Prometheus does: HTTPS with a ServiceAccount's bearer
token (manager/metrics_endpoint/auth.py). Shared by the tests and the benchmark."""

from __future__ import annotations

import ssl
import urllib.request
from typing import Any

import aiohttp
import yaml

from manager.client.kube import Kube
from manager.paths import REPO_ROOT

READER_ROLE = "external-secrets-operator-metrics-reader"
RBAC_FILE = REPO_ROOT / "manifests" / "operator" / "rbac.yaml"
FIELD_MANAGER = "metrics-scrape-test"


def reader_role() -> dict[str, Any]:
    """The shipped ClusterRole that allows reading /metrics."""
    [role] = [doc for doc in yaml.safe_load_all(RBAC_FILE.read_text())
              if doc and doc["kind"] == "ClusterRole" and doc["metadata"]["name"] == READER_ROLE]
    return dict(role)


async def service_account_token(kube: Kube, namespace: str, name: str, *,
                                reader: bool) -> str:
    """A bound token (TokenRequest API) of ServiceAccount `name`, created in `namespace`;
    with `reader`, bound to the shipped metrics-reader ClusterRole."""
    await kube.apply(f"/api/v1/namespaces/{namespace}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
        field_manager=FIELD_MANAGER)
    await kube.apply(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}", {
        "apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": name, "namespace": namespace}}, field_manager=FIELD_MANAGER)
    if reader:
        rbac = "/apis/rbac.authorization.k8s.io/v1"
        await kube.apply(f"{rbac}/clusterroles/{READER_ROLE}", reader_role(),
                         field_manager=FIELD_MANAGER)
        binding = f"{READER_ROLE}-{namespace}-{name}"
        await kube.apply(f"{rbac}/clusterrolebindings/{binding}", {
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": binding},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": READER_ROLE},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}]},
            field_manager=FIELD_MANAGER)
    request = await kube.request(
        "POST", f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}})
    return str(request["status"]["token"])


def unverified() -> ssl.SSLContext:
    """The operator's certificate here is self-signed (or the test's own): not verified."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def get_metrics(port: int, token: str | None) -> tuple[int, str]:
    """(status, body) of GET https://127.0.0.1:PORT/metrics with `token`."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with aiohttp.ClientSession() as session, session.get(
            f"https://127.0.0.1:{port}/metrics", headers=headers, ssl=unverified()) as response:
        return response.status, await response.text()


def get_metrics_sync(port: int, token: str) -> str:
    """The body of an allowed scrape, without an event loop (status other than 200 raises)."""
    request = urllib.request.Request(f"https://127.0.0.1:{port}/metrics",
                                     headers={"Authorization": f"Bearer {token}"})
    with urllib.request.urlopen(request, timeout=5, context=unverified()) as response:  # noqa: S310
        return str(response.read().decode())
