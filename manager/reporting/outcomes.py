"""What a pass reports, for each managementState of the ExternalSecretsConfig. Pure
functions.

- Managed: what readiness.py found (Ready, Progressing with what is awaited, or Degraded
  with every problem); a failed pass is reported by failures.py.
- Unmanaged: the pass reads what it would write and reports the difference (drift) in the
  Ready condition (status Unknown: the operator does not act, so it does not vouch for the
  operand); it writes nothing but status.
- Removed: the pass removes the operand as `uninstall --operand --yes` does, Namespaces
  aside, and reports Progressing until nothing is left, then Removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from manager.api.models import Failure
from manager.apply import ObjectRef, Observed
from manager.apply.convergence import is_converged, prepare_for_apply
from manager.config import EffectiveConfig
from manager.names import FIELD_MANAGER
from manager.reporting import summary
from manager.reporting.status import Outcome, OutcomeKind, inspect_command
from manager.steps.pass_decision import PassDecision
from manager.steps.readiness import Awaited, Readiness
from manager.steps.removed_providers import StoreOnRemovedProvider, problem, stores_phrase
from manager.steps.uninstall import UninstallPlan, UninstallReport

LISTED = 5  # objects named in a message; the rest are counted


@dataclass(frozen=True)
class Drift:
    ref: ObjectRef
    what: str  # "is missing", "differs from the spec", ...

    def __str__(self) -> str:
        return f"{self.ref} {self.what}"


def drift_of(observed: Observed) -> Drift | None:
    """How one object differs from what the operator would apply; None if it does not."""
    if observed.live is None:
        return Drift(observed.ref, "is missing")
    if observed.foreign:  # a Namespace the operator did not create is used as it is
        return (None if observed.ref.kind == "Namespace"
                else Drift(observed.ref, "exists but the operator did not create it"))
    if not is_converged(prepare_for_apply(observed.desired), observed.live, FIELD_MANAGER):
        return Drift(observed.ref, "differs from the spec")
    return None


def drift_of_decision(decision: PassDecision) -> list[Drift]:
    """What a Managed pass would change, read off its decision (pass_decision.py)."""
    if decision.refusal is not None:
        return [Drift(ref, "exists but the operator did not create it")
                for ref in decision.refusal.refs]
    drift = [found for observed in (*decision.namespace, *decision.apply, *decision.held)
             if (found := drift_of(observed))]
    drift += [Drift(observed.ref, "is being deleted") for observed in decision.waiting]
    return drift + [Drift(ObjectRef.of(obj), "is no longer rendered (it would be deleted)")
                    for _, obj in (*decision.prune, *decision.deferred)]


def unmanaged_outcome(drift: Sequence[Drift]) -> Outcome:
    paused = ("managementState is Unmanaged: the operator writes nothing to the operand, so "
              "drift is reported here, not repaired")
    if not drift:
        return Outcome(OutcomeKind.UNMANAGED, "Unmanaged",
                       f"{paused}; the operand matches the spec")
    return Outcome(OutcomeKind.UNMANAGED, "Unmanaged",
                   f"{paused}; {_count(len(drift))} {'differs' if len(drift) == 1 else 'differ'}"
                   f" from the spec: {_listed(drift)}. Set managementState to Managed to "
                   "repair it",
                   summary=summary.counted("managementState is Unmanaged, drift in {objects}",
                                           [str(found) for found in drift], summary.SEE_EVENTS))


def removal_outcome(report: UninstallReport, left: UninstallPlan) -> Outcome:
    """After a removal pass: failed, still going (objects left or being deleted), or done."""
    if report.errors:
        return Outcome(OutcomeKind.DEGRADED, "RemovalFailed",
                       f"managementState is Removed, but {len(report.errors)} deletions failed: "
                       f"{'; '.join(report.errors[:LISTED])}",
                       failure=Failure(inspect=inspect_command("ExternalSecretsConfig", "",
                                                               "cluster", "describe")))
    terminating = [kept.ref for kept in left.kept if kept.reason == "already being deleted"]
    remaining = [candidate.ref for candidate in left.objects] + terminating
    if remaining:
        awaited = tuple(Awaited(str(ref), "being deleted" if ref in terminating
                                else "to be deleted") for ref in remaining)
        return Outcome(OutcomeKind.PROGRESSING, "Removing",
                       f"managementState is Removed: removing the operand, {_count(len(remaining))}"
                       f" left: {_listed(remaining)}", awaited=awaited,
                       summary=summary.counted("managementState is Removed, {objects} left",
                                               [str(ref) for ref in remaining],
                                               summary.SEE_AWAITED))
    kept = [f"{kept.ref} ({kept.reason})" for kept in left.kept]
    return Outcome(OutcomeKind.REMOVED, "Removed",
                   "managementState is Removed: the operand is removed, nothing the operator "
                   "created remains" + (f"; kept: {_listed(kept)}" if kept else "")
                   + ". Set managementState to Managed to install it again")


def _count(number: int) -> str:
    return f"{number} object" if number == 1 else f"{number} objects"


def _listed(items: Sequence[object]) -> str:
    shown = "; ".join(str(item) for item in items[:LISTED])
    more = len(items) - LISTED
    return f"{shown} (and {more} more)" if more > 0 else shown


def operand_outcome(config: EffectiveConfig, operand: Readiness, count: int) -> Outcome:
    """A Managed pass that applied all `count` objects: what the operand's readiness says."""
    if operand.problems:
        first, more = operand.problems[0], len(operand.problems) - 1
        line = summary.framed("", first.message, f" (and {more} more problems; "
                              f"{summary.SEE_FAILURE})") if more else ""
        return Outcome(OutcomeKind.DEGRADED, first.reason,
                       "; ".join(problem.message for problem in operand.problems), True,
                       Failure(inspect=first.inspect, object=first.subject), summary=line)
    if operand.awaited:
        return Outcome(OutcomeKind.PROGRESSING, "WaitingForOperand",
                       f"all {count} objects are applied; waiting for "
                       + "; ".join(str(item) for item in operand.awaited), True,
                       awaited=operand.awaited,
                       summary=summary.counted("Waiting for {objects}",
                                               [str(item) for item in operand.awaited],
                                               summary.SEE_AWAITED))
    return Outcome(OutcomeKind.READY, "Reconciled",
                   f"external-secrets {config.versions.external_secrets} is running in "
                   f"namespace {config.namespace}: every Deployment is available and the "
                   "webhooks are trusted", True)


REMOVED_PROVIDER_REASON = "RemovedProviderInUse"


def with_removed_providers(outcome: Outcome,
                           stores: Sequence[StoreOnRemovedProvider]) -> Outcome:
    """A Ready outcome that also warns of stores on a provider the next operand release no
    longer has (steps/removed_providers.py); any other outcome as it is.

    Why Ready's message, and not Degraded: those stores work on the operand running now, so
    nothing needs a fix today, and Ready keeps its meaning (the operand works); what the next
    upgrade would break is news an administrator must see without OLM, and `kubectl get esc`
    shows Ready's message. A Warning Event (pass_events.py) carries the whole list when the
    line changes; the upgrade gate holds OLM back meanwhile. While the ESC is not Ready, its
    conditions say what matters first, and the gate still says this."""
    if outcome.kind is not OutcomeKind.READY or not stores:
        return outcome
    text = problem(stores)
    more = len(stores) - 1
    line = summary.framed(f"warning: {stores_phrase(len(stores))} the next release drops: ",
                          str(stores[0]),
                          f"{f' and {more} more' if more else ''}; {summary.SEE_EVENTS}")
    return replace(outcome, message=f"{outcome.message}; warning: {text}", summary=line,
                   warning=(REMOVED_PROVIDER_REASON, text))
