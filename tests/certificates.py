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
