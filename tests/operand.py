"""What every suite needs about the operand: whether it counts as installed, a real TLS
Secret for bitwarden-sdk-server, and removing the operand.

Installed means `Ready=True`, on the simulated cluster as on a real one: every operand
Deployment runs its real binary there, bitwarden-sdk-server included (built from its
release tree, docs/development.md "Which operand runs"). bitwarden-sdk-server serves HTTPS
with the key pair of its TLS Secret and crash-loops on anything else, so a suite that
switches it on gives it a real one (`bitwarden_tls_secret`).
"""

from __future__ import annotations

import asyncio
import base64
import tempfile
import time
from pathlib import Path
from typing import Any

from manager.client.kube import Kube
from manager.steps.uninstall import execute_uninstall, plan_uninstall
from tests.certificates import self_signed_ca, signed_key_pair

ESC_PATH = "/apis/operator.openshift.io/v1alpha1/externalsecretsconfigs/cluster"
BITWARDEN_SERVICE = "bitwarden-sdk-server"  # its Deployment, Service and container
BITWARDEN_TLS_SECRET = "bitwarden-tls"  # the name the suites give it in secretRef


def _ready(status: dict[str, Any] | None) -> dict[str, Any]:
    conditions = (status or {}).get("conditions") or []
    return next((dict(c) for c in conditions if c.get("type") == "Ready"), {})


def counts_as_installed(status: dict[str, Any] | None) -> bool:
    """Ready=True: the whole operand available, bitwarden-sdk-server too if it is on."""
    return _ready(status).get("status") == "True"


def bitwarden_dns_names(namespace: str) -> tuple[str, str]:
    """The names of bitwarden-sdk-server's Service in `namespace`, as its certificate holds
    them (the operator renders the second into the Certificate it asks cert-manager for)."""
    return (f"{BITWARDEN_SERVICE}.{namespace}.svc",
            f"{BITWARDEN_SERVICE}.{namespace}.svc.cluster.local")


def bitwarden_tls_secret(namespace: str, name: str = BITWARDEN_TLS_SECRET, *,
                         string_data: bool = False) -> dict[str, Any]:
    """The Secret an administrator makes for bitwarden-sdk-server (secretRef): a new CA and a
    serving certificate it signed for the Service's DNS names (openssl, tests/certificates.py),
    as `tls.crt`, `tls.key` and `ca.crt`; base64 in `data`, or PEM text in `stringData`."""
    with tempfile.TemporaryDirectory(prefix="bitwarden-tls-") as scratch:
        directory = Path(scratch)
        ca = base64.b64decode(self_signed_ca(directory, "bitwarden-ca"))
        cert, key = signed_key_pair(directory, "bitwarden-ca", BITWARDEN_SERVICE,
                                    bitwarden_dns_names(namespace))
    values = {"tls.crt": cert, "tls.key": key, "ca.crt": ca}
    contents = ({"stringData": {k: v.decode() for k, v in values.items()}} if string_data
                else {"data": {k: base64.b64encode(v).decode() for k, v in values.items()}})
    return {"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": name, "namespace": namespace}, **contents}


async def remove_operand(kube: Kube, timeout: float = 60.0) -> None:
    """Delete the ESC, then every object the operator created (as `uninstall --operand
    --yes` does), and wait until the operand's pods, and so its processes, are gone: the
    operand really runs, and two at once would fight over the cluster-scoped webhook
    configurations."""
    await kube.delete(ESC_PATH)
    deadline = time.monotonic() + timeout
    while await kube.get(ESC_PATH) is not None:
        assert time.monotonic() < deadline, "the ExternalSecretsConfig was not deleted"
        await asyncio.sleep(0.1)
    report = await execute_uninstall(kube, await plan_uninstall(kube))
    assert not report.errors, report.errors
    deployments = {(ref.namespace, ref.name) for ref in report.deleted
                   if ref.kind == "Deployment"}
    for namespace in {namespace for namespace, _ in deployments}:
        while left := [pod for pod in (await kube.list(
                f"/api/v1/namespaces/{namespace}/pods"))["items"]
                       if (namespace, _deployment_of(pod)) in deployments]:
            assert time.monotonic() < deadline, f"operand pods still running: {left}"
            await asyncio.sleep(0.2)


def _deployment_of(pod: dict[str, Any]) -> str | None:
    """The Deployment a pod belongs to: its ReplicaSet is named `<deployment>-<hash>`."""
    for owner in pod["metadata"].get("ownerReferences") or []:
        if owner.get("kind") == "ReplicaSet":
            return str(owner["name"]).rsplit("-", 1)[0]
    return None
