"""Watches on managed children and on the few objects a pass depends on.

Each watch is narrowed on the server: children by the label selector
`app.kubernetes.io/managed-by=external-secrets-operator` in the operand namespace (or
cluster-wide for cluster-scoped kinds), dependencies (the Issuer, the bitwarden TLS Secret,
cert-manager's CRDs) by `metadata.name`. Watches request metadata only
(PartialObjectMetadata), so neither Secret data nor CRD schemas reach the operator, and
memory holds one small fingerprint per watched object, however large the cluster.

A watch only says "look again": it calls `notify(spec, reason)` when a watched object appears,
disappears or changes in a way a pass may care about (its generation, labels, annotations
or deletion; for kinds without a generation, any change). For the kinds whose status
decides Ready (Deployments, Certificates, the webhook configurations: `with_status`), the
watch reads whole objects, which are few and small, and a change of their rollout or
readiness counts too; other status churn is ignored. (A webhook configuration has no status:
the API server bumps its generation when its webhooks change, a caBundle included.) The
operand's pods are watched the same way (`with_status`), and only what readiness.py says
about them counts (`pod_digest`: scheduling, each container's state, reason and restarts),
not every status write of the kubelet. For an object a pass reads one field of (`spec_field`: the
APIServer's TLS security profile), only a change of that field, or its deletion, counts; for
one it reads the key names of one field of (`spec_keys`: a store's provider), only a change of
those names, and the cache keeps nothing else.

The watches of CRDs are also how the operator learns that an API came or went: a CRD event
makes discovery forget the CRD's group and wakes the watches of that group's kinds
(`rediscover`), and a watch of one CRD by name, once it has listed, vouches to discovery for
the absence of its group's kinds until its next event (Discovery.absence_vouched). So a kind
that is not served costs no request, in a watch or a pass, until its CRD comes.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import random
from collections.abc import Callable, Iterable

from manager import metrics
from manager.apply.cache import ObjectCache
from manager.apply.discovery import Discovery, crd_group
from manager.client.kube import PARTIAL_METADATA, PARTIAL_METADATA_LIST, ApiError, JsonObject, Kube
from manager.client.watch_spec import WatchSpec
from manager.names import CRD_KIND

logger = logging.getLogger(__name__)

Fingerprints = dict[str, tuple[object, ...]]  # uid -> fingerprint

RESTART_BACKOFF_MAX = 30.0
# A kind that is not served: while a watch of its CRD vouches that it is absent
# (Discovery.absence_vouched), its watch waits for that CRD's events and asks nothing. Else
# (its CRD exists but discovery does not serve the kind yet, a moment after it was created;
# or nothing watches its CRD) it looks again soon, asking the server each time, past
# Discovery's ABSENT_TTL, then waits for the next CRD event of its group. Every kind that may
# not be served comes with a watch of its CRD (runtime.STANDING_WATCHES,
# preflight.dependency_watches): an idle operator does not poll discovery.
FIRST_RECHECK = 0.25
UNRESOLVED_RECHECK_MAX = 8.0
CRD_NAME = "metadata.name="


# Watches end after a random half hour to an hour, so that an idle operator seldom sends a
# request (each restart is one), and restarts spread out.
WATCH_TIMEOUT_SECONDS = (1800, 3600)


def _watch_timeout() -> int:
    return random.randint(*WATCH_TIMEOUT_SECONDS)  # noqa: S311 (spreading, not secrecy)


def named_crd(spec: WatchSpec) -> str | None:
    """The one CRD a watch selects by name, if it does."""
    if spec.kind != CRD_KIND or not (spec.field_selector or "").startswith(CRD_NAME):
        return None
    return (spec.field_selector or "").removeprefix(CRD_NAME)


def _group(spec: WatchSpec) -> str:
    return spec.api_version.rpartition("/")[0]


def _typed(item: JsonObject, spec: WatchSpec) -> JsonObject:
    """An item as the cache keeps it: PartialObjectMetadata carries its own apiVersion and
    kind, not the object's; for `spec_keys`, only the names and those keys (not their
    values)."""
    if spec.spec_keys is not None:
        metadata = item.get("metadata") or {}
        item = {"metadata": {key: metadata[key] for key in KEPT_METADATA if key in metadata},
                "spec": {spec.spec_keys: {key: {} for key in _keys(item, spec.spec_keys)}}}
    return {**item, "apiVersion": spec.api_version, "kind": spec.kind}


KEPT_METADATA = ("name", "namespace", "uid", "resourceVersion", "deletionTimestamp")


def _keys(obj: JsonObject, field: str) -> tuple[str, ...]:
    """The sorted key names of `spec.<field>` (none when it is not an object)."""
    value = (obj.get("spec") or {}).get(field)
    return tuple(sorted(value)) if isinstance(value, dict) else ()


READINESS_COUNTS = ("observedGeneration", "replicas", "updatedReplicas", "readyReplicas",
                    "availableReplicas", "unavailableReplicas")


def readiness_digest(status: JsonObject) -> tuple[object, ...]:
    """The parts of a status that Ready depends on (readiness.py): rollout counts and the
    type, status and reason of each condition (not their timestamps or messages)."""
    counts = tuple(status.get(name) for name in READINESS_COUNTS)
    conditions = tuple(sorted((c.get("type"), c.get("status"), c.get("reason"))
                              for c in status.get("conditions") or []))
    return counts, conditions


def _container_digest(status: JsonObject) -> tuple[object, ...]:
    states = status.get("state") or {}
    state = min(states, default=None)  # one of waiting, running, terminated
    detail = (states.get(state) if state else None) or {}
    return (status.get("name"), status.get("ready"), status.get("restartCount"), state,
            detail.get("reason"), detail.get("message") if state == "waiting" else None,
            detail.get("exitCode"))


def pod_digest(status: JsonObject) -> tuple[object, ...]:
    """The parts of a pod's status that readiness.py reports: the type, status and reason of
    each condition (PodScheduled's message too: it says why the pod cannot be placed), and
    each container's readiness, restarts and state (a waiting container's reason and
    message, a terminated one's exit code)."""
    conditions = tuple(sorted(
        ((c.get("type"), c.get("status"), c.get("reason"),
          c.get("message") if c.get("type") == "PodScheduled" else None)
         for c in status.get("conditions") or []), key=repr))
    containers = tuple(sorted((_container_digest(s) for s in status.get("containerStatuses")
                               or []), key=repr))
    return conditions, containers


def fingerprint(obj: JsonObject, spec: WatchSpec) -> tuple[object, ...]:
    """What a pass may care about in an object (see module doc)."""
    metadata = obj.get("metadata", {})
    if spec.spec_keys is not None:
        return (_keys(obj, spec.spec_keys), metadata.get("deletionTimestamp"))
    if spec.spec_field is not None:
        watched = (obj.get("spec") or {}).get(spec.spec_field)
        return (json.dumps(watched, sort_keys=True), metadata.get("deletionTimestamp"))
    if spec.kind == "Pod" and spec.with_status:  # every kubelet write moves resourceVersion
        return (metadata.get("deletionTimestamp"), pod_digest(obj.get("status") or {}))
    version = metadata.get("resourceVersion") if spec.any_change else (
        metadata.get("generation") or metadata.get("resourceVersion"))
    labels = tuple(sorted((metadata.get("labels") or {}).items()))
    annotations = tuple(sorted((metadata.get("annotations") or {}).items()))
    status = readiness_digest(obj.get("status") or {}) if spec.with_status else ()
    return (version, labels, annotations, metadata.get("deletionTimestamp"), status)


class Watcher:
    """Keeps one watch task per WatchSpec of the current set."""

    def __init__(self, kube: Kube, discovery: Discovery, notify: Callable[[WatchSpec, str], None],
                 cache: ObjectCache | None = None):
        self._kube = kube
        self._discovery = discovery
        self._notify = notify
        self._cache = cache if cache is not None else ObjectCache()
        self._tasks: dict[WatchSpec, asyncio.Task[None]] = {}
        self._rediscovered: dict[str, asyncio.Event] = {}  # by API group

    def rediscover(self, groups: Iterable[str] | None = None) -> None:
        """APIs of these groups (None: of any) may have come or gone: watches of their kinds
        that wait for them, or back off after they vanished, look again now."""
        for group in list(self._rediscovered) if groups is None else groups:
            event = self._rediscovered.pop(group, None)
            if event is not None:
                event.set()

    @property
    def specs(self) -> frozenset[WatchSpec]:
        return frozenset(self._tasks)

    def set_specs(self, specs: Iterable[WatchSpec]) -> None:
        """Start watches that are new, stop those no longer wanted."""
        wanted = set(specs)
        for spec in set(self._tasks) - wanted:
            self._tasks.pop(spec).cancel()
            if spec.cached:
                self._cache.forget(spec.group_kind)
            logger.debug("action=unwatch watch=%s", spec)
        # Sorted by text: optional fields are None in some specs and str in others.
        for spec in sorted(wanted - set(self._tasks), key=str):
            self._tasks[spec] = asyncio.create_task(self._run(spec), name=f"watch {spec}")
            logger.debug("action=watch watch=%s", spec)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        self._tasks.clear()
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _run(self, spec: WatchSpec) -> None:
        try:
            await self._keep(spec)
        finally:  # stopped: a CRD watch vouches no more (Discovery.absence_vouched)
            self._discovery.crd_unwatched(spec)

    async def _keep(self, spec: WatchSpec) -> None:
        seen: Fingerprints | None = None
        backoff = 1.0
        recheck = FIRST_RECHECK
        while True:
            try:
                resource = await self._discovery.resolve(spec.api_version, spec.kind)
                if resource is None:  # not served (yet): see FIRST_RECHECK
                    vouched = self._discovery.absence_vouched(spec.api_version)
                    waited = recheck if recheck <= UNRESOLVED_RECHECK_MAX else None
                    if await self._pause(_group(spec), None if vouched else waited):
                        recheck = FIRST_RECHECK
                    else:  # ask the server, not discovery's memory of the absence
                        self._discovery.invalidate(spec.api_version)
                        recheck *= 2
                    continue
                path = resource.collection_path(spec.namespace if resource.namespaced else None)
                seen, version = await self._list(spec, path, seen)
                backoff = 1.0
                await self._follow(spec, path, seen, version)
            except ApiError as error:
                metrics.record_watch_restart(spec.kind, "expired" if error.status == 410
                                             else "error")
                self._discovery.crd_unwatched(spec)  # until it has listed again
                if spec.cached:  # events may be missed until the next listing
                    self._cache.forget(spec.group_kind)
                if error.status != 410:  # 410: resume point too old, list again at once
                    logger.warning("action=watch result=error watch=%s error=%r", spec,
                                   f"{error.status} {error.reason}: {error.message}")
                    if error.not_found:  # the kind itself may have gone (its CRD deleted)
                        self._discovery.invalidate(spec.api_version)
                    await self._pause(_group(spec), backoff)
                    backoff = min(backoff * 2, RESTART_BACKOFF_MAX)
            except (ValueError, KeyError) as error:  # a malformed response: start over
                metrics.record_watch_restart(spec.kind, "error")
                self._discovery.crd_unwatched(spec)
                if spec.cached:
                    self._cache.forget(spec.group_kind)
                logger.warning("action=watch result=error watch=%s error=%r", spec, str(error))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, RESTART_BACKOFF_MAX)

    async def _pause(self, group: str, seconds: float | None) -> bool:
        """Wait `seconds` (None: for as long as it takes), or less if APIs of `group` come or
        go meanwhile (rediscover); whether they did. A watch waiting for its kind, or backing
        off after it vanished, resumes as soon as its CRD is back."""
        rediscovered = self._rediscovered.setdefault(group, asyncio.Event())
        # asyncio.timeout, not wait_for: on Python 3.11 wait_for drops a cancellation that
        # arrives as the event is set (CPython gh-86296), and a stop at start-up, when every
        # waiting watch is woken at once, then never ends the watch.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await rediscovered.wait()
        return rediscovered.is_set()

    async def _list(self, spec: WatchSpec, path: str, previous: Fingerprints | None,
                    ) -> tuple[Fingerprints, str]:
        listing = await self._kube.list(
            path, label_selector=spec.label_selector, field_selector=spec.field_selector,
            accept=PARTIAL_METADATA_LIST if spec.accept == PARTIAL_METADATA else spec.accept)
        items = [_typed(item, spec) for item in listing.get("items") or []]
        seen = {item["metadata"]["uid"]: fingerprint(item, spec) for item in items}
        if spec.cached:
            self._cache.replace(spec.group_kind, items)
        if spec.kind == CRD_KIND:
            self._crds_listed(spec, items, changed=previous is not None and seen != previous)
        # The first listing may already differ from what the last pass saw (the watch starts
        # after it); a re-listing may reveal events missed while disconnected.
        if previous is None or seen != previous:
            self._notify(spec, f"listed {spec}")
        return seen, str(listing["metadata"]["resourceVersion"])

    def _crds_listed(self, spec: WatchSpec, items: list[JsonObject], changed: bool) -> None:
        """A CRD watch listed: a watch of one CRD by name now vouches for its group, and the
        watches waiting for a kind of that group look at discovery again (from its memory,
        which it kept unless it disagrees with the listing). A re-listing that differs from
        the last one may hide any change: its groups are forgotten (all of them, for a watch
        by label, which cannot name the CRDs that went)."""
        name = named_crd(spec)
        groups = {crd_group(item["metadata"]["name"]) for item in items}
        if name is not None:
            groups.add(crd_group(name))
        if changed:
            if name is None:
                self._discovery.invalidate()
            for item in items:
                self._discovery.crd_changed(item["metadata"]["name"])
            if name is not None:
                self._discovery.crd_changed(name)
        if name is not None:
            self._discovery.crd_watched(spec, name, exists=bool(items))
        self.rediscover(None if changed and name is None else groups)

    def _crd_event(self, spec: WatchSpec, name: str, exists: bool) -> None:
        """A CRD came, went or changed: what discovery said about its group is forgotten, and
        the watches of that group's kinds look again."""
        self._discovery.crd_changed(name)
        if named_crd(spec) is not None:
            self._discovery.crd_watched(spec, name, exists)
        self.rediscover({crd_group(name)})

    async def _follow(self, spec: WatchSpec, path: str, seen: Fingerprints,
                      version: str) -> None:
        while True:
            async for event in self._kube.watch(
                    path, resource_version=version, label_selector=spec.label_selector,
                    field_selector=spec.field_selector, timeout_seconds=_watch_timeout(),
                    accept=spec.accept):
                metadata = event.object.get("metadata", {})
                version = str(metadata.get("resourceVersion") or version)
                if event.type == "BOOKMARK":
                    continue
                uid = metadata.get("uid", "")
                if event.type == "DELETED":
                    seen.pop(uid, None)
                    if spec.cached:
                        self._cache.remove(spec.group_kind, event.object)
                    if spec.kind == CRD_KIND:
                        self._crd_event(spec, str(metadata.get("name", "")), exists=False)
                    self._notify(spec, f"deleted {spec.kind} {metadata.get('name')}")
                    continue
                if spec.cached:  # before the pass this event may start reads it
                    self._cache.put(spec.group_kind, _typed(event.object, spec))
                current = fingerprint(event.object, spec)
                if seen.get(uid) != current:
                    seen[uid] = current
                    if spec.kind == CRD_KIND:
                        self._crd_event(spec, str(metadata.get("name", "")), exists=True)
                    self._notify(spec, f"{event.type.lower()} {spec.kind} {metadata.get('name')}")
            metrics.record_watch_restart(spec.kind, "ended")  # the server closed the stream
