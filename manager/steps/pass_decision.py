"""What a pass does with what it observed: the one place for the rules of a pass. Pure.

    Observation (config, every rendered object with its live state, missing dependencies,
                 our objects no longer rendered)
        ─► decide() ─► PassDecision (refusal, namespace, apply, held, prune, deferred)

The reconciler executes a decision (manager/runtime/reconciler.py); `plan` shows the
same decision as steps without executing it (manager/offline/plan.py), and Unmanaged reports it as
drift. So a rule written here holds for all three; nothing outside this module decides
which objects are written, held back or deleted.

The rules:
- An object of a rendered name that the operator did not create stops the pass before any
  write (ObjectNotOwned), unless the administrator opted into adoption. A Namespace is
  never adopted: one the operator did not create is used as it is, never written.
- A missing dependency holds back only the objects that need it; the rest is applied, and
  nothing is deleted while anything is missing (the pass is Degraded).
- An object being deleted (a finalizer someone else waits on) is a wait for that object
  only: the rest is applied and pruned, and the pass awaits it (Progressing) until it is
  gone and can be created again. A Namespace being deleted is a wait for everything in it.
- Our objects that are no longer rendered are deleted once every apply succeeded, except
  the cert-controller's while cert-manager replaces it: those wait until cert-manager's
  webhook Certificate is Ready and its Secret exists (the seed's safe transition), which
  only the pass can see after its writes (`deferred`). The other way round (the way back
  to the cert-controller) nothing waits: cert-manager's webhook Certificate and the Secret
  it issued go at once, and the webhook pods that still serve that Secret keep the files
  they have until they roll (steps/ca_overlap.py, `way_back`; keeping the Certificate until
  then refused 96 of 845 admissions in tests/disruption/test_ca_sources.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from manager.apply import ForeignObjectsError, ObjectRef, Observed, Resource
from manager.client.kube import JsonObject
from manager.config import EffectiveConfig
from manager.render.components import CERT_CONTROLLER_APP
from manager.steps.preflight import MissingDependencyError

Unwanted = tuple[Resource, JsonObject]


@dataclass(frozen=True)
class Observation:
    """What a pass read before deciding anything."""

    config: EffectiveConfig
    observed: Sequence[Observed]
    """Every rendered object, in apply order, with what the cluster holds under its name."""
    missing: Sequence[MissingDependencyError]
    """The preflight's findings: dependencies the spec names that the cluster lacks."""
    unwanted: Sequence[Unwanted]
    """Our objects (managed-by label, our field manager) no longer rendered, in deletion
    order."""


@dataclass(frozen=True)
class PassDecision:
    refusal: ForeignObjectsError | None
    """Set: nothing is written, and the rest of the decision is empty."""
    namespace: tuple[Observed, ...]
    """The operand Namespace when it is ours (or absent): written first."""
    apply: tuple[Observed, ...]
    """Everything else to apply, in apply order."""
    held: tuple[Observed, ...]
    """Not applied: each waits for a missing dependency."""
    waiting: tuple[Observed, ...]
    """Not applied: each is being deleted, and is created again once it is gone."""
    blocked: MissingDependencyError | None
    """The first missing dependency, naming what it holds back: the pass ends Degraded."""
    prune: tuple[Unwanted, ...]
    """Deleted once every apply succeeded."""
    deferred: tuple[Unwanted, ...]
    """The cert-controller's objects: deleted only once cert-manager's webhook Certificate
    is Ready and its Secret exists."""


def decide(observation: Observation) -> PassDecision:
    config, observed = observation.config, observation.observed
    foreign = [(o.ref, o.live or {}) for o in observed if o.foreign and not _namespace(o)]
    if foreign and not config.adopt_existing_objects:
        return PassDecision(ForeignObjectsError(foreign), (), (), (), (), None, (), ())
    if any(_namespace(o) and o.terminating for o in observed):
        return PassDecision(None, (), (), (), tuple(observed), None, (), ())
    namespace = tuple(o for o in observed if _namespace(o) and not o.foreign)
    held = tuple(o for o in observed if not _namespace(o)
                 and any(problem.holds(o.ref) for problem in observation.missing))
    held_refs = {o.ref for o in held}
    waiting = tuple(o for o in observed if o.terminating and o.ref not in held_refs)
    apply = tuple(o for o in observed if not _namespace(o) and o.ref not in held_refs
                  and not o.terminating)
    if observation.missing:
        blocked = observation.missing[0].holding([o.ref for o in held])
        return PassDecision(None, namespace, apply, held, waiting, blocked, (), ())
    replaced = [u for u in observation.unwanted
                if config.cert_manager.enabled and _app(u[1]) == CERT_CONTROLLER_APP]
    prune = tuple(u for u in observation.unwanted if u not in replaced)
    return PassDecision(None, namespace, apply, held, waiting, None, prune, tuple(replaced))


def refs(items: Sequence[Unwanted]) -> list[ObjectRef]:
    return [ObjectRef.of(obj) for _, obj in items]


def _namespace(observed: Observed) -> bool:
    return observed.ref.kind == "Namespace"


def _app(obj: JsonObject) -> str | None:
    labels: dict[str, str] = obj.get("metadata", {}).get("labels") or {}
    return labels.get("app.kubernetes.io/name")
