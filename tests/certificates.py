"""Certificates for tests, made by openssl as an administrator would make them."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path


def self_signed_ca(directory: Path, name: str) -> str:
    """A self-signed CA certificate (EC P-256, one day), base64 as a Secret's `ca.crt` and a
    webhook's caBundle carry it; its key stays in `directory`."""
    key, cert = directory / f"{name}.key", directory / f"{name}.crt"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={name}",
                    "-days", "1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    return base64.b64encode(cert.read_bytes()).decode()


def signed_key_pair(directory: Path, ca_name: str, name: str,
                    dns_names: tuple[str, ...]) -> tuple[bytes, bytes]:
    """A serving certificate for `dns_names` (EC P-256, one day, serverAuth) signed by the CA
    that self_signed_ca made as `ca_name` in `directory`, with a new private key: its PEM
    certificate and PEM key, as `tls.crt` and `tls.key` of a Secret carry them."""
    key, request, cert = (directory / f"{name}.{suffix}" for suffix in ("key", "csr", "crt"))
    extensions = directory / f"{name}.ext"
    extensions.write_text("basicConstraints=critical,CA:FALSE\n"
                          "keyUsage=critical,digitalSignature\n"
                          "extendedKeyUsage=serverAuth\n"
                          f"subjectAltName={','.join(f'DNS:{d}' for d in dns_names)}\n")
    subprocess.run(["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={dns_names[0]}",
                    "-keyout", str(key), "-out", str(request)], check=True, capture_output=True)
    subprocess.run(["openssl", "x509", "-req", "-in", str(request),
                    "-CA", str(directory / f"{ca_name}.crt"),
                    "-CAkey", str(directory / f"{ca_name}.key"), "-CAcreateserial",
                    "-days", "1", "-extfile", str(extensions), "-out", str(cert)],
                   check=True, capture_output=True)
    return cert.read_bytes(), key.read_bytes()
