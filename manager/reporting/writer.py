"""The status step's writes: the ESC's and the ESM's status (merge patches, only when the
content changed), the Events of a pass, and the condition series. What to write is decided by
status.py, esm_status.py and pass_events.py."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from manager import metrics
from manager.apply import ObjectResult
from manager.apply.cache import ObjectCache
from manager.client.kube import ApiError, JsonObject, Kube
from manager.config import EffectiveConfig
from manager.logs import brief
from manager.names import (
    ESC_KIND,
    ESC_PATH,
    ESM_KIND,
    ESM_PATH,
    FIELD_MANAGER,
    GROUP,
    SINGLETON_NAME,
)
from manager.reporting import esm_status, status
from manager.reporting.esm_status import AnnotatorReport
from manager.reporting.events import EventRecorder, EventSpec, now_rfc3339
from manager.reporting.pass_events import Before, pass_events
from manager.reporting.status import Condition, ControllerState, Outcome, OutcomeKind

logger = logging.getLogger(__name__)


class StatusWriter:
    def __init__(self, kube: Kube, cache: ObjectCache, events: EventRecorder):
        self.kube = kube
        self.cache = cache
        self.events = events
        self.converged: EffectiveConfig | None = None
        """The effective config of the last pass that applied everything, for the cause an
        Event gives ("replicas 1 -> 3"); None after a removal (what comes back is new)."""

    async def esc(self, esc: JsonObject, outcome: Outcome, fields: Mapping[str, object],
                  upgradeable: Condition | None = None) -> None:
        """The ESC's status after a pass: `outcome`, `fields` (status.esc_fields) and the
        upgrade gate's decision as `upgradeable` (None: the pass could not tell)."""
        metrics.record_conditions("ExternalSecretsConfig", "", (
            (c.type, c.status) for c in status.esc_conditions(outcome, upgradeable)))
        patch = status.esc_status_update(esc.get("status") or {}, outcome,
                                         esc["metadata"].get("generation"), fields,
                                         now_rfc3339(), upgradeable=upgradeable)
        if patch is None:
            return
        self._cached(ESC_KIND, await self.kube.merge_patch(
            f"{ESC_PATH}/status", {"status": patch}, field_manager=FIELD_MANAGER))
        for setting in patch.get("ignoredSettings") or ():
            logger.warning("action=ignore kind=ExternalSecretsConfig name=%s setting=%r",
                           SINGLETON_NAME, setting)
        level = logging.WARNING if outcome.kind in (OutcomeKind.DEGRADED,
                                                    OutcomeKind.RETRYING) else logging.INFO
        logger.log(level, "action=status kind=ExternalSecretsConfig name=%s outcome=%s "
                   "reason=%s message=%r", SINGLETON_NAME, outcome.kind, outcome.reason,
                   brief(outcome.message))

    async def esm(self, esm: JsonObject, esc: JsonObject, outcome: Outcome,
                  annotator: AnnotatorReport | ApiError | None, config: EffectiveConfig | None,
                  *, feature_note: str | None) -> None:
        generation = esc["metadata"].get("generation")
        esc_state = ControllerState(status.CONTROLLER_ESC, outcome.conditions(), generation)
        global_problem = (outcome.message if outcome.kind is OutcomeKind.DEGRADED
                          and outcome.reason == "InvalidGlobalConfig" else None)
        states = [esc_state, esm_status.manager_state(esm, global_problem, config, feature_note),
                  esm_status.annotator_state(esm, annotator, config)]
        await self.esm_states(esm, states)

    async def no_esc(self, esc: JsonObject | None, esm: JsonObject, managing_uid: str | None,
                     feature_note: str | None) -> None:
        """There is no ESC (or it is being deleted): an Event if this process managed it, and
        the ESM says so, Not Ready but not Degraded either: nothing is wrong."""
        metrics.forget_conditions("ExternalSecretsConfig")
        if managing_uid is not None:
            logger.info("action=stop-managing kind=ExternalSecretsConfig name=%s "
                        "reason=%r", SINGLETON_NAME,
                        "deleted: the operand is left in place and no longer reconciled")
            await self.events.post(esc or {"metadata": {"name": SINGLETON_NAME,
                                                        "uid": managing_uid}},
                                   EventSpec("Normal", "ManagementStopped",
                                             status.ESC_DELETED_MESSAGE, "StopManaging"))
            message = status.ESC_DELETED_SUMMARY
        else:  # after a restart, the ESM status is the only memory of a deletion
            message = (status.ESC_DELETED_SUMMARY if esm_status.esc_was_deleted(esm)
                       else status.ESC_MISSING_MESSAGE)
        reason = (esm_status.ESC_DELETED_REASON if message == status.ESC_DELETED_SUMMARY
                  else "NoExternalSecretsConfig")
        unmanaged = ControllerState(status.CONTROLLER_ESC, (
            status.Condition("Ready", "False", reason, message),
            status.Condition("Degraded", "False", "AsExpected", ""),
            status.Condition("Progressing", "False", reason, "")), None)
        annotator = (esm_status.previous_state(esm, status.CONTROLLER_CRD_ANNOTATOR)
                     or status.simple_state(status.CONTROLLER_CRD_ANNOTATOR, True, "Inactive",
                                            "inactive: no ExternalSecretsConfig", None))
        await self.esm_states(esm, [unmanaged, esm_status.manager_state(
            esm, None, None, feature_note), annotator])

    async def esm_states(self, esm: JsonObject, states: Sequence[ControllerState]) -> None:
        for state in states:
            metrics.record_conditions("ExternalSecretsManager", state.name,
                                      ((c.type, c.status) for c in state.conditions))
        patch = status.esm_status_update(esm.get("status") or {}, states, now_rfc3339())
        if patch is None:
            return
        self._cached(ESM_KIND, await self.kube.merge_patch(
            f"{ESM_PATH}/status", {"status": patch}, field_manager=FIELD_MANAGER))
        logger.info("action=status kind=%s name=%s controllers=%d", ESM_KIND, SINGLETON_NAME,
                    len(states))
        for event in esm_status.esm_events(esm, states):  # the whole of what a line cuts
            await self.events.post(esm, event, kind=ESM_KIND)

    async def pass_events(self, esc: JsonObject, outcome: Outcome,
                          writes: Sequence[ObjectResult], config: EffectiveConfig | None,
                          cause: str | None) -> None:
        for event in pass_events(writes, outcome, Before.of(esc), self.converged, config,
                                 cause=cause):
            await self.events.post(esc, event)
        if config is not None and outcome.applied:
            self.converged = config

    def _cached(self, kind: str, obj: JsonObject) -> None:
        """What the server answered to a write of the ESC or the ESM, so that the next pass
        does not read the status it replaced (the watch event follows)."""
        self.cache.put((GROUP, kind), obj)
