"""The operator's /metrics served securely (manager/metrics.py, metrics_tls.py, metrics_auth.py):
the real server in this process, TokenReview and SubjectAccessReview answered by the real API
server for bound tokens of real ServiceAccounts, real TLS handshakes with Python's ssl."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from manager.client.kube import Kube
from manager.metrics_endpoint import tls as metrics_tls
from manager.metrics_endpoint.auth import MetricsAccess
from manager.metrics_endpoint.server import METRICS_PATH, MetricsServer
from manager.metrics_endpoint.tls import ServingTLS
from manager.tls_profile import profile_of, python_tls_policy
from tests.integration.conftest import eventually
from tests.metrics_scrape import READER_ROLE, get_metrics, service_account_token

NAMESPACE = "eso-it-metrics-access"
MODERN = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256"
# In OpenShift's Old profile, not in Intermediate; usable with the EC certificates here.
OLD_ONLY_CIPHER = "ECDHE-ECDSA-AES128-SHA"


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def tokens(kube: Kube) -> AsyncIterator[dict[str, str]]:
    """A token that may read /metrics (the shipped reader ClusterRole) and one that may not."""
    yield {"reader": await service_account_token(kube, NAMESPACE, "scraper", reader=True),
           "other": await service_account_token(kube, NAMESPACE, "bystander", reader=False)}
    await kube.delete("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/"
                      f"{READER_ROLE}-{NAMESPACE}-scraper")
    await kube.delete(f"/api/v1/namespaces/{NAMESPACE}")


async def start_server(kube: Kube, tls: ServingTLS) -> MetricsServer:
    server = MetricsServer("127.0.0.1:0", tls=tls, access=MetricsAccess(kube, METRICS_PATH))
    await server.start()
    assert server.port, "the metrics server did not start"
    return server


def reviews(text: str) -> float:
    """TokenReviews this process sent, from the exposition itself."""
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (sample.name == "eso_operator_api_requests_total"
                    and sample.labels == {"verb": "create", "resource": "tokenreviews"}):
                return sample.value
    return 0.0


async def test_tokens_get_401_403_200_and_answers_are_cached(
        kube: Kube, tokens: dict[str, str]) -> None:
    server = await start_server(kube, ServingTLS(None, None, ["localhost"]))
    try:
        assert (await get_metrics(server.port, None))[0] == 401
        assert (await get_metrics(server.port, "not-a-token"))[0] == 401
        assert (await get_metrics(server.port, tokens["other"]))[0] == 403
        status, text = await get_metrics(server.port, tokens["reader"])
        assert status == 200
        assert "eso_operator_leader" in text
        # Cached: the next scrapes with either token cost no review.
        before = reviews(text)
        assert before >= 1
        assert (await get_metrics(server.port, tokens["other"]))[0] == 403
        status, text = await get_metrics(server.port, tokens["reader"])
        assert status == 200
        assert reviews(text) == before
    finally:
        await server.stop()


# How a server's refusal reaches the client: its alert, or the connection closed at once
# (asyncio closes the transport of a failed handshake, sometimes before the alert is out).
# A client that could not offer what it was asked to (NO_PROTOCOLS_AVAILABLE) is not one.
SERVER_REFUSALS = frozenset({"TLSV1_ALERT_PROTOCOL_VERSION", "SSLV3_ALERT_HANDSHAKE_FAILURE",
                             "UNEXPECTED_EOF_WHILE_READING"})


def handshake(port: int, *, maximum: ssl.TLSVersion, ciphers: str | None = None,
              lowest: bool = False) -> str:
    """The TLS version negotiated, or "refused" by the server."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.maximum_version = maximum
    if lowest:  # let this client offer TLS 1.0 and 1.1 (OpenSSL 3 forbids them by default)
        context.minimum_version = ssl.TLSVersion.TLSv1_1
        context.set_ciphers("DEFAULT:@SECLEVEL=0")
    if ciphers:
        context.set_ciphers(ciphers)
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
                context.wrap_socket(raw) as tls:
            return str(tls.version())
    except ssl.SSLError as error:
        return "refused" if error.reason in SERVER_REFUSALS else f"client error: {error}"


async def test_tls_policy_refuses_below_the_minimum_and_changes_without_restart(
        kube: Kube) -> None:
    server = await start_server(kube, ServingTLS(None, None, ["localhost"]))
    port = server.port
    try:
        # Intermediate by default: TLS 1.2 with its ciphers, not TLS 1.1, not an Old cipher.
        assert await asyncio.to_thread(handshake, port, maximum=ssl.TLSVersion.TLSv1_3) \
            == "TLSv1.3"
        assert await asyncio.to_thread(handshake, port, maximum=ssl.TLSVersion.TLSv1_2) \
            == "TLSv1.2"
        assert await asyncio.to_thread(handshake, port, maximum=ssl.TLSVersion.TLSv1_1,
                                       lowest=True) == "refused"
        assert await asyncio.to_thread(handshake, port, maximum=ssl.TLSVersion.TLSv1_2,
                                       ciphers=OLD_ONLY_CIPHER) == "refused"

        # The policy changes under the running server: the next handshakes follow it.
        server.set_tls_policy(*python_tls_policy(profile_of({"type": "Old", "old": {}})[0]))
        assert await asyncio.to_thread(handshake, port, maximum=ssl.TLSVersion.TLSv1_2,
                                       ciphers=OLD_ONLY_CIPHER) == "TLSv1.2"
        server.set_tls_policy(ssl.TLSVersion.TLSv1_3, MODERN)
        assert await asyncio.to_thread(handshake, port, maximum=ssl.TLSVersion.TLSv1_2) \
            == "refused"
        assert await asyncio.to_thread(handshake, port, maximum=ssl.TLSVersion.TLSv1_3) \
            == "TLSv1.3"
    finally:
        await server.stop()


def make_pair(directory: Path, name: str) -> tuple[bytes, bytes]:
    """A self-signed EC certificate and key (PEM), with openssl."""
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1", "-subj", f"/CN={name}",
                    "-keyout", str(directory / f"{name}.key"),
                    "-out", str(directory / f"{name}.crt")], check=True, capture_output=True)
    return (directory / f"{name}.crt").read_bytes(), (directory / f"{name}.key").read_bytes()


def mount(directory: Path, cert: bytes, key: bytes) -> None:
    """As the kubelet writes a Secret volume: the files in a new directory, then one rename
    of the `..data` link makes both current at once."""
    version = directory / f"..{os.urandom(4).hex()}"
    version.mkdir()
    (version / "tls.crt").write_bytes(cert)
    (version / "tls.key").write_bytes(key)
    (directory / "..data_tmp").symlink_to(version.name)
    os.replace(directory / "..data_tmp", directory / "..data")
    for name in ("tls.crt", "tls.key"):
        if not (directory / name).is_symlink():
            (directory / name).symlink_to(Path("..data") / name)


def served_fingerprint(port: int) -> str:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, \
            context.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


async def test_certificate_files_are_served_when_they_appear_and_when_they_change(
        kube: Kube, tokens: dict[str, str], tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="manager.metrics_endpoint.tls")
    secret = tmp_path / "metrics-tls"
    secret.mkdir()
    first, second = make_pair(tmp_path, "first"), make_pair(tmp_path, "second")
    tls = ServingTLS(secret / "tls.crt", secret / "tls.key", ["localhost"], reload_seconds=0.2)
    # The optional Secret is empty at start: a self-signed certificate, its fingerprint logged.
    server = await start_server(kube, tls)
    try:
        port = server.port
        self_signed = await asyncio.to_thread(served_fingerprint, port)
        assert tls.source == "self-signed"
        assert f"source=self-signed sha256={self_signed}" in caplog.text
        assert "PRIVATE KEY" not in caplog.text
        # A connection opened now survives the changes below (the server is not restarted).
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=_client())

        async def serves(pem: bytes) -> None:
            expected = metrics_tls.fingerprint(pem)
            assert await asyncio.to_thread(served_fingerprint, port) == expected

        mount(secret, *first)  # the service CA wrote the Secret
        await eventually(lambda: serves(first[0]), timeout=10)
        mount(secret, *second)  # ... and renewed it
        await eventually(lambda: serves(second[0]), timeout=10)
        # A pair that does not match is refused; the certificate served stays.
        mount(secret, first[0], second[1])
        await eventually(lambda: _logged(caplog, "action=metrics-certificate result=error"),
                         timeout=10)
        await serves(second[0])

        writer.write(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer "
                     + tokens["reader"].encode() + b"\r\nConnection: close\r\n\r\n")
        assert (await reader.readline()).startswith(b"HTTP/1.1 200")
        writer.close()
    finally:
        await server.stop()


def _client() -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


async def _logged(caplog: pytest.LogCaptureFixture, text: str) -> None:
    assert text in caplog.text
