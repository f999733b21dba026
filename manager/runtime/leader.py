"""Leader election: one operator at a time, on a coordination.k8s.io/v1 Lease.

    candidate ──(lease free or expired)──► leader ──(renew fails past the deadline)──► exit 1
        ▲   │                                 │
        └───┘ wait (retry period)             └──(SIGTERM)──► release: holder "", 1 s

Every candidate reads the Lease in the operator's namespace each retry period. It takes the
Lease when nobody holds it (never created, or released by a leader that stopped cleanly) or
when the holder has not renewed it for `leaseDurationSeconds`, as measured on the
candidate's own monotonic clock from the moment it saw the record change: the holder's
clock and the timestamps it writes play no part, so clock skew between nodes cannot make two
leaders. Every write carries the resourceVersion read just before (an update) or fails when
the Lease exists (a create), so of two candidates racing for it the API server lets one win.

The leader renews every retry period; when no renewal has succeeded for the renew deadline
(shorter than the lease duration, so it stops before any candidate may take over) it has
lost the Lease. The deadline counts from when the last successful write was sent, and the
leader gives up at the deadline itself: a renewal still in flight then is abandoned, and
when the next retry would come after the deadline it wakes at the deadline instead. The
decision logic is pure (`decide`, `LeaseRecord`) and tested without a cluster;
`LeaderElector` does the I/O with our JSON client.

The Lease names the operator's Deployment as its owner where that Deployment exists in the
Lease's namespace (`ownership.operator_owner_reference`, read before the first write and
kept for the process): uninstalling the operator (OLM deletes the Deployment) then has the
garbage collector delete the Lease too, instead of leaving it behind. Every write carries
it, so a Lease written by a release without it gains it at the next renewal. Outside a
cluster (no such Deployment) the Lease has no owner.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import os
import secrets
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from manager import metrics
from manager.apply.ownership import operator_owner_reference
from manager.client.kube import ApiError, JsonObject, Kube
from manager.names import FIELD_MANAGER, LEASE_NAME

logger = logging.getLogger(__name__)

LEASE_API = "/apis/coordination.k8s.io/v1"
RELEASE_TIMEOUT = 1.0


@dataclass(frozen=True)
class LeaseTiming:
    """In seconds. The defaults are OpenShift's recommendation for its operators: a leader
    rides out an API server outage of about 107 s (a control-plane upgrade) before it gives
    up, and a crashed leader is replaced within 137 s; the waiting candidates read the Lease
    every 26 s, which costs one GET each."""

    lease_duration: float = 137.0
    renew_deadline: float = 107.0
    retry_period: float = 26.0

    def __post_init__(self) -> None:
        if not self.lease_duration > self.renew_deadline > self.retry_period > 0:
            raise ValueError("leader election needs lease duration > renew deadline > retry "
                             f"period > 0, not {self.lease_duration:g} / "
                             f"{self.renew_deadline:g} / {self.retry_period:g}")


@dataclass(frozen=True)
class LeaseRecord:
    """The spec of a Lease, as far as the election reads it."""

    holder: str = ""
    duration_seconds: int = 0
    acquire_time: str | None = None
    renew_time: str | None = None
    transitions: int = 0

    @classmethod
    def from_lease(cls, lease: JsonObject) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(holder=spec.get("holderIdentity") or "",
                   duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
                   acquire_time=spec.get("acquireTime"), renew_time=spec.get("renewTime"),
                   transitions=int(spec.get("leaseTransitions") or 0))

    def spec(self) -> JsonObject:
        return {"holderIdentity": self.holder, "leaseDurationSeconds": self.duration_seconds,
                "acquireTime": self.acquire_time, "renewTime": self.renew_time,
                "leaseTransitions": self.transitions}


class Decision(enum.Enum):
    CREATE = "create"  # no Lease yet
    RENEW = "renew"    # we hold it
    TAKE = "take"      # free (released) or expired
    WAIT = "wait"      # someone else holds it, still valid


class Attempt(enum.Enum):
    HELD = "held"      # we hold the Lease (created, taken or renewed)
    TAKEN = "taken"    # another candidate holds it, still valid
    FAILED = "failed"  # the API server did not answer, or another write came first


def decide(record: LeaseRecord | None, me: str, observed_at: float, now: float) -> Decision:
    """What a candidate does with the Lease it just read. `observed_at` is when (on our
    monotonic clock) the record was first seen as it is now."""
    if record is None:
        return Decision.CREATE
    if record.holder == me:
        return Decision.RENEW
    if not record.holder:
        return Decision.TAKE
    if now >= observed_at + record.duration_seconds:
        return Decision.TAKE
    return Decision.WAIT


def next_record(current: LeaseRecord | None, decision: Decision, me: str,
                timing: LeaseTiming, stamp: str) -> LeaseRecord:
    """The record a candidate writes for `decision` (not WAIT)."""
    duration = max(1, round(timing.lease_duration))
    if decision is Decision.RENEW and current is not None:
        return LeaseRecord(me, duration, current.acquire_time or stamp, stamp,
                           current.transitions)
    transitions = 0 if current is None else current.transitions + 1
    return LeaseRecord(me, duration, stamp, stamp, transitions)


def released(current: LeaseRecord, stamp: str) -> LeaseRecord:
    """What a leader that stops cleanly leaves: nobody holds the Lease, so a candidate takes
    it at its next read instead of waiting for the lease duration."""
    return LeaseRecord("", 1, stamp, stamp, current.transitions)


def micro_time(moment: datetime | None = None) -> str:
    """A MicroTime as the API server stores it."""
    return (moment or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def candidate_identity(environ: dict[str, str] | None = None) -> str:
    """The pod name (or the host name) and a random suffix: a restarted container in the
    same pod is a new candidate, never mistaken for the previous holder."""
    environ = dict(os.environ) if environ is None else environ
    name = environ.get("POD_NAME") or socket.gethostname()
    return f"{name}_{secrets.token_hex(4)}"


class LeaderElector:
    """Campaigns for, holds, and releases the Lease `name` in `namespace`."""

    def __init__(self, kube: Kube, namespace: str, identity: str, timing: LeaseTiming, *,
                 name: str = LEASE_NAME, clock: Callable[[], float] = time.monotonic):
        self.kube = kube
        self.path = f"{LEASE_API}/namespaces/{namespace}/leases/{name}"
        self.namespace = namespace
        self.identity = identity
        self.timing = timing
        self.clock = clock
        self.leading = False
        self._seen: LeaseRecord | None = None
        self._seen_at: float | None = None  # None: nothing read yet
        self._resource_version: str | None = None
        self._seen_owners: list[JsonObject] | None = None  # of the Lease as last read
        self.renewed_at: float | None = None
        """When (on `clock`) the last write that made us the holder was sent: no candidate
        can have seen our record earlier, so none takes the Lease over before this plus the
        lease duration."""
        self._owner: tuple[JsonObject | None] | None = None
        """The operator's Deployment as the Lease's owner reference, once read (None in it:
        there is no such Deployment)."""

    async def acquire(self) -> None:
        """Until this instance leads. Reads the Lease each retry period; writes only when it
        may take it."""
        logger.info("action=leader result=waiting identity=%s lease=%s", self.identity,
                    self.path.rsplit("/", 1)[-1])
        metrics.record_leader(False)
        while await self.attempt() is not Attempt.HELD:
            await asyncio.sleep(self.timing.retry_period)
        self.leading = True
        metrics.record_leader(True)
        logger.info("action=leader result=gained identity=%s", self.identity)

    async def hold(self) -> None:
        """Renew every retry period; returns when the Lease is lost: another candidate
        holds it, or no renewal succeeded for the renew deadline (it may be taken soon).
        The deadline is kept to the moment, not to the next retry tick past it."""
        if self.renewed_at is None:  # not acquired through `attempt` (tests)
            self.renewed_at = self.clock()
        while True:
            deadline = self.renewed_at + self.timing.renew_deadline
            await asyncio.sleep(max(0.0, min(self.timing.retry_period,
                                             deadline - self.clock())))
            remaining = deadline - self.clock()
            attempt = Attempt.FAILED
            if remaining > 0:
                # Not asyncio.wait_for: on Python 3.11 it loses a cancellation (the stop)
                # that arrives just as the attempt completes (CPython gh-86296).
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        attempt = await self.attempt()
            if attempt is Attempt.HELD:
                continue
            if attempt is Attempt.TAKEN or self.clock() >= deadline:
                self._lost(attempt, self.clock() - self.renewed_at)
                return

    def _lost(self, attempt: Attempt, since_renewal: float) -> None:
        self.leading = False
        metrics.record_leader(False)
        reason = ("another candidate holds the Lease" if attempt is Attempt.TAKEN
                  else "no renewal within the renew deadline")
        logger.error("action=leader result=lost identity=%s holder=%s "
                     "seconds_since_renewal=%.1f reason=%r", self.identity,
                     self._seen.holder if self._seen else "none", since_renewal, reason)

    async def release(self) -> None:
        """Leave the Lease free (clean stop); a candidate takes it at its next read."""
        if not self.leading or self._seen is None:
            return
        self.leading = False
        metrics.record_leader(False)
        try:
            # A short timeout: SIGTERM must stop the operator within 2 s even when the API
            # server does not answer; the Lease then expires on its own.
            async with asyncio.timeout(RELEASE_TIMEOUT):
                outcome = await self._release()
        except (ApiError, TimeoutError) as error:  # it expires on its own
            logger.warning("action=leader result=release-failed error=%r",
                           str(error) or f"no answer within {RELEASE_TIMEOUT:g} s")
            return
        logger.info("action=leader result=%s identity=%s", outcome, self.identity)

    async def _release(self) -> str:
        """Read, then free the Lease if it is still ours. The read comes first because the
        renewal cancelled at the stop may have reached the server (its answer, with the new
        resourceVersion, never reached us); a write racing ours makes a 409, then we read
        again."""
        while True:
            lease = await self.kube.get(self.path)
            record = None if lease is None else LeaseRecord.from_lease(lease)
            if record is None or record.holder != self.identity:
                return "not-held"  # taken over, or deleted: nothing of ours to free
            self._observe(record, lease)
            owner = await self._owner_reference()
            try:
                await self.kube.request("PUT", self.path,
                                        body=self._lease(released(record, micro_time()), owner),
                                        query={"fieldManager": FIELD_MANAGER})
            except ApiError as error:
                if error.conflict:
                    continue
                raise
            return "released"

    # --- one attempt ----------------------------------------------------------------------

    async def attempt(self) -> Attempt:
        """One read and, when the decision allows, one write."""
        try:
            lease = await self.kube.get(self.path)
            record = None if lease is None else LeaseRecord.from_lease(lease)
            observed_at = self._observe(record, lease)
            decision = decide(record, self.identity, observed_at, self.clock())
            if decision is Decision.WAIT:
                return Attempt.TAKEN
            owner = await self._owner_reference()
            mine = next_record(record, decision, self.identity, self.timing, micro_time())
            sent = self.clock()
            if decision is Decision.CREATE:
                written = await self.kube.create(self.path.rsplit("/", 1)[0],
                                                 self._lease(mine, owner),
                                                 field_manager=FIELD_MANAGER)
            else:  # the resourceVersion read above: a concurrent writer makes this a 409
                written = await self.kube.request("PUT", self.path,
                                                  body=self._lease(mine, owner),
                                                  query={"fieldManager": FIELD_MANAGER})
        except ApiError as error:
            if error.conflict:  # another candidate wrote first; the next read tells who
                return Attempt.FAILED
            logger.warning("action=leader result=error identity=%s error=%r",
                           self.identity, str(error))
            return Attempt.FAILED
        self._observe(LeaseRecord.from_lease(written), written)
        self.renewed_at = sent
        return Attempt.HELD

    def _observe(self, record: LeaseRecord | None, lease: JsonObject | None) -> float:
        """Remember the record and its resourceVersion; when (on our clock) the record was
        first seen as it is now."""
        if self._seen_at is None or record != self._seen:
            self._seen, self._seen_at = record, self.clock()
        self._resource_version = (lease or {}).get("metadata", {}).get("resourceVersion")
        self._seen_owners = (lease or {}).get("metadata", {}).get("ownerReferences")
        return self._seen_at

    async def _owner_reference(self) -> JsonObject | None:
        """The operator's Deployment as an owner reference: read once, before the first
        write; read again at the next write when the read failed (that write keeps the
        owners the Lease has: the election does not wait for the read)."""
        if self._owner is None:
            try:
                self._owner = (await operator_owner_reference(self.kube, self.namespace),)
            except ApiError as error:
                logger.warning("action=read result=error kind=Deployment error=%r", str(error))
                return None
        return self._owner[0]

    def _lease(self, record: LeaseRecord, owner: JsonObject | None = None) -> JsonObject:
        namespace, name = self.path.split("/namespaces/")[1].split("/leases/")
        metadata: JsonObject = {"name": name, "namespace": namespace}
        if self._resource_version:
            metadata["resourceVersion"] = self._resource_version
        # Without an owner read (the read failed), the owners the Lease has stay as they are.
        owners = [owner] if owner is not None else (
            self._seen_owners if self._owner is None else None)
        if owners:
            metadata["ownerReferences"] = owners
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata,
                "spec": record.spec()}
