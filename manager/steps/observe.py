"""The observe step: everything a decision needs, read before anything is written, so that an
object that is not the operator's stops the pass before any write. The live pass and `plan`
read through this one function."""

from __future__ import annotations

from manager.apply import Applier, ObjectRef, Pruner
from manager.apply.cache import ObjectCache
from manager.client.kube import JsonObject, Kube
from manager.config import EffectiveConfig
from manager.names import API_VERSION, GROUP, SINGLETON_NAME
from manager.render import DesiredState
from manager.steps.pass_decision import Observation
from manager.steps.preflight import Preflight


async def observe(config: EffectiveConfig, desired: DesiredState, applier: Applier,
                  preflight: Preflight, pruner: Pruner) -> Observation:
    """Every rendered object with its live state, the missing dependencies, and the
    operator's objects no longer rendered."""
    observed = await applier.read_all(desired.objects())
    missing = await preflight.check(config)
    keep = [ObjectRef.of(obj) for obj in desired.objects()]
    unwanted = await pruner.find_unwanted(desired.kinds(), keep)
    return Observation(config, observed, missing, unwanted)


async def read_singleton(kube: Kube, cache: ObjectCache, kind: str,
                         path: str) -> JsonObject | None:
    """The ESC or the ESM: from the cache their watch keeps, else from the server."""
    if cache.synced((GROUP, kind)):
        return cache.get(ObjectRef(API_VERSION, kind, "", SINGLETON_NAME))
    return await kube.get(path)
