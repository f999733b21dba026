"""Kubernetes value syntax used by the config validation: durations, quantities, names."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from manager import kube_values
from manager.kube_values import InvalidValueError


@pytest.mark.parametrize(("text", "nanoseconds"), [
    ("0s", 0), ("5m", 300 * 10**9), ("1h30m", 5400 * 10**9), ("8760h", 8760 * 3600 * 10**9),
    ("1.5h", 5400 * 10**9), ("1.h", 3600 * 10**9), ("300ms", 300 * 10**6), ("2us", 2000),
    ("2µs", 2000), ("7ns", 7), ("1h1m1s1ms1us1ns", 3661001001001), ("0.5s", 5 * 10**8),
])
def test_go_durations_parse_like_time_parse_duration(text: str, nanoseconds: int) -> None:
    assert kube_values.parse_go_duration(text) == nanoseconds


@pytest.mark.parametrize("text", ["", "5", "m", "5 m", "5mm", "1d", "1.h.", "3000000h",
                                  "1h-5m",
                                  # Go reads these; the CRDs refuse them, and so do we.
                                  "0", ".5h", "+5m", "-3s", "1h.5m", "2μs"])
def test_malformed_or_too_long_durations_are_refused(text: str) -> None:
    with pytest.raises(InvalidValueError):
        kube_values.parse_go_duration(text)


@pytest.mark.parametrize(("nanoseconds", "text"), [
    (0, "0s"), (7, "7ns"), (1500, "1.5µs"), (2_500_000, "2.5ms"), (10**9, "1s"),
    (90 * 10**9, "1m30s"), (300 * 10**9, "5m0s"), (3600 * 10**9, "1h0m0s"),
    (8760 * 3600 * 10**9, "8760h0m0s"), (3661 * 10**9 + 5 * 10**8, "1h1m1.5s"),
    (-90 * 10**9, "-1m30s"),
])
def test_go_durations_print_like_duration_string(nanoseconds: int, text: str) -> None:
    assert kube_values.format_go_duration(nanoseconds) == text


@given(st.integers(min_value=0, max_value=2**63 - 1))
def test_printed_durations_parse_back_to_the_same_value(nanoseconds: int) -> None:
    assert kube_values.parse_go_duration(kube_values.format_go_duration(nanoseconds)) == \
        nanoseconds


@pytest.mark.parametrize(("quantity", "value"), [
    ("100m", Fraction(1, 10)), ("0.5", Fraction(1, 2)), ("1", 1), (2, 2), ("1Ki", 1024),
    ("256Mi", 256 * 2**20), ("1G", 10**9), ("1e3", 1000), ("1E-3", Fraction(1, 1000)),
    ("5n", Fraction(5, 10**9)), ("3u", Fraction(3, 10**6)), ("2E", 2 * 10**18), ("+1k", 1000),
])
def test_quantities_parse_to_their_exact_value(quantity: str | int, value: Fraction) -> None:
    assert kube_values.parse_quantity(quantity) == value


@pytest.mark.parametrize("quantity", ["", "1.2.3", "1 Gi", "1gi", "Mi", "1KiB", 1.5, True, None])
def test_malformed_quantities_are_refused(quantity: object) -> None:
    with pytest.raises(InvalidValueError):
        kube_values.parse_quantity(quantity)


@pytest.mark.parametrize(("key", "valid"), [
    ("team", True), ("example.com/team", True), ("a.b-c/d_e.f", True), ("x" * 63, True),
    ("x" * 64, False), ("", False), ("/team", False), ("Example.com/team", False),
    ("team-", False), ("a/b/c", False), (f"{'a' * 254}/x", False),
])
def test_qualified_names(key: str, valid: bool) -> None:
    assert (kube_values.qualified_name_problem(key) is None) is valid


@pytest.mark.parametrize(("value", "valid"), [
    ("", True), ("v1.3.2", True), ("a_b-c.d", True), ("x" * 63, True), ("x" * 64, False),
    ("-a", False), ("a b", False), ("1.0+build", False),
])
def test_label_values(value: str, valid: bool) -> None:
    assert (kube_values.label_value_problem(value) is None) is valid


def test_dns_names() -> None:
    assert kube_values.is_dns_label("external-secrets")
    assert not kube_values.is_dns_label("external.secrets")
    assert not kube_values.is_dns_label("x" * 64)
    assert kube_values.is_dns_subdomain("bitwarden.tls")
    assert not kube_values.is_dns_subdomain("Bitwarden")
