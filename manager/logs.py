"""The operator's log: one line per action, `key=value` fields, bounded length, no secrets.

Long texts (a Degraded message can run to a few hundred characters) are in the
ExternalSecretsConfig's status and Events; a log line carries at most MAX_MESSAGE characters of
its message and says how much it left out. The start-up line says which operator runs against
which API server with which settings; proxy URLs lose any user and password first.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from urllib.parse import urlsplit, urlunsplit

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s %(message)s"
MAX_MESSAGE = 400


class BoundedFormatter(logging.Formatter):
    """Cuts a record's message at `limit` characters (tracebacks of crashes stay whole)."""

    def __init__(self, fmt: str = LOG_FORMAT, limit: int = MAX_MESSAGE):
        super().__init__(fmt)
        self.limit = limit

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 (logging's name)
        message = record.message
        if len(message) > self.limit:
            left_out = len(message) - self.limit
            record.message = (f"{message[:self.limit]}... ({left_out} more characters; the "
                              "full text is in the ExternalSecretsConfig status)")
        try:
            return super().formatMessage(record)
        finally:
            record.message = message


def brief(text: str, limit: int = 160) -> str:
    """The start of a long text for a log line (the whole of it is in the status)."""
    return text if len(text) <= limit else f"{text[:limit]}..."


def configure_logging(verbose: bool = False) -> None:
    """One line per action to stderr; kopf's own chatter only when verbose."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(BoundedFormatter())
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO, handlers=[handler],
                        force=True)
    for noisy in ("kopf", "aiohttp.access"):
        logging.getLogger(noisy).setLevel(logging.DEBUG if verbose else logging.WARNING)


def without_credentials(url: str) -> str:
    """A URL with any user and password replaced by `***` (proxy URLs may carry them)."""
    parts = urlsplit(url)
    if not (parts.username or parts.password):
        return url
    host = parts.hostname or ""
    netloc = f"***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


def fields(values: Mapping[str, object]) -> str:
    """`key=value` pairs; values with spaces are quoted."""
    return " ".join(f"{key}={value!r}" if " " in str(value) else f"{key}={value}"
                    for key, value in values.items())
