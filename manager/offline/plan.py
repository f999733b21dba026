"""What the operator would do if an ExternalSecretsConfig (and ExternalSecretsManager) were
applied, worked out against the live cluster without changing it.

    plan = await make_plan(kube, esc_document, esm_document)

The specs go through the API server first (a server-side dry run of the update or create),
so its defaults, bounds, CEL rules and immutability rules apply exactly as to a real
`kubectl apply`. Then the plan takes the steps of a pass: merge, preflight, read every
object the renderer produces, and the pass's own decision (manager/steps/
pass_decision.py) over them; for each object it would write, a server-side dry run of that
apply; the difference between the live object and the dry run's result is the
change, field by field. Objects the operator would prune are listed as deletions. Every
write it sends is a dry run; a refusal, by the API server or by the operator, is a
`PlanRefusedError` (the command exits non-zero). `print_plan` writes it as the `plan`
command and the support bundle show it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from manager.apply import Applier, Discovery, ObjectRef, Observed, Pruner
from manager.apply.cache import ObjectCache
from manager.apply.convergence import APPLIED_HASH_ANNOTATION, is_converged, prepare_for_apply
from manager.client.kube import ApiError, JsonObject, Kube
from manager.config import ConfigError, EffectiveConfig, OperatorEnvironment, config_of_objects
from manager.management import REMOVED, UNMANAGED, management_state
from manager.names import (
    ESC_PATH,
    ESM_PATH,
    FIELD_MANAGER,
    OPERATOR_CONTAINER,
    OPERATOR_DEPLOYMENT,
    OPERATOR_NAMESPACE,
    SINGLETON_NAME,
)
from manager.render import render_operand
from manager.steps.facts import ClusterFacts
from manager.steps.observe import observe
from manager.steps.pass_decision import decide, refs
from manager.steps.preflight import Preflight
from manager.steps.uninstall import operand_namespace_of, plan_uninstall

PLAN_MANAGER = "external-secrets-plan"  # the field manager of the specs' dry runs
FIELDS_SHOWN = 8
# Fields that change with every write, or that the server owns: not a change of the spec.
_NOISE = (("metadata", "managedFields"), ("metadata", "resourceVersion"),
          ("metadata", "generation"), ("metadata", "creationTimestamp"), ("metadata", "uid"),
          ("metadata", "annotations", APPLIED_HASH_ANNOTATION), ("status",))


class PlanRefusedError(Exception):
    """The API server or the operator would refuse this spec; the message says which and
    why."""


@dataclass(frozen=True)
class Step:
    action: str  # create, change, adopt, delete, wait
    ref: ObjectRef
    details: tuple[str, ...] = ()


@dataclass
class Plan:
    esc_changes: list[str]
    environment: str  # where the operator's environment came from
    management: str
    namespace: str = ""
    steps: list[Step] = field(default_factory=list)
    unchanged: int = 0
    notes: list[str] = field(default_factory=list)
    degraded: str | None = None
    """Set: the pass would end Degraded for this reason (a missing dependency), having
    applied what the dependency does not hold."""

    def count(self, action: str) -> int:
        return sum(1 for step in self.steps if step.action == action)


async def make_plan(kube: Kube, esc_document: JsonObject, esm_document: JsonObject | None = None,
                    *, overrides: Mapping[str, str] | None = None,
                    operator_namespace: str = OPERATOR_NAMESPACE) -> Plan:
    live_esc = await kube.get(ESC_PATH)
    esc = await dry_run_spec(kube, ESC_PATH, esc_document, live_esc)
    esc_changes = changed_fields((live_esc or {}).get("spec") or {}, esc.get("spec") or {},
                                 ("spec",))
    esm = (await dry_run_spec(kube, ESM_PATH, esm_document, await kube.get(ESM_PATH))
           if esm_document is not None else await kube.get(ESM_PATH) or {})
    environment, source = await operator_environment(kube, operator_namespace, overrides or {})
    plan = Plan([_describe(c) for c in esc_changes] if live_esc else ["(created)"], source,
                management_state(esc))
    if plan.management == REMOVED:
        await _plan_removal(kube, esc, plan)
        return plan
    try:
        config = await ClusterFacts(kube, Discovery(kube)).complete(
            config_of_objects(esc, esm, environment))
    except ConfigError as error:
        raise PlanRefusedError(f"the operator would refuse it (Degraded, InvalidConfiguration): "
                      f"{error}") from None
    await _plan_operand(kube, config, plan)
    if plan.management == UNMANAGED:
        plan.notes.append("managementState is Unmanaged: the operator would write none of "
                          "this; it reports these differences as drift")
    return plan


async def dry_run_spec(kube: Kube, path: str, document: JsonObject,
                       live: JsonObject | None) -> JsonObject:
    """The object as the API server would store `document` (update or create, dry run)."""
    body = {key: value for key, value in document.items() if key != "status"}
    metadata = {**(body.get("metadata") or {}), "name": SINGLETON_NAME}
    query = {"dryRun": "All", "fieldManager": PLAN_MANAGER}
    try:
        if live is None:
            return await kube.request("POST", path.rpartition("/")[0], query=query,
                                      body={**body, "metadata": metadata})
        metadata["resourceVersion"] = live["metadata"]["resourceVersion"]
        return await kube.request("PUT", path, query=query, body={**body, "metadata": metadata})
    except ApiError as error:
        if error.transient:
            raise
        raise PlanRefusedError(f"the API server refuses {document.get('kind')}/{SINGLETON_NAME}: "
                      f"{error.status} {error.reason}: {error.message}") from None


async def operator_environment(kube: Kube, namespace: str, overrides: Mapping[str, str],
                               ) -> tuple[OperatorEnvironment, str]:
    """The environment of the running operator's Deployment (its literal values), with
    `overrides` on top; the pinned defaults when there is no such Deployment."""
    path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{OPERATOR_DEPLOYMENT}"
    deployment = await kube.get(path)
    if deployment is None:
        source = f"the pinned defaults (no Deployment {namespace}/{OPERATOR_DEPLOYMENT})"
        return OperatorEnvironment.from_environ(overrides), source
    containers = deployment["spec"]["template"]["spec"].get("containers") or []
    container = next((c for c in containers if c.get("name") == OPERATOR_CONTAINER),
                     containers[0] if containers else {})
    values = {e["name"]: e["value"] for e in container.get("env") or [] if "value" in e}
    source = f"Deployment {namespace}/{OPERATOR_DEPLOYMENT}"
    return OperatorEnvironment.from_environ({**values, **overrides}, namespace), source


async def _plan_operand(kube: Kube, config: EffectiveConfig, plan: Plan) -> None:
    """The pass's decision (pass_decision.decide) over what the cluster holds, as steps: the
    same reads, the same rules, so `plan` and a pass answer alike."""
    discovery = Discovery(kube)
    plan.namespace = config.namespace
    desired = render_operand(config)
    cache = ObjectCache()  # never synced: every read goes to the server
    observation = await observe(config, desired, Applier(kube, discovery, cache),
                                Preflight(kube, discovery), Pruner(kube, discovery, cache))
    decision, missing = decide(observation), observation.missing
    if decision.refusal is not None:
        raise PlanRefusedError(f"the operator would write nothing (Degraded, ObjectNotOwned): "
                               f"{decision.refusal}")
    new_namespace = any(o.live is None for o in decision.namespace)
    for item in (*decision.namespace, *decision.apply):
        await _plan_object(kube, discovery, item, new_namespace and bool(item.ref.namespace),
                           plan)
    for held in decision.held:
        reason = next(m.reason for m in missing if m.holds(held.ref))
        plan.steps.append(Step("wait", held.ref, (f"held back until {reason} is resolved",)))
    plan.steps.extend(Step("wait", o.ref, ("being deleted; created again once it is gone",))
                      for o in decision.waiting)
    if decision.blocked is not None:
        plan.degraded = decision.blocked.reason
        plan.notes.append(f"The pass would end Degraded ({decision.blocked.reason}) and "
                          f"delete nothing until then: {decision.blocked}")
    plan.steps.extend(Step("delete", ref) for ref in refs(decision.prune))
    plan.steps.extend(Step("delete", ref, ("once cert-manager's webhook Certificate is Ready",))
                      for ref in refs(decision.deferred))


async def _plan_object(kube: Kube, discovery: Discovery, observed: Observed,
                       in_new_namespace: bool, plan: Plan) -> None:
    ref, live = observed.ref, observed.live
    body = prepare_for_apply(observed.desired)
    if is_converged(body, live, FIELD_MANAGER):
        plan.unchanged += 1
        return
    if in_new_namespace:  # the server can check it only once its namespace exists
        plan.steps.append(Step("create", ref, ("checked by the API server once the namespace "
                                               "exists",)))
        return
    resource = await discovery.require(ref.api_version, ref.kind)
    try:
        after = await kube.apply(resource.object_path(ref.name, ref.namespace or None), body,
                                 field_manager=FIELD_MANAGER, dry_run=True)
    except ApiError as error:
        if error.transient:
            raise
        raise PlanRefusedError(f"the API server refuses {ref}: {error.status} {error.reason}: "
                      f"{error.message}") from None
    if live is None:
        plan.steps.append(Step("create", ref))
        return
    changes = changed_fields(live, after, secret=ref.kind == "Secret")
    plan.steps.append(Step("adopt" if observed.foreign else "change", ref,
                           _shown([_describe(c) for c in changes] or ["metadata only"])))


async def _plan_removal(kube: Kube, esc: JsonObject, plan: Plan) -> None:
    plan.namespace = operand_namespace_of(esc)
    removal = await plan_uninstall(kube, plan.namespace, namespaces=False)
    plan.steps.extend(Step("delete", candidate.ref) for candidate in removal.objects)
    plan.notes.extend(f"kept: {kept.ref}: {kept.reason}" for kept in removal.kept)
    plan.notes.append("managementState is Removed: the operator would remove the operand")


# --- field differences ------------------------------------------------------------------------


@dataclass(frozen=True)
class Change:
    path: str
    before: Any
    after: Any
    hidden: bool = False  # a Secret's value: only that it changed


_MISSING = object()


def changed_fields(before: Any, after: Any, prefix: tuple[Any, ...] = (), *,
                   secret: bool = False) -> list[Change]:
    """Every leaf that differs between two objects (lists of equal length by index, others
    whole), as paths like `spec.template.spec.containers[0].args`; the server's bookkeeping
    is not a change."""
    return [Change(_path(path), old, new, secret and path[:1] in (("data",), ("stringData",)))
            for path, old, new in _walk(before, after, prefix)
            if not any(path[:len(noise)] == noise for noise in _NOISE)]


def _walk(before: Any, after: Any, path: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    if isinstance(after, dict) and before is _MISSING:  # an added map: each of its fields
        before = dict.fromkeys(after, _MISSING)
    if isinstance(before, dict) and after is _MISSING:
        after = dict.fromkeys(before, _MISSING)
    if isinstance(before, dict) and isinstance(after, dict):
        for key in sorted(set(before) | set(after), key=str):
            yield from _walk(before.get(key, _MISSING), after.get(key, _MISSING), (*path, key))
    elif before is _MISSING and after is _MISSING:
        return
    elif isinstance(before, list) and isinstance(after, list) and len(before) == len(after):
        for index, (old, new) in enumerate(zip(before, after, strict=True)):
            yield from _walk(old, new, (*path, index))
    elif before != after:
        yield path, before, after


def _path(parts: tuple[Any, ...]) -> str:
    text = ""
    for part in parts:
        if isinstance(part, int):
            text += f"[{part}]"
        elif re.fullmatch(r"[A-Za-z0-9_-]+", str(part)):
            text += f".{part}" if text else str(part)
        else:
            text += f"[{part}]"
    return text


def _describe(change: Change) -> str:
    if change.hidden:
        return f"{change.path}: changed (value not shown)"
    if change.before is _MISSING:
        return f"{change.path}: added {_value(change.after)}"
    if change.after is _MISSING:
        return f"{change.path}: removed"
    return f"{change.path}: {_value(change.before)} -> {_value(change.after)}"


def _value(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    return text if len(text) <= 60 else f"{text[:57]}..."


def _shown(lines: list[str]) -> tuple[str, ...]:
    if len(lines) <= FIELDS_SHOWN:
        return tuple(lines)
    return (*lines[:FIELDS_SHOWN], f"(and {len(lines) - FIELDS_SHOWN} more fields)")


ACTIONS = ("create", "change", "adopt", "delete", "wait")  # in the order printed


def print_plan(plan: Plan, out: TextIO) -> None:
    print("ExternalSecretsConfig/cluster: accepted by the API server (server-side dry run)"
          + ("" if plan.esc_changes else "; no change of its spec"), file=out)
    for change in plan.esc_changes:
        print(f"  {change}", file=out)
    print(f"Operator environment: {plan.environment}", file=out)
    print(f"managementState: {plan.management}", file=out)
    print(f"\nOperand in namespace {plan.namespace}:", file=out)
    for action in ACTIONS:
        for step in (s for s in plan.steps if s.action == action):
            print(f"  {action:<7} {step.ref}", file=out)
            for detail in step.details:
                print(f"            {detail}", file=out)
    if plan.unchanged:
        print(f"  unchanged: {plan.unchanged} objects", file=out)
    for note in plan.notes:
        print(f"\n{note}", file=out)
    print(f"\nPlan: {plan.count('create')} to create, "
          f"{plan.count('change') + plan.count('adopt')} to change, "
          f"{plan.count('delete')} to delete.", file=out)
