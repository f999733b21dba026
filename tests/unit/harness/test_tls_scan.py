"""The wire scanner (tests/tls_scan.py) against real servers on loopback: a TLS server with a
known policy (OpenSSL, through Python's ssl) and a plain TCP one."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.certificates import self_signed_ca, signed_key_pair
from tests.tls_scan import scan

ALLOWED = ("ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-ECDSA-CHACHA20-POLY1305")


def serve(listener: socket.socket, context: ssl.SSLContext | None) -> None:
    """Accept until the listener closes; complete a handshake on each (or fail it)."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            if context is None:
                connection.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                continue
            try:
                with context.wrap_socket(connection, server_side=True):
                    pass
            except (ssl.SSLError, OSError):
                pass


@pytest.fixture
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[int]:
    context = None
    if request.param == "tls":
        self_signed_ca(tmp_path, "ca")
        cert, key = signed_key_pair(tmp_path, "ca", "server", ("localhost",))
        (tmp_path / "tls.crt").write_bytes(cert)
        (tmp_path / "tls.key").write_bytes(key)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp_path / "tls.crt", tmp_path / "tls.key")
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.set_ciphers(":".join(ALLOWED))
    listener = socket.create_server(("127.0.0.1", 0))
    thread = threading.Thread(target=serve, args=(listener, context), daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    listener.close()
    thread.join(timeout=5)


@pytest.mark.parametrize("server", ["tls"], indirect=True)
def test_a_tls_port_reports_its_versions_and_exactly_its_suites(server: int) -> None:
    found = scan("127.0.0.1", server)
    assert found.tls
    assert found.versions == ("VersionTLS12", "VersionTLS13")
    assert sorted(found.suites) == sorted(ALLOWED)
    assert found.tls13_suite in {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                 "TLS_CHACHA20_POLY1305_SHA256"}


@pytest.mark.parametrize("server", ["plain"], indirect=True)
def test_a_plain_port_is_reported_as_no_tls(server: int) -> None:
    found = scan("127.0.0.1", server)
    assert not found.tls
    assert (found.versions, found.suites) == ((), ())
    assert str(found) == f"127.0.0.1:{server} no TLS"
