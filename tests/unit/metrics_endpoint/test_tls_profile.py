"""The TLS security profile: reading it, and what the webhook (Go) and the operator's own
servers (Python's ssl) make of it. The handshakes against the real webhook are in
tests/integration/test_tls_profile.py."""

from __future__ import annotations

import logging
import re
import shutil
import ssl
import subprocess
from pathlib import Path
from typing import Any

import pytest

from manager.client.watch_spec import WatchSpec
from manager.config import EffectiveConfig
from manager.render import render_operand
from manager.reporting.status import Outcome, OutcomeKind, esc_fields
from manager.runtime.watches import fingerprint
from manager.tls_profile import (
    CIPHERS,
    GO_CIPHERS,
    INTERMEDIATE,
    PREDEFINED,
    TLSProfile,
    go_tls,
    profile_of,
    python_tls_policy,
    webhook_tls_args,
)

INTERMEDIATE_GO = ("TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
                   "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,"
                   "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,"
                   "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256")


def custom(minimum: str | None, *ciphers: str) -> TLSProfile:
    given: dict[str, Any] = {"ciphers": list(ciphers)}
    if minimum is not None:
        given["minTLSVersion"] = minimum
    profile, _ = profile_of({"type": "Custom", "custom": given})
    return profile


# --- reading spec.tlsSecurityProfile ---------------------------------------------------------

@pytest.mark.parametrize("given", [None, {}, {"type": ""}, {"type": "Intermediate"},
                                   {"type": "Intermediate", "intermediate": {}}])
def test_absent_or_empty_is_intermediate(given: dict[str, Any] | None) -> None:
    assert profile_of(given) == (INTERMEDIATE, None)
    assert INTERMEDIATE.min_tls_version == "VersionTLS12"


def test_the_predefined_profiles_are_openshifts() -> None:
    old, modern = PREDEFINED["Old"], PREDEFINED["Modern"]
    assert (old.min_tls_version, len(old.ciphers)) == ("VersionTLS10", 21)
    assert old.ciphers[-1] == "DES-CBC3-SHA"
    assert (modern.min_tls_version, modern.ciphers) == ("VersionTLS13", (
        "TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"))
    assert len(INTERMEDIATE.ciphers) == 9
    assert INTERMEDIATE.ciphers[3] == "ECDHE-ECDSA-AES128-GCM-SHA256"
    assert profile_of({"type": "Old", "old": {}}) == (old, None)


def test_custom_is_taken_as_written() -> None:
    profile, note = profile_of({"type": "Custom", "custom": {
        "minTLSVersion": "VersionTLS11", "ciphers": ["ECDHE-RSA-AES128-GCM-SHA256"]}})
    assert note is None
    assert profile == TLSProfile(type="Custom", min_tls_version="VersionTLS11",
                                 ciphers=("ECDHE-RSA-AES128-GCM-SHA256",))


@pytest.mark.parametrize(("given", "expected", "note"), [
    ({"type": "Custom"}, INTERMEDIATE, "type Custom without custom: Intermediate"),
    ({"type": "Paranoid"}, INTERMEDIATE, "unknown type 'Paranoid': Intermediate"),
    ({"type": "Custom", "custom": {"ciphers": ["ECDHE-RSA-AES128-SHA"]}},
     TLSProfile(type="Custom", ciphers=("ECDHE-RSA-AES128-SHA",)), "minTLSVersion None"),
    ({"type": "Custom", "custom": {"minTLSVersion": "VersionTLS13"}},
     TLSProfile(type="Custom", min_tls_version="VersionTLS13"), "no ciphers"),
])
def test_what_cannot_be_used_as_written_falls_back_to_intermediate(
        given: dict[str, Any], expected: TLSProfile, note: str) -> None:
    profile, found = profile_of(given)
    assert profile == expected
    assert (found or "").startswith(note)


# --- the webhook (Go) --------------------------------------------------------------------------

def test_intermediate_gives_the_webhook_tls_1_2_and_its_six_ecdhe_aead_suites() -> None:
    assert webhook_tls_args(INTERMEDIATE) == ("--tls-min-version=1.2",
                                              f"--tls-ciphers={INTERMEDIATE_GO}")
    assert go_tls(INTERMEDIATE).describe("webhook") is None  # nothing dropped


def test_modern_gives_only_tls_1_3_whose_suites_go_does_not_let_anyone_choose() -> None:
    assert webhook_tls_args(PREDEFINED["Modern"]) == ("--tls-min-version=1.3",)


def test_old_drops_what_go_refuses_and_keeps_tls_1_0() -> None:
    settings = go_tls(PREDEFINED["Old"])
    assert settings.min_version == "VersionTLS10"
    assert set(settings.dropped) == {
        "ECDHE-ECDSA-AES128-SHA256", "ECDHE-RSA-AES128-SHA256",  # CBC-SHA256: insecure in Go
        "AES128-GCM-SHA256", "AES256-GCM-SHA384", "AES128-SHA256", "AES128-SHA",  # RSA kex
        "AES256-SHA", "DES-CBC3-SHA"}
    assert settings.ciphers == (
        *INTERMEDIATE_GO.split(","),
        "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
        "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA", "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA")
    assert settings.describe("webhook") == f"server=webhook dropped={','.join(settings.dropped)}"


def test_custom_names_the_webhook_cannot_use_are_dropped_never_the_minimum_lowered() -> None:
    profile = custom("VersionTLS11", "DHE-RSA-AES128-GCM-SHA256", "ECDHE-RSA-AES128-SHA",
                     "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384", "ECDHE-RSA-AES128-SHA")
    assert webhook_tls_args(profile) == (
        "--tls-min-version=1.1",
        "--tls-ciphers=TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA,TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384")
    assert go_tls(profile).dropped == ("DHE-RSA-AES128-GCM-SHA256",)


@pytest.mark.parametrize("ciphers", [("TLS_AES_128_GCM_SHA256",), ("DES-CBC3-SHA", "AES128-SHA")])
def test_no_usable_tls_1_2_cipher_means_tls_1_3_not_the_servers_defaults(
        ciphers: tuple[str, ...]) -> None:
    profile = custom("VersionTLS12", *ciphers)
    assert webhook_tls_args(profile) == ("--tls-min-version=1.3",)
    assert "min_version_raised_to=VersionTLS13" in (go_tls(profile).describe("webhook") or "")


def test_python_policy_of_tls_1_3_suites_alone_is_tls_1_3() -> None:
    assert python_tls_policy(custom("VersionTLS10", "TLS_AES_256_GCM_SHA384")) == (
        ssl.TLSVersion.TLSv1_3, "")


def _go_cipher_suites() -> set[str]:
    """The names crypto/tls CipherSuites() lists in the Go that builds the webhook here."""
    go = shutil.which("go")
    if go is None:
        pytest.skip("no Go toolchain")
    root = subprocess.run([go, "env", "GOROOT"], capture_output=True, text=True,
                          check=True).stdout.strip()
    source = (Path(root) / "src" / "crypto" / "tls" / "cipher_suites.go").read_text()
    body = source.split("func CipherSuites() []*CipherSuite {", 1)[1].split("\n}\n", 1)[0]
    return set(re.findall(r'"(TLS_\w+)"', body))


def test_every_go_name_is_one_the_webhook_accepts() -> None:
    """A name outside tls.CipherSuites() makes the webhook exit at start."""
    assert _go_cipher_suites() >= GO_CIPHERS
    assert set(CIPHERS.values()) >= GO_CIPHERS


def test_every_predefined_cipher_is_in_the_table() -> None:
    for profile in PREDEFINED.values():
        assert set(profile.ciphers) - {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384",
                                       "TLS_CHACHA20_POLY1305_SHA256"} <= set(CIPHERS)


def test_either_spelling_reaches_both_servers_in_its_own_naming() -> None:
    profile = custom("VersionTLS12", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
                     "ECDHE-ECDSA-AES256-GCM-SHA384")
    assert python_tls_policy(profile) == (
        ssl.TLSVersion.TLSv1_2, "ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384")
    assert webhook_tls_args(profile) == (
        "--tls-min-version=1.2", "--tls-ciphers=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,"
        "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384")


# Entries that are OpenSSL cipher *strings*, not names: each could widen what is offered.
CIPHER_STRINGS = ("ALL", "aNULL", "eNULL", "COMPLEMENTOFALL", "!aNULL", "ALL:@SECLEVEL=0",
                  "ADH-AES128-SHA", "AECDH-AES256-SHA", "HIGH:MEDIUM", "NULL-SHA256")


@pytest.mark.parametrize("minimum", ["VersionTLS10", "VersionTLS12"])
def test_a_custom_profile_cannot_offer_anonymous_or_null_suites(
        minimum: str, caplog: pytest.LogCaptureFixture) -> None:
    """`Custom{minTLSVersion: VersionTLS10, ciphers: [ALL]}` once became `ALL:@SECLEVEL=0`
    for /metrics: anonymous (ADH, AECDH) suites, whose man in the middle reads the scraper's
    bearer token. Only names of the table reach OpenSSL, so what is offered is exactly them."""
    caplog.set_level(logging.INFO, "manager.tls_profile")
    _, ciphers = python_tls_policy(custom(minimum, *CIPHER_STRINGS, "ECDHE-RSA-AES128-SHA"))
    assert ciphers.split(":@")[0] == "ECDHE-RSA-AES128-SHA"
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.set_ciphers(ciphers)
    offered = {c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"}
    assert offered == {"ECDHE-RSA-AES128-SHA"}
    assert all(c["auth"] not in ("auth-null", None) and c["symmetric"] != "null"
               for c in context.get_ciphers())
    for entry in CIPHER_STRINGS:
        assert entry in caplog.text
    assert webhook_tls_args(custom(minimum, *CIPHER_STRINGS, "ECDHE-RSA-AES128-SHA"))[1:] == (
        "--tls-ciphers=TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",)


def test_a_custom_profile_of_cipher_strings_alone_is_tls_1_3(
        caplog: pytest.LogCaptureFixture) -> None:
    """Nothing usable left: TLS 1.3 only (whose suites are all authenticated), never the
    server's defaults and never the strings themselves."""
    assert python_tls_policy(custom("VersionTLS10", *CIPHER_STRINGS)) == (
        ssl.TLSVersion.TLSv1_3, "")
    assert webhook_tls_args(custom("VersionTLS10", *CIPHER_STRINGS)) == (
        "--tls-min-version=1.3",)


def test_the_rendered_webhook_follows_the_profile_and_nothing_else_changes() -> None:
    def by_name(config: EffectiveConfig) -> dict[tuple[str, str], dict[str, Any]]:
        return {(obj["kind"], obj["metadata"]["name"]): obj
                for obj in render_operand(config).objects()}

    base, modern = by_name(EffectiveConfig()), by_name(
        EffectiveConfig(tls_profile=PREDEFINED["Modern"]))
    assert base.keys() == modern.keys()
    changed = [key for key, obj in base.items() if modern[key] != obj]
    assert changed == [("Deployment", "external-secrets-webhook")]
    webhook = modern[changed[0]]
    args = webhook["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-1] == "--tls-min-version=1.3"
    assert not any(arg.startswith("--tls-ciphers") for arg in args)


# --- the operator's own servers (Python's ssl) --------------------------------------------------

def test_python_policy_of_intermediate() -> None:
    version, ciphers = python_tls_policy(INTERMEDIATE)
    assert version is ssl.TLSVersion.TLSv1_2
    assert ciphers.split(":") == list(INTERMEDIATE.ciphers[3:])
    ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).set_ciphers(ciphers)


def test_python_policy_of_modern_sets_no_cipher() -> None:
    assert python_tls_policy(PREDEFINED["Modern"]) == (ssl.TLSVersion.TLSv1_3, "")


def test_python_policy_drops_unknown_names_with_a_log_line(
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "manager.tls_profile")
    version, ciphers = python_tls_policy(custom("VersionTLS11", "NOT-A-CIPHER",
                                                "ECDHE-RSA-AES256-GCM-SHA384"))
    # Below TLS 1.2 OpenSSL's security level must allow what the profile allows.
    assert (version, ciphers) == (ssl.TLSVersion.TLSv1_1,
                                  "ECDHE-RSA-AES256-GCM-SHA384:@SECLEVEL=0")
    assert "dropped=NOT-A-CIPHER" in caplog.text


# --- watching and reporting it -------------------------------------------------------------------

def test_only_the_profile_of_the_apiserver_counts() -> None:
    spec = WatchSpec("config.openshift.io/v1", "APIServer", spec_field="tlsSecurityProfile")
    base = {"metadata": {"name": "cluster", "resourceVersion": "1", "generation": 1},
            "spec": {"audit": {"profile": "Default"}}}
    unrelated = {"metadata": {"name": "cluster", "resourceVersion": "2", "generation": 2,
                              "labels": {"a": "b"}},
                 "spec": {"audit": {"profile": "WriteRequestBodies"}}}
    changed = {**base, "spec": {"tlsSecurityProfile": {"type": "Old", "old": {}}}}
    assert fingerprint(unrelated, spec) == fingerprint(base, spec)
    assert fingerprint(changed, spec) != fingerprint(base, spec)
    assert spec.accept == "application/json"


def test_status_shows_the_profile_once_applied() -> None:
    config = EffectiveConfig(tls_profile=PREDEFINED["Old"])
    ready = Outcome(OutcomeKind.READY, "Reconciled", "ok", applied=True)
    assert esc_fields(config, ready)["tlsProfile"] == {"type": "Old",
                                                       "minTLSVersion": "VersionTLS10"}
    removed = Outcome(OutcomeKind.REMOVED, "Removed", "gone")
    assert esc_fields(config, removed)["tlsProfile"] is None
