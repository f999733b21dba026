"""The upgrade gate: `Upgradeable` on the operator's OLM OperatorCondition.

OLM creates an OperatorCondition (operators.coreos.com/v2) named like the CSV in the
operator's namespace, tells the operator its name in OPERATOR_CONDITION_NAME, and grants it
get, update and patch on exactly that object (a Role it creates). The operator writes the
`Upgradeable` entry of its `spec.conditions`; OLM copies it to `status` and keeps the next
release's CSV Pending (reason OperatorConditionNotUpgradeable) while it is False.

`decide` says False, with what to do, only in states an upgrade would make worse: the
ExternalSecretsConfig is Unmanaged (the new release could not apply its objects' new shape,
and the first Managed pass afterwards would change everything at once), componentConfigs[].
overrideArgs are in use (the next release may drop a flag, and the pod would not start),
an operand CRD still stores objects in a version it no longer serves (the next CRD may stop
listing it), or a SecretStore or ClusterSecretStore uses a provider the next release's operand
no longer has (it would stop working: manager/steps/removed_providers.py). A Degraded pass
does not hold the upgrade back: a missing Issuer or a fault in this release is no worse after
it, and the next release may be the fix. `UpgradeGate` publishes the decision only when the
OperatorCondition says otherwise: it watches the object (`watch`), so an edit by someone else
is answered by the next pass, and a steady pass sends no request; without OLM (no variable,
or the API not served) it says so once.

The same decision is the ExternalSecretsConfig's `Upgradeable` condition (`Gate.condition`,
written by the pass's status step), with or without OLM: OLM v1 (ClusterExtension) has no
OperatorCondition API, and an administrator or a tool sees there what would hold an upgrade
back.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from manager.apply import Discovery, ObjectRef
from manager.apply.cache import ObjectCache
from manager.client.kube import ApiError, JsonObject, Kube
from manager.client.watch_spec import WatchSpec
from manager.config import EffectiveConfig
from manager.management import UNMANAGED
from manager.names import FIELD_MANAGER
from manager.reporting import summary
from manager.reporting.events import now_rfc3339
from manager.reporting.status import CONDITION_MESSAGE_MAX, UPGRADEABLE, Condition, Outcome
from manager.steps.removed_providers import StoreOnRemovedProvider, problem
from manager.steps.stored_versions import StoredVersions, Unserved

logger = logging.getLogger(__name__)

OPERATOR_CONDITION_VARIABLE = "OPERATOR_CONDITION_NAME"
API_VERSION = "operators.coreos.com/v2"
KIND = "OperatorCondition"
OPERATOR_CONDITIONS_CRD = "operatorconditions.operators.coreos.com"
UPGRADEABLE_MESSAGE = ("the operand is managed, no overrideArgs are set, every stored "
                       "version of the operand CRDs is served, and no store uses a provider "
                       "the next release's operand no longer has")


@dataclass(frozen=True)
class Gate:
    status: str  # "True" or "False"
    reason: str
    message: str

    @property
    def condition(self) -> Condition:
        """The decision as the ESC's `Upgradeable` condition: the same status, reason and
        message (within a condition's bound) as the OperatorCondition's."""
        return Condition(UPGRADEABLE, self.status, self.reason,
                         summary.clip(self.message, CONDITION_MESSAGE_MAX))


def decide(outcome: Outcome | None, config: EffectiveConfig | None, state: str,
           unserved: Sequence[Unserved],
           removed: Sequence[StoreOnRemovedProvider] = ()) -> Gate:
    """Upgradeable for one pass: `outcome` and `config` of the ESC (None: no ESC, or its spec
    is invalid), its managementState, the operand CRDs' unserved stored versions, the stores
    on a provider the next operand release no longer has."""
    blockers: list[tuple[str, str]] = []
    if outcome is not None and state == UNMANAGED:
        blockers.append(("Unmanaged", (
            "ExternalSecretsConfig cluster has managementState Unmanaged: the operator does "
            "not know the operand's state; set it to Managed (or Removed)")))
    if config is not None and config.unsupported_overrides:
        blockers.append(("UnsupportedOverrides", (
            f"{len(config.unsupported_overrides)} componentConfigs[].overrideArgs are set "
            "(status.unsupportedOverrides lists them); the next release may not support them: "
            "remove them")))
    for entry in unserved:
        versions = ", ".join(entry.versions)
        blockers.append(("StoredVersionsNotServed", (
            f"CRD {entry.crd} still lists {versions} in status.storedVersions, which it no "
            "longer serves: rewrite every object in the storage version (for example kubectl "
            f"get {entry.crd} -A -o json | kubectl replace -f -), then remove {versions} from "
            "the CRD's status.storedVersions")))
    if removed:  # they still work today: only the upgrade would break them
        blockers.append(("RemovedProviderInUse", problem(removed)))
    if not blockers:
        return Gate("True", "AsExpected", UPGRADEABLE_MESSAGE)
    message = "; ".join(text for _, text in blockers)
    return Gate("False", blockers[0][0], f"{message}; then upgrade")


class UpgradeGate:
    """Publishes `decide`'s answer on the OperatorCondition `name` in `namespace`."""

    def __init__(self, kube: Kube, discovery: Discovery, cache: ObjectCache, name: str | None,
                 namespace: str | None):
        self._kube = kube
        self._discovery = discovery
        self._cache = cache
        self._name = name if name and namespace else None
        self._namespace = namespace
        self.stored_versions = StoredVersions(kube)
        self._published: Gate | None = None  # what the object says, as far as we know
        self._said: str | None = None  # the last problem logged (each is logged once)

    def announce(self) -> None:
        """Say once, after the start-up lines, when the gate is off."""
        if self._name is None:
            logger.info("action=upgrade-gate result=inactive reason=%r",
                        f"no {OPERATOR_CONDITION_VARIABLE} (not installed by OLM)")

    @property
    def active(self) -> bool:
        return self._name is not None

    def watch(self) -> WatchSpec | None:
        """The OperatorCondition itself, its spec.conditions, into the cache: an edit by
        someone else triggers a pass, which sees it there and writes the decision again."""
        if self._name is None:
            return None
        return WatchSpec(API_VERSION, KIND, self._namespace,
                         field_selector=f"metadata.name={self._name}", cached=True,
                         spec_field="conditions")

    async def publish(self, gate: Gate) -> bool:
        """Write `gate` if the OperatorCondition says otherwise; whether it wrote. A failure
        is logged once and raised (the pass is retried)."""
        if self._name is None:
            return False
        cached = self._cache.get(ObjectRef(API_VERSION, KIND, self._namespace or "",
                                           self._name))
        if cached is not None:  # the watch's copy: what the object says now
            if _same((cached.get("spec") or {}).get("conditions") or [], gate):
                self._published = gate
                return False
        elif gate == self._published:
            return False
        resource = await self._discovery.resolve(API_VERSION, KIND)
        if resource is None:
            self._say(f"{KIND} ({API_VERSION}) is not served", logging.INFO)
            return False
        path = resource.object_path(self._name, self._namespace)
        try:
            current = await self._kube.request("GET", path)
            conditions = (current.get("spec") or {}).get("conditions") or []
            if _same(conditions, gate):
                self._published = gate
                return False
            await self._kube.merge_patch(path, _patch(current, conditions, gate),
                                         field_manager=FIELD_MANAGER)
        except ApiError as error:
            self._say(f"{KIND} {self._namespace}/{self._name}: {error}", logging.WARNING)
            raise
        self._published, self._said = gate, None
        logger.info("action=upgrade-gate kind=%s name=%s status=%s reason=%s message=%r", KIND,
                    self._name, gate.status, gate.reason, gate.message)
        return True

    def _say(self, problem: str, level: int) -> None:
        if problem != self._said:
            self._said = problem
            logger.log(level, "action=upgrade-gate result=not-published reason=%r", problem)


def _same(conditions: Sequence[JsonObject], gate: Gate) -> bool:
    return any(c.get("type") == UPGRADEABLE and (c.get("status"), c.get("reason"),
                                                 c.get("message"))
               == (gate.status, gate.reason, gate.message) for c in conditions)


def _patch(current: JsonObject, conditions: Sequence[JsonObject], gate: Gate) -> JsonObject:
    """`spec.conditions` with our entry replaced (a merge patch replaces the whole list, so
    the resourceVersion makes it fail rather than drop another writer's entry)."""
    previous = next((c for c in conditions if c.get("type") == UPGRADEABLE), {})
    moved = previous.get("status") != gate.status or "lastTransitionTime" not in previous
    entry = {"type": UPGRADEABLE, "status": gate.status, "reason": gate.reason,
             "message": gate.message,
             "lastTransitionTime": now_rfc3339() if moved else previous["lastTransitionTime"]}
    others = [c for c in conditions if c.get("type") != UPGRADEABLE]
    return {"metadata": {"resourceVersion": current["metadata"]["resourceVersion"]},
            "spec": {"conditions": [*others, entry]}}
