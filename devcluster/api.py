"""A minimal synchronous JSON client for the local cluster's API server (admin token).

The simulated cluster's own processes (node setup, the pod runner) need a handful of
requests and one watch; the standard library is enough, and keeps this test
infrastructure free of the operator's client and its event loop.
"""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

JsonObject = dict[str, Any]


class ApiError(RuntimeError):
    def __init__(self, status: int, message: str):
        super().__init__(f"{status}: {message}")
        self.status = status


@dataclass(frozen=True)
class Api:
    server: str  # https://127.0.0.1:PORT
    token: str
    cafile: Path

    @property
    def address(self) -> tuple[str, int]:
        """The API server's loopback host and port."""
        host, port = self.server.removeprefix("https://").rsplit(":", 1)
        return host, int(port)

    def _open(self, method: str, path: str, query: Mapping[str, str] | None = None,
              body: object = None, *, content_type: str = "application/json",
              timeout: float | None = 30.0) -> Any:
        if not self.server.startswith("https://127.0.0.1:"):
            raise ValueError(f"not a local API server: {self.server}")
        url = self.server + path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method, headers={  # noqa: S310
            "Authorization": f"Bearer {self.token}", "Content-Type": content_type,
            "Accept": "application/json"})
        context = ssl.create_default_context(cafile=str(self.cafile))
        try:
            return urllib.request.urlopen(request, context=context, timeout=timeout)  # noqa: S310
        except urllib.error.HTTPError as error:
            raise ApiError(error.code, error.read().decode(errors="replace")[:500]) from None

    def request(self, method: str, path: str, query: Mapping[str, str] | None = None,
                body: object = None, *, content_type: str = "application/json") -> JsonObject:
        with self._open(method, path, query, body, content_type=content_type) as response:
            data = response.read()
        return json.loads(data) if data else {}

    def get(self, path: str) -> JsonObject | None:
        try:
            return self.request("GET", path)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def merge_patch(self, path: str, body: JsonObject) -> JsonObject:
        return self.request("PATCH", path, body=body, content_type="application/merge-patch+json")

    def apply(self, path: str, body: JsonObject, manager: str) -> JsonObject:
        return self.request("PATCH", path, {"fieldManager": manager, "force": "true"}, body,
                            content_type="application/apply-patch+yaml")

    def watch(self, path: str, query: Mapping[str, str], timeout_seconds: int = 240,
              ) -> Iterator[JsonObject]:
        """Events of one watch request, until the server ends it."""
        query = {**query, "watch": "true", "allowWatchBookmarks": "true",
                 "timeoutSeconds": str(timeout_seconds)}
        with self._open("GET", path, query, timeout=timeout_seconds + 30) as response:
            for line in response:
                if line.strip():
                    yield json.loads(line)


def answers_ok(url: str, timeout: float = 1.0) -> bool:
    """Whether a plain-HTTP endpoint (a health check, a registry) answers 200 now."""
    if not url.startswith("http://"):
        raise ValueError(f"not a plain-HTTP URL: {url}")
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (http)
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False
