"""What teams feel while the stack changes under them: admissions through the real webhook.

Every write of an ExternalSecret or SecretStore goes through the operand's validating webhook
(failurePolicy Fail by default), so a webhook that is down or untrusted refuses every team's
writes. `AdmissionSampler` asks the API server every `interval` for a server-side dry-run
create of a SecretStore (the webhook is called, nothing is stored) and counts the refusals,
with their answers, and the longest stretch of time during which every attempt was refused.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections import Counter
from dataclasses import dataclass, field

from manager.kube import ApiError, Kube

URL = re.compile(r'"https?://[^"]*"')  # the webhook's URL in an answer: the same every time
STORE = {"apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
         "metadata": {"name": "admission-sample"},
         "spec": {"provider": {"fake": {"data": [{"key": "k", "value": "v"}]}}}}


@dataclass
class AdmissionFigures:
    attempts: int = 0
    refused: int = 0
    answers: Counter[str] = field(default_factory=Counter)
    longest_gap: float = 0.0
    """Seconds from the first refusal of a run of refusals to the next admission."""

    def __str__(self) -> str:
        answers = "; ".join(f"{n}x {text}" for text, n in self.answers.most_common(3))
        return (f"{self.refused} of {self.attempts} admissions refused, longest gap "
                f"{self.longest_gap:.2f} s" + (f" ({answers})" if answers else ""))


class AdmissionSampler:
    """Dry-run SecretStore creates in `namespace` every `interval` seconds, until stopped."""

    def __init__(self, kube: Kube, namespace: str, interval: float = 0.2):
        self.kube = kube
        self.path = f"/apis/external-secrets.io/v1/namespaces/{namespace}/secretstores"
        self.interval = interval
        self.figures = AdmissionFigures()
        self._refused_since: float | None = None
        self._task: asyncio.Task[None] | None = None

    async def __aenter__(self) -> AdmissionSampler:
        await self.sample()  # admitted before the window opens: a refusal here is no figure
        assert self.figures.refused == 0, f"refused before sampling began: {self.figures}"
        self.figures = AdmissionFigures()
        self._task = asyncio.create_task(self._run())
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        if self._refused_since is not None:  # still refusing at the end: the gap is open
            self._gap_ends(time.monotonic())

    async def sample(self) -> None:
        """One attempt, counted."""
        self.figures.attempts += 1
        try:
            await self.kube.request("POST", self.path, body=STORE, query={"dryRun": "All"},
                                    timeout=10)
        except ApiError as error:
            self.figures.refused += 1
            answer = URL.sub("<url>", error.message)
            self.figures.answers[f"{error.status} {answer[:240]}"] += 1
            if self._refused_since is None:
                self._refused_since = time.monotonic()
            return
        if self._refused_since is not None:
            self._gap_ends(time.monotonic())

    def _gap_ends(self, now: float) -> None:
        assert self._refused_since is not None
        self.figures.longest_gap = max(self.figures.longest_gap, now - self._refused_since)
        self._refused_since = None

    async def _run(self) -> None:
        while True:
            started = time.monotonic()
            await self.sample()
            await asyncio.sleep(max(0.0, self.interval - (time.monotonic() - started)))
