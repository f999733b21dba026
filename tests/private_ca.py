"""A private CA and a server certificate it signs, made by openssl as an administrator would
(tests/certificates.py makes the self-signed CAs the webhook tests use).

The server certificate names IP addresses only: the simulated cluster has no DNS for pods,
so a provider outside the cluster is reached by address, and Go checks IP SANs.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

_EC_KEY = ("-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes")


@dataclass(frozen=True)
class ServerCertificate:
    """PEM files: the CA's certificate (what clients trust) and the server's key pair."""

    ca: Path
    certificate: Path
    key: Path


def private_ca(directory: Path, name: str) -> Path:
    """A CA certificate (EC P-256, one day, `CA:TRUE`, may sign certificates); its key is
    `<name>.key` beside it. Returns the certificate's path."""
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    subprocess.run(["openssl", "req", "-x509", *_EC_KEY, "-subj", f"/CN={name}", "-days", "1",
                    "-addext", "basicConstraints=critical,CA:TRUE",
                    "-addext", "keyUsage=critical,keyCertSign,cRLSign",
                    "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert


def server_certificate(directory: Path, name: str, addresses: list[str]) -> ServerCertificate:
    """A new private CA `<name>-ca` and a server certificate (EC P-256, one day, serverAuth)
    it signs for `addresses` (IP SANs), all under `directory`."""
    ca = private_ca(directory, f"{name}-ca")
    key, csr, cert = (directory / f"{name}.{suffix}" for suffix in ("key", "csr", "crt"))
    extensions = directory / f"{name}.ext"
    extensions.write_text(
        "basicConstraints=critical,CA:FALSE\n"
        "keyUsage=critical,digitalSignature\n"
        "extendedKeyUsage=serverAuth\n"
        f"subjectAltName={','.join(f'IP:{address}' for address in addresses)}\n")
    subprocess.run(["openssl", "req", "-new", *_EC_KEY, "-subj", f"/CN={addresses[0]}",
                    "-keyout", str(key), "-out", str(csr)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(csr), "-CA", str(ca),
                    "-CAkey", str(ca.with_suffix(".key")), "-CAcreateserial", "-days", "1",
                    "-extfile", str(extensions), "-out", str(cert)],
                   check=True, capture_output=True)
    return ServerCertificate(ca=ca, certificate=cert, key=key)
