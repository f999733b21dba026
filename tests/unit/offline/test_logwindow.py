"""manager/offline/logwindow.py: MUST_GATHER_SINCE and MUST_GATHER_SINCE_TIME (and the
`--since`/`--since-time` flags of `gather`) as the pod log API's sinceSeconds and sinceTime;
a value that cannot be used is an error naming the variable, before anything is read."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from manager.commands.gather import requested_window
from manager.offline.logwindow import (
    SINCE_TIME_VARIABLE,
    SINCE_VARIABLE,
    LogWindow,
    LogWindowError,
    from_environ,
    parse_duration,
)
from manager.paths import REPO_ROOT


@pytest.mark.parametrize(("text", "seconds"), [
    ("2h", 7200), ("30m", 1800), ("90s", 90),
    ("2h0m0s", 7200), ("1h30m0s", 5400),  # as oc passes it (Go's Duration.String)
    ("1.5h", 5400), ("1m30.5s", 91),      # fractions; rounded up to a whole second
    ("500ms", 1), ("1500ms", 2), ("10us", 1), ("1µs", 1), (" 5m ", 300),
])
def test_durations_parse_as_go_writes_them(text: str, seconds: int) -> None:
    assert parse_duration(text, SINCE_VARIABLE) == seconds


@pytest.mark.parametrize("text", ["2", "2d", "h", "-1h", "2h ago", "1h-30m", "0s", "0", "1e3s",
                                  "2H"])
def test_a_bad_duration_names_the_variable(text: str) -> None:
    with pytest.raises(LogWindowError) as error:
        from_environ({SINCE_VARIABLE: text})
    assert str(error.value).startswith(f"{SINCE_VARIABLE}={text!r} ")


@pytest.mark.parametrize(("text", "utc"), [
    ("2025-06-01T10:00:00Z", "2025-06-01T10:00:00Z"),
    ("2025-06-01t10:00:00z", "2025-06-01T10:00:00Z"),
    ("2025-06-01T12:30:00+02:00", "2025-06-01T10:30:00Z"),
    ("2025-06-01T05:00:00-05:30", "2025-06-01T10:30:00Z"),
    ("2025-06-01T10:00:07.999999999Z", "2025-06-01T10:00:07Z"),  # to the second
])
def test_times_parse_as_rfc3339_in_utc(text: str, utc: str) -> None:
    window = from_environ({SINCE_TIME_VARIABLE: text})
    assert window.query() == {"sinceTime": utc}
    assert window.since_time is not None
    assert window.since_time.tzinfo == UTC


@pytest.mark.parametrize("text", [
    "2025-06-01", "2025-06-01T10:00:00", "2025-06-01 10:00:00Z", "2025-13-01T10:00:00Z",
    "2025-02-30T10:00:00Z", "2025-06-01T25:00:00Z", "yesterday", "1748772000",
])
def test_a_bad_time_names_the_variable(text: str) -> None:
    with pytest.raises(LogWindowError) as error:
        from_environ({SINCE_TIME_VARIABLE: text})
    assert str(error.value).startswith(f"{SINCE_TIME_VARIABLE}={text!r} is not an RFC 3339 time")


def test_both_at_once_is_an_error_naming_both() -> None:
    with pytest.raises(LogWindowError, match=f"{SINCE_VARIABLE} and {SINCE_TIME_VARIABLE} are "
                                             "both set"):
        from_environ({SINCE_VARIABLE: "2h", SINCE_TIME_VARIABLE: "2025-06-01T10:00:00Z"})


def test_unset_or_empty_means_every_line() -> None:
    for environ in ({}, {SINCE_VARIABLE: "", SINCE_TIME_VARIABLE: " "}):
        window = from_environ(environ)
        assert window == LogWindow()
        assert window.query() == {}


def test_the_log_api_gets_one_parameter() -> None:
    assert from_environ({SINCE_VARIABLE: "2h"}).query() == {"sinceSeconds": "7200"}
    assert LogWindow(since_time=datetime(2025, 6, 1, 10, tzinfo=UTC)).query() == {
        "sinceTime": "2025-06-01T10:00:00Z"}


def test_the_flags_win_over_the_variables_and_are_named_in_errors() -> None:
    environ = {SINCE_VARIABLE: "not a duration"}
    assert requested_window("5m", None, environ) == LogWindow(since_seconds=300)
    assert requested_window(None, None, {SINCE_VARIABLE: "5m"}) == LogWindow(since_seconds=300)
    with pytest.raises(LogWindowError, match=r"^--since-time='noon' "):
        requested_window(None, "noon", {})
    with pytest.raises(LogWindowError, match=rf"^{SINCE_VARIABLE}='not a duration' "):
        requested_window(None, None, environ)


@pytest.mark.parametrize(("variable", "value"), [(SINCE_VARIABLE, "2days"),
                                                 (SINCE_TIME_VARIABLE, "2025-06-01")])
def test_gather_refuses_a_bad_value_before_reading_anything(variable: str, value: str,
                                                            tmp_path: Path) -> None:
    """The command itself (as the image's /usr/bin/gather runs it): exit status 2, the
    variable named, nothing written; no cluster is needed to get there."""
    environ = {**os.environ, variable: value, "KUBECONFIG": "/nonexistent"}
    result = subprocess.run([sys.executable, "-m", "manager", "gather", "--dest-dir",
                             str(tmp_path / "out")], capture_output=True, text=True, check=False,
                            timeout=60, cwd=REPO_ROOT, env=environ)
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith(f"error: no bundle: {variable}={value!r} "), result.stderr
    assert not (tmp_path / "out").exists()
