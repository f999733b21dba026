"""Who may read /metrics: the bearer token of the request, checked as the API server would.

A TokenReview (authentication.k8s.io/v1) says whose token it is; a SubjectAccessReview
(authorization.k8s.io/v1) whether that user may `get` the non-resource URL /metrics. So the
ordinary RBAC decides: a ClusterRole with `nonResourceURLs: [/metrics]` and `verbs: [get]`,
bound to the scraper (the bundle binds one to openshift-monitoring/prometheus-k8s).

Answers are cached by a digest of the token (never the token itself). ALLOWED_SECONDS is
kube-apiserver's own default for caching webhook token reviews (2 min): a Prometheus
scraping every 30 s costs two reviews every fourth scrape, and a revoked grant or deleted
ServiceAccount loses access within 2 min. Refusals are cached for only DENIED_SECONDS, so a
grant just made works almost at once. Errors (the API server unreachable) are not cached.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from manager.client.kube import ApiError, JsonObject, Kube

logger = logging.getLogger(__name__)

ALLOWED_SECONDS: Final = 120.0
DENIED_SECONDS: Final = 10.0
# Distinct tokens remembered: Prometheus replicas and a few people with curl; beyond that
# the oldest answers go first, so the memory stays bounded whatever clients send.
CACHE_ENTRIES: Final = 256

TOKEN_REVIEWS: Final = "/apis/authentication.k8s.io/v1/tokenreviews"  # noqa: S105 (a path)
ACCESS_REVIEWS: Final = "/apis/authorization.k8s.io/v1/subjectaccessreviews"

OK, UNAUTHORIZED, FORBIDDEN, UNAVAILABLE = 200, 401, 403, 503


def bearer_token(authorization: str | None) -> str | None:
    scheme, _, token = (authorization or "").partition(" ")
    return token.strip() or None if scheme.lower() == "bearer" else None


class MetricsAccess:
    """Decides each request's status: 200 may read, 401 no valid token, 403 not allowed."""

    def __init__(self, kube: Kube, path: str, *,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.kube = kube
        self.path = path
        self.clock = clock
        self._answers: OrderedDict[bytes, tuple[float, int]] = OrderedDict()

    async def status(self, authorization: str | None) -> int:
        token = bearer_token(authorization)
        if token is None:
            return UNAUTHORIZED
        key = hashlib.sha256(token.encode()).digest()
        cached = self._answers.get(key)
        if cached is not None and cached[0] > self.clock():
            return cached[1]
        try:
            answer = await self._review(token)
        except ApiError as error:
            logger.warning("action=metrics-access result=error status=%d error=%r",
                           error.status, error.message)
            return UNAVAILABLE
        ttl = ALLOWED_SECONDS if answer == OK else DENIED_SECONDS
        self._answers[key] = (self.clock() + ttl, answer)
        self._answers.move_to_end(key)
        while len(self._answers) > CACHE_ENTRIES:
            self._answers.popitem(last=False)
        return answer

    async def _review(self, token: str) -> int:
        review = await self.kube.request("POST", TOKEN_REVIEWS, body={
            "apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview",
            "spec": {"token": token}})
        status = review.get("status") or {}
        if not status.get("authenticated"):
            return UNAUTHORIZED
        access = await self.kube.request("POST", ACCESS_REVIEWS, body=_access_review(
            status.get("user") or {}, self.path))
        return OK if (access.get("status") or {}).get("allowed") else FORBIDDEN


def _access_review(user: JsonObject, path: str) -> JsonObject:
    spec: JsonObject = {"user": user.get("username", ""), "groups": user.get("groups") or [],
                        "nonResourceAttributes": {"path": path, "verb": "get"}}
    if user.get("uid"):
        spec["uid"] = user["uid"]
    if user.get("extra"):
        spec["extra"] = user["extra"]
    return {"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
            "spec": spec}
