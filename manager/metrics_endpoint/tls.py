"""TLS of the operator's /metrics: the policy and the serving certificate, both replaced while
the server runs (docs/operations.md, "Metrics").

One SSLContext serves every connection; OpenSSL copies its settings into each new connection,
so a policy or certificate set on it applies from the next handshake on, and connections
already open keep theirs.

The certificate comes from two PEM files: on OpenShift the service CA writes them into the
Secret the metrics Service names, and renews them before they expire; elsewhere the
administrator mounts one. They are read again every RELOAD_SECONDS, so a renewed certificate
is served without a restart (a process that read them once would serve an expired one a year
or two later). Until they exist (a cluster without the service CA: the optional Secret never
appears) the server uses a self-signed certificate made at start by `openssl`, whose key
lives only in memory; its fingerprint is logged, so a scraper can pin it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import ssl
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from manager.tls_profile import INTERMEDIATE, python_tls_policy

logger = logging.getLogger(__name__)

# How often the certificate files are read: a renewal is served within this time. Two small
# files every 10 s cost nothing measurable.
RELOAD_SECONDS: Final = 10.0
# The self-signed certificate is valid for a year and made again after 300 days, so a process
# that runs that long never serves an expired one.
SELF_SIGNED_DAYS: Final = 365
SELF_SIGNED_RENEW_SECONDS: Final = 300 * 86400

_CERTIFICATE = re.compile(rb"-----BEGIN CERTIFICATE-----.+?-----END CERTIFICATE-----", re.S)


class CertificateError(RuntimeError):
    """No certificate could be loaded or made."""


def apply_policy(context: ssl.SSLContext, minimum: ssl.TLSVersion, ciphers: str) -> None:
    """`ciphers` in OpenSSL's cipher-list syntax; with a TLS 1.3 minimum only TLS 1.3 suites
    can be negotiated, so the TLS 1.2 list is not needed (and may name none)."""
    if minimum < ssl.TLSVersion.TLSv1_3:
        try:
            context.set_ciphers(ciphers)  # first: it raises without changing anything
        except ssl.SSLError as error:
            raise ValueError(f"no TLS 1.2 cipher in {ciphers!r}: {error}") from error
    with warnings.catch_warnings():  # TLS 1.0 and 1.1 are deprecated; the Old profile asks
        warnings.simplefilter("ignore", DeprecationWarning)  # for them all the same
        context.minimum_version = minimum


def fingerprint(pem: bytes) -> str:
    """SHA-256 of the first certificate in `pem`, as `openssl x509 -fingerprint` prints it."""
    match = _CERTIFICATE.search(pem)
    if match is None:
        raise CertificateError("no certificate in PEM data")
    digest = hashlib.sha256(ssl.PEM_cert_to_DER_cert(match[0].decode())).hexdigest().upper()
    return ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))


def load_pem(context: ssl.SSLContext, pem: bytes) -> None:
    """Certificate chain and key from memory: through a memfd, so the key touches no disk."""
    fd = os.memfd_create("metrics-tls", os.MFD_CLOEXEC)
    try:
        with open(fd, "wb", closefd=False) as file:
            file.write(pem)
        context.load_cert_chain(f"/proc/self/fd/{fd}")
    finally:
        os.close(fd)


async def self_signed(names: Sequence[str]) -> bytes:
    """A new P-256 key and a self-signed certificate for `names` (PEM, key included)."""
    alt_names = ",".join([*(f"DNS:{name}" for name in names), "IP:127.0.0.1"])
    try:
        process = await asyncio.create_subprocess_exec(
            "openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
            "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", "-", "-out", "-",
            "-days", str(SELF_SIGNED_DAYS), "-subj", f"/CN={names[0]}",
            "-addext", f"subjectAltName={alt_names}",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as error:
        raise CertificateError(f"cannot run openssl: {error}") from error
    output, errors = await process.communicate()
    if process.returncode != 0:
        raise CertificateError(f"openssl failed: {errors.decode(errors='replace')[-300:]}")
    return output


class ServingTLS:
    """The metrics server's SSLContext, its certificate kept current (module docstring)."""

    def __init__(self, cert_file: Path | None, key_file: Path | None, names: Sequence[str],
                 reload_seconds: float = RELOAD_SECONDS) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        apply_policy(self.context, *python_tls_policy(INTERMEDIATE))  # until told
        self.files = (cert_file, key_file) if cert_file and key_file else None
        self.names = tuple(names) or ("localhost",)
        self.reload_seconds = reload_seconds
        self.source = ""  # "files" or "self-signed" once a certificate is loaded
        self.fingerprint = ""
        self._files_digest = b""  # of the file content last tried
        self._made = 0.0  # when the self-signed certificate was made
        self._task: asyncio.Task[None] | None = None

    def set_policy(self, minimum: ssl.TLSVersion, ciphers: str) -> None:
        apply_policy(self.context, minimum, ciphers)
        logger.info("action=metrics-tls-policy minimum=%s", minimum.name)

    async def start(self) -> None:
        await self.refresh()
        self._task = asyncio.create_task(self._watch(), name="metrics certificate")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def refresh(self) -> None:
        """Serve the files' certificate when they hold a new valid one; else, until they
        ever did, a self-signed one (made again before it expires)."""
        pem = self._read_files()
        if pem is not None and hashlib.sha256(pem).digest() != self._files_digest:
            self._files_digest = hashlib.sha256(pem).digest()
            try:
                self._install(pem, "files")
                return
            except (ssl.SSLError, CertificateError) as error:  # half-written, mismatched pair
                logger.warning("action=metrics-certificate result=error files=%s error=%r "
                               "hint=%r", ",".join(map(str, self.files or ())), str(error),
                               "the files must hold a PEM certificate and its key; the "
                               "certificate served so far stays")
        if self.source == "files":
            return
        if not self.source or time.time() - self._made > SELF_SIGNED_RENEW_SECONDS:
            self._install(await self_signed(self.names), "self-signed")
            self._made = time.time()

    def _read_files(self) -> bytes | None:
        if self.files is None:
            return None
        try:
            return b"\n".join(path.read_bytes() for path in self.files)
        except OSError:  # not mounted yet (the service CA has not written the Secret)
            return None

    def _install(self, pem: bytes, source: str) -> None:
        load_pem(ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER), pem)  # a bad pair fails here...
        load_pem(self.context, pem)  # ...not half-way into the context that serves
        self.source, self.fingerprint = source, fingerprint(pem)
        logger.info("action=metrics-certificate source=%s sha256=%s", source, self.fingerprint)

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self.reload_seconds)
            try:
                await self.refresh()
            except CertificateError as error:  # openssl failed: the old certificate stays
                logger.warning("action=metrics-certificate result=error error=%r", str(error))
