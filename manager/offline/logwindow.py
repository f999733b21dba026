"""How far back a support bundle's logs go.

`oc adm must-gather --since 2h` or `--since-time 2025-06-01T10:00:00Z` reaches the gather
pod as the variable MUST_GATHER_SINCE (a duration as Go prints it: `2h0m0s`) or
MUST_GATHER_SINCE_TIME (an RFC 3339 time); `python -m manager gather` takes the same values
as `--since` and `--since-time`. They become the pod log API's `sinceSeconds` (rounded up to
a whole second) and `sinceTime` (to the second: the API server passes no finer time on to
the kubelet). The log API takes one of the two only, so giving both is an error, as is a
value that does not parse: the error names the variable or flag.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone

SINCE_VARIABLE = "MUST_GATHER_SINCE"
SINCE_TIME_VARIABLE = "MUST_GATHER_SINCE_TIME"

# Go's time.ParseDuration units, in seconds (`µs` as both micro signs).
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0,
          "h": 3600.0}
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)")
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(\.\d+)?"
                      r"(?:([Zz])|([+-])(\d{2}):(\d{2}))")


class LogWindowError(ValueError):
    """A since value that cannot be used; the message names where it came from."""


@dataclass(frozen=True)
class LogWindow:
    """At most one of the two: the logs of the last `since_seconds`, or since `since_time`
    (UTC, whole seconds). Neither: every line the log API keeps (within the tail limit)."""

    since_seconds: int | None = None
    since_time: datetime | None = None

    def query(self) -> dict[str, str]:
        """The pod log API's parameters."""
        if self.since_seconds is not None:
            return {"sinceSeconds": str(self.since_seconds)}
        if self.since_time is not None:
            return {"sinceTime": format_time(self.since_time)}
        return {}

    def describe(self) -> str:
        """What the bundle's manifest says of its logs."""
        if self.since_seconds is not None:
            return f"lines of the last {self.since_seconds} seconds (sinceSeconds)"
        if self.since_time is not None:
            return f"lines since {format_time(self.since_time)} (sinceTime)"
        return "every line the log API keeps"


def format_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_duration(text: str, source: str) -> int:
    """Whole seconds (rounded up) of a Go duration such as `2h`, `1h30m0s` or `90s`."""
    value = text.strip()
    position, seconds = 0, 0.0
    for term in _TERM.finditer(value):
        if term.start() != position:
            break
        seconds += float(term.group(1)) * _UNITS[term.group(2)]
        position = term.end()
    if not value or position != len(value):
        raise LogWindowError(
            f"{source}={text!r} is not a duration: give a number and a unit (h, m, s, ms), "
            "such as 2h, 30m or 1h30m0s")
    if seconds <= 0:
        raise LogWindowError(f"{source}={text!r} must be more than 0 (unset it for every line)")
    return math.ceil(seconds)


def parse_time(text: str, source: str) -> datetime:
    """An RFC 3339 time (`2025-06-01T10:00:00Z`, `2025-06-01T12:00:00.5+02:00`) in UTC,
    truncated to the second."""
    found = _RFC3339.fullmatch(text.strip())
    try:
        if found is None:
            raise ValueError("not in the form YYYY-MM-DDTHH:MM:SS with Z or an offset")
        year, month, day, hour, minute, second = (int(found.group(n)) for n in range(1, 7))
        offset = timedelta(0)
        if found.group(9):
            sign = 1 if found.group(9) == "+" else -1
            offset = sign * timedelta(hours=int(found.group(10)), minutes=int(found.group(11)))
        moment = datetime(year, month, day, hour, minute, second, tzinfo=timezone(offset))
    except ValueError as error:
        raise LogWindowError(f"{source}={text!r} is not an RFC 3339 time ({error}), such as "
                             "2025-06-01T10:00:00Z") from None
    return moment.astimezone(UTC)


def log_window(since: str | None, since_time: str | None, *, since_source: str,
               since_time_source: str) -> LogWindow:
    """The window of a duration or a time, each named by where it came from; empty values
    count as unset (an unset variable and an empty one are the same to a shell script)."""
    since, since_time = (since or "").strip() or None, (since_time or "").strip() or None
    if since is not None and since_time is not None:
        raise LogWindowError(f"{since_source} and {since_time_source} are both set: the log "
                             "API takes one of them; unset one")
    if since is not None:
        return LogWindow(since_seconds=parse_duration(since, since_source))
    if since_time is not None:
        return LogWindow(since_time=parse_time(since_time, since_time_source))
    return LogWindow()


def from_environ(environ: Mapping[str, str]) -> LogWindow:
    """The window `oc adm must-gather --since/--since-time` asks for."""
    return log_window(environ.get(SINCE_VARIABLE), environ.get(SINCE_TIME_VARIABLE),
                      since_source=SINCE_VARIABLE, since_time_source=SINCE_TIME_VARIABLE)
