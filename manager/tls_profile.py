"""The cluster's TLS security profile and what each TLS server can follow of it. Pure.

On OpenShift the administrator sets one profile for the cluster in
`apiservers.config.openshift.io/cluster`, `spec.tlsSecurityProfile`: a predefined one (Old,
Intermediate, Modern) or Custom (a minimum version and a cipher list). Absent or empty means
Intermediate, as on OpenShift; so does a cluster without that API (plain Kubernetes). The
predefined profiles are openshift/api's (config/v1 types_tlssecurityprofile.go), which names
ciphers as OpenSSL does.

Each server gets what it can use: the names it cannot use are dropped (the caller logs them),
so it offers fewer ciphers than the profile, never more; and the minimum version is never
lowered. When no TLS 1.0-1.2 cipher is left, the minimum becomes TLS 1.3 rather than
falling back to the server's own defaults. TLS 1.3 suites cannot be chosen, neither in Go's
crypto/tls nor in Python's ssl: both always offer all three (which every profile allows).

Cipher names come from one table (CIPHERS), in either spelling; each server takes the part of
it it can offer:
- The operand webhook (Go): `--tls-min-version` ("1.0" .. "1.3") and `--tls-ciphers`
  (comma-separated IANA names from crypto/tls `CipherSuites()`; a name outside that list makes
  the webhook exit; external-secrets' `cmd/controller/webhook.go`).
- The operator's own servers (Python's ssl): `python_tls_policy`, OpenSSL names.
- bitwarden-sdk-server v0.5.2 has no TLS settings and follows no profile (Go's defaults).
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict

logger = logging.getLogger(__name__)

ProfileType = Literal["Old", "Intermediate", "Modern", "Custom"]
TLSVersionName = Literal["VersionTLS10", "VersionTLS11", "VersionTLS12", "VersionTLS13"]
VERSIONS: tuple[TLSVersionName, ...] = get_args(TLSVersionName)  # oldest first

# The TLS 1.3 suites (the same names in OpenSSL and IANA); no server here can choose them.
TLS13_CIPHERS = ("TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                 "TLS_CHACHA20_POLY1305_SHA256")
_INTERMEDIATE_TLS12 = (
    "ECDHE-ECDSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-GCM-SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384", "ECDHE-RSA-AES256-GCM-SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305", "ECDHE-RSA-CHACHA20-POLY1305")
_OLD_ONLY = (
    "ECDHE-ECDSA-AES128-SHA256", "ECDHE-RSA-AES128-SHA256", "ECDHE-ECDSA-AES128-SHA",
    "ECDHE-RSA-AES128-SHA", "ECDHE-ECDSA-AES256-SHA", "ECDHE-RSA-AES256-SHA",
    "AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-SHA256", "AES128-SHA", "AES256-SHA",
    "DES-CBC3-SHA")

# The one table of cipher names: every TLS 1.0-1.2 suite an OpenShift profile can name, OpenSSL
# spelling -> IANA spelling (openshift/api's profiles and library-go's OpenSSL-to-IANA map name
# the same suites). A Custom profile may use either spelling; any other entry (an OpenSSL
# keyword such as ALL or aNULL, a `!` or `:` expression, a typo) is dropped and reported, so no
# server ever receives a cipher *string*, only names from this table.
CIPHERS: Mapping[str, str] = {
    "ECDHE-ECDSA-AES128-GCM-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-RSA-AES128-GCM-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "ECDHE-ECDSA-AES256-GCM-SHA384": "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-RSA-AES256-GCM-SHA384": "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-ECDSA-CHACHA20-POLY1305": "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "ECDHE-RSA-CHACHA20-POLY1305": "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "DHE-RSA-AES128-GCM-SHA256": "TLS_DHE_RSA_WITH_AES_128_GCM_SHA256",
    "DHE-RSA-AES256-GCM-SHA384": "TLS_DHE_RSA_WITH_AES_256_GCM_SHA384",
    "ECDHE-ECDSA-AES128-SHA256": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "ECDHE-RSA-AES128-SHA256": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "ECDHE-ECDSA-AES128-SHA": "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "ECDHE-RSA-AES128-SHA": "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "ECDHE-ECDSA-AES256-SHA": "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "ECDHE-RSA-AES256-SHA": "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "AES128-GCM-SHA256": "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "AES256-GCM-SHA384": "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "AES128-SHA256": "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "AES128-SHA": "TLS_RSA_WITH_AES_128_CBC_SHA",
    "AES256-SHA": "TLS_RSA_WITH_AES_256_CBC_SHA",
    "DES-CBC3-SHA": "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
}
_BY_IANA: Mapping[str, str] = {iana: openssl for openssl, iana in CIPHERS.items()}
# The suites Go's crypto/tls lists in CipherSuites() in every Go release the webhook may be
# built with (any other name makes the webhook exit). Left out on purpose: RSA key exchange and
# the CBC-SHA256 suites, which Go 1.26 lists only in InsecureCipherSuites(), 3DES, and DHE (Go
# has none).
GO_CIPHERS: frozenset[str] = frozenset({
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384", "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256", "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
})


def openssl_name(name: str) -> str | None:
    """The table's OpenSSL name for `name` in either spelling; None for anything else."""
    return name if name in CIPHERS else _BY_IANA.get(name)


GO_VERSIONS: Mapping[TLSVersionName, str] = dict(zip(VERSIONS, ("1.0", "1.1", "1.2", "1.3"),
                                                     strict=True))
PYTHON_VERSIONS: Mapping[TLSVersionName, ssl.TLSVersion] = dict(zip(VERSIONS, (
    ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1, ssl.TLSVersion.TLSv1_2,
    ssl.TLSVersion.TLSv1_3), strict=True))


class TLSProfile(BaseModel):
    """A profile in effect: its type, minimum version and ciphers (OpenSSL names)."""

    model_config = ConfigDict(frozen=True)

    type: ProfileType = "Intermediate"
    min_tls_version: TLSVersionName = "VersionTLS12"
    ciphers: tuple[str, ...] = TLS13_CIPHERS + _INTERMEDIATE_TLS12


INTERMEDIATE = TLSProfile()
PREDEFINED: Mapping[ProfileType, TLSProfile] = {
    "Old": TLSProfile(type="Old", min_tls_version="VersionTLS10",
                      ciphers=TLS13_CIPHERS + _INTERMEDIATE_TLS12 + _OLD_ONLY),
    "Intermediate": INTERMEDIATE,
    "Modern": TLSProfile(type="Modern", min_tls_version="VersionTLS13", ciphers=TLS13_CIPHERS),
}


def profile_of(tls_security_profile: Mapping[str, Any] | None) -> tuple[TLSProfile, str | None]:
    """The profile `spec.tlsSecurityProfile` stands for, and a note when part of it could not
    be used as written (the API server validates the types; this is for what it lets by)."""
    given = tls_security_profile or {}
    kind = given.get("type") or "Intermediate"
    if kind != "Custom":
        predefined = next((p for t, p in PREDEFINED.items() if t == kind), None)
        if predefined is None:
            return INTERMEDIATE, f"unknown type {kind!r}: Intermediate"
        return predefined, None
    custom = given.get("custom")
    if not isinstance(custom, Mapping):
        return INTERMEDIATE, "type Custom without custom: Intermediate"
    notes = []
    minimum = custom.get("minTLSVersion")
    if minimum not in VERSIONS:
        notes.append(f"minTLSVersion {minimum!r} is not one of {', '.join(VERSIONS)}: "
                     f"{INTERMEDIATE.min_tls_version}")
        minimum = INTERMEDIATE.min_tls_version
    ciphers = tuple(str(name) for name in custom.get("ciphers") or ())
    if not ciphers:
        notes.append("no ciphers: Intermediate's")
        ciphers = INTERMEDIATE.ciphers
    profile = TLSProfile(type="Custom", min_tls_version=minimum, ciphers=ciphers)
    return profile, "; ".join(notes) or None


@dataclass(frozen=True)
class ServerTLS:
    """What one server follows of a profile."""

    min_version: TLSVersionName
    ciphers: tuple[str, ...]
    """TLS 1.0-1.2 ciphers in the server's own naming (TLS 1.3 suites are not choosable)."""
    dropped: tuple[str, ...]
    """The profile's names the server cannot use."""
    raised: bool
    """The minimum became TLS 1.3: no TLS 1.0-1.2 cipher of the profile is usable."""

    def describe(self, server: str) -> str | None:
        """A log line's fields when the server cannot follow the profile to the letter."""
        if not (self.dropped or self.raised):
            return None
        raised = " min_version_raised_to=VersionTLS13" if self.raised else ""
        return f"server={server} dropped={','.join(self.dropped) or '-'}{raised}"


def server_tls(profile: TLSProfile, usable: Callable[[str], str | None]) -> ServerTLS:
    """The profile for a server that calls a cipher `usable(name)` (None: it cannot)."""
    ciphers, dropped = [], []
    for name in profile.ciphers:
        if name in TLS13_CIPHERS:
            continue
        found = usable(name)
        if found is None:
            dropped.append(name)
        elif found not in ciphers:
            ciphers.append(found)
    raised = not ciphers and profile.min_tls_version != "VersionTLS13"
    return ServerTLS("VersionTLS13" if raised else profile.min_tls_version, tuple(ciphers),
                     tuple(dropped), raised)


def _go_name(name: str) -> str | None:
    known = openssl_name(name)
    return CIPHERS[known] if known is not None and CIPHERS[known] in GO_CIPHERS else None


def go_tls(profile: TLSProfile) -> ServerTLS:
    """The profile for a Go server (the operand webhook): IANA names Go accepts (GO_CIPHERS)."""
    return server_tls(profile, _go_name)


def webhook_tls_args(profile: TLSProfile) -> tuple[str, ...]:
    """The webhook's TLS flags; no --tls-ciphers when only TLS 1.3 is allowed."""
    settings = go_tls(profile)
    args = [f"--tls-min-version={GO_VERSIONS[settings.min_version]}"]
    if settings.min_version != "VersionTLS13":
        args.append(f"--tls-ciphers={','.join(settings.ciphers)}")
    return tuple(args)


def _openssl_name(name: str) -> str | None:
    """The table's OpenSSL name, if this OpenSSL can offer that suite."""
    known = openssl_name(name)
    if known is None:
        return None
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(known)
    except ssl.SSLError:
        return None
    return known


def python_tls_policy(profile: TLSProfile) -> tuple[ssl.TLSVersion, str]:
    """The minimum version and the OpenSSL cipher list (TLS 1.0-1.2; `SSLContext.set_ciphers`)
    for a Python server. The cipher list is empty when the minimum is TLS 1.3: there is then
    nothing to set. Names outside CIPHERS, and suites this OpenSSL lacks, are dropped, with a
    log line: the list holds only names of the table, never a keyword or an expression."""
    settings = server_tls(profile, _openssl_name)
    if line := settings.describe("python"):
        logger.info("action=tls-profile profile=%s %s", profile.type, line)
    minimum = PYTHON_VERSIONS[settings.min_version]
    ciphers = "" if settings.min_version == "VersionTLS13" else ":".join(settings.ciphers)
    if ciphers and minimum < ssl.TLSVersion.TLSv1_2:
        # OpenSSL 3 refuses TLS 1.0 and 1.1 at its default security level whatever the
        # minimum; a profile that allows them (Old, or a Custom minimum) is the administrator's
        # choice. Level 0 is what those versions need, and it cannot add a suite: the list
        # names only the table's suites, none of them anonymous or unencrypted.
        ciphers += ":@SECLEVEL=0"
    return minimum, ciphers
