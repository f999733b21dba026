"""Which Events a pass leaves on the ExternalSecretsConfig. Pure functions.

Few Events, each worth reading in `kubectl describe esc cluster`:

- `Applied` (Normal), once per pass that wrote anything: what it did and why, for example
  "applied 3 objects (3 created), pruned 5: bitwarden switched off". Each object's detail
  is in the operator's log, one line per write.
- `Adopted` (Normal), one per object taken over from another manager (who managed it).
- the Degraded reason (Warning) when a pass ends Degraded; the same problem again joins the
  Event's series instead of adding Events (manager.reporting.events).
- `Recovered` (Normal) when a pass ends Ready or Progressing after one that was Degraded (a
  transient error in between says nothing either way).
- `Unmanaged` and `Removed` (Normal) when the operator stops acting on the operand, or has
  removed it, following spec.managementState, and again when what the Ready condition
  summarises changes (the drift found while Unmanaged): the Event has the whole list.
- the reason of a Ready outcome's warning (Warning; `RemovedProviderInUse`: stores on a
  provider the next operand release no longer has) whenever the Ready line that carries it
  changes: the Event has the whole list.

The notes carry an outcome's whole message; the conditions carry a summary of it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic.alias_generators import to_camel

from manager.apply.results import Action, ObjectResult
from manager.client.kube import JsonObject
from manager.config import EffectiveConfig
from manager.render.components import CERT_CONTROLLER_APP
from manager.reporting.events import EventSpec
from manager.reporting.status import Outcome, OutcomeKind

# Every EffectiveConfig field is named in "why" of the Applied Event when it changes, by the
# spec's name (camelCased) unless the spec calls it otherwise; these fields have rules of
# their own (_switches, the bitwarden line, _cert_manager_changes) or are not settings.
_OWN_RULES = frozenset({"namespace", "bitwarden", "cert_manager", "hidden_global_settings",
                        "ignored_settings", "unsupported_overrides", "loaded_once"})
# CertManagerSettings fields that are cluster facts, not settings (at their defaults).
_CERT_MANAGER_FACTS = {"ca_bundle": None, "bundle_overlap": None, "overlap_until": None,
                       "mount_previous": False, "issued": False}
_LOADED_NAMES = {"trusted-ca": "the trustedCABundle ConfigMap",
                 "proxy-ca": "the proxy's CA bundle", "bitwarden-tls": "bitwarden's TLS Secret"}
_SPEC_NAMES = {"webhook_check_interval": "certificateCheckInterval",
               "egress_policies": "networkPolicies", "images": "the operand images",
               "versions": "the operand versions",
               "tls_profile": "the cluster's TLS security profile"}
_SETTING_NAMES = {field: _SPEC_NAMES.get(field) or to_camel(field)
                  for field in EffectiveConfig.model_fields if field not in _OWN_RULES}


@dataclass(frozen=True)
class Before:
    """What the ExternalSecretsConfig's status said before the pass."""

    degraded: bool = False
    ready_reason: str = ""
    ready_message: str = ""

    @classmethod
    def of(cls, esc: JsonObject) -> Before:
        conditions = {c.get("type"): c for c in (esc.get("status") or {}).get("conditions") or []}
        ready = conditions.get("Ready") or {}
        return cls((conditions.get("Degraded") or {}).get("status") == "True",
                   str(ready.get("reason") or ""), str(ready.get("message") or ""))


def pass_events(writes: Sequence[ObjectResult], outcome: Outcome, before: Before,
                previous: EffectiveConfig | None, current: EffectiveConfig | None,
                *, cause: str | None = None) -> list[EventSpec]:
    """The Events of one pass; `previous` is the configuration of the last pass that
    applied everything (None: none yet in this process), `current` this pass's (None: the
    spec is invalid); `cause`, when given, says why the pass wrote instead."""
    events = [EventSpec("Normal", "Adopted", f"adopted {w.ref} ({w.note})")
              for w in writes if w.action is Action.ADOPTED]
    done = summary(writes)
    if done is not None:
        why = cause or (change_cause(previous, current, writes) if current is not None else "")
        events.append(EventSpec("Normal", "Applied", f"{done}: {why}" if why else done))
    if outcome.kind is OutcomeKind.DEGRADED:
        events.append(EventSpec("Warning", outcome.reason, outcome.message))
    elif before.degraded and outcome.kind is not OutcomeKind.RETRYING:
        events.append(EventSpec("Normal", "Recovered", f"no longer degraded: {outcome.message}"))
    if outcome.kind in (OutcomeKind.UNMANAGED, OutcomeKind.REMOVED) and (
            before.ready_reason != outcome.reason or before.ready_message != outcome.line):
        events.append(EventSpec("Normal", outcome.reason, outcome.message))
    if outcome.warning is not None and before.ready_message != outcome.line:
        events.append(EventSpec("Warning", *outcome.warning))
    return events


def summary(writes: Sequence[ObjectResult]) -> str | None:
    """"applied 4 objects (3 created, 1 updated), pruned 2"; None when nothing was written."""
    counts = {action: sum(1 for w in writes if w.action is action) for action in Action}
    applied = counts[Action.CREATED] + counts[Action.UPDATED] + counts[Action.ADOPTED]
    parts = []
    if applied:
        detail = ", ".join(f"{counts[a]} {a}" for a in (Action.CREATED, Action.UPDATED,
                                                         Action.ADOPTED) if counts[a])
        parts.append(f"applied {_objects(applied)} ({detail})")
    if counts[Action.DELETED]:
        parts.append(f"pruned {counts[Action.DELETED]}" if parts
                     else f"pruned {_objects(counts[Action.DELETED])}")
    return ", ".join(parts) or None


def _objects(count: int) -> str:
    return f"{count} object" if count == 1 else f"{count} objects"


def change_cause(previous: EffectiveConfig | None, current: EffectiveConfig,
                 writes: Sequence[ObjectResult]) -> str:
    """Why a pass wrote: what changed since the last pass that converged, or drift."""
    if previous is None:
        if writes and all(w.action is Action.CREATED for w in writes):
            return "installed"
        return "the cluster did not match the spec when the operator started"
    changes = _switches(previous, current)
    # What follows from switching bitwarden (its settings, its egress policy) is not listed.
    with_bitwarden = previous.bitwarden.enabled and current.bitwarden.enabled
    before, after = _settings(previous, with_bitwarden), _settings(current, with_bitwarden)
    for field, name in _SETTING_NAMES.items():
        if before[field] != after[field]:
            changes.append(_changed(name, before[field], after[field]))
    if before["bitwarden"] != after["bitwarden"]:
        changes.append("bitwardenSecretManagerProvider changed")
    if previous.cert_manager.enabled and current.cert_manager.enabled:
        changes.extend(_cert_manager_changes(previous, current, writes))
    changes.extend(_rotations(previous, current))
    return ", ".join(changes) or "repaired drift (objects were changed or deleted)"


def _switches(previous: EffectiveConfig, current: EffectiveConfig) -> list[str]:
    changes = []
    if previous.namespace != current.namespace:
        changes.append(f"operand moved from namespace {previous.namespace} to "
                       f"{current.namespace}")
    for name, was, now in (("bitwarden", previous.bitwarden.enabled, current.bitwarden.enabled),
                           ("cert-manager", previous.cert_manager.enabled,
                            current.cert_manager.enabled)):
        if was != now:
            changes.append(f"{name} switched {'on' if now else 'off'}")
    return changes


def _rotations(previous: EffectiveConfig, current: EffectiveConfig) -> list[str]:
    """Content loaded once that changed under the same settings (a source that comes or goes
    follows from a setting, named above)."""
    return [f"the content of {_LOADED_NAMES[source]} changed, so the pods that load it roll"
            for source, digest in current.loaded_once.items()
            if previous.loaded_once.get(source, digest) != digest]


def _changed(name: str, before: Any, after: Any) -> str:
    if isinstance(before, int | str) and isinstance(after, int | str):
        return f"{name} {before} -> {after}"
    return f"{name} changed"


def _settings(config: EffectiveConfig, with_bitwarden: bool) -> dict[str, Any]:
    dumped = config.model_dump()
    if not with_bitwarden:
        dumped["bitwarden"] = None
        dumped["egress_policies"] = [p for p in dumped["egress_policies"]
                                     if p["workload"] != "bitwarden"]
    return dumped


def _cert_manager_changes(previous: EffectiveConfig, current: EffectiveConfig,
                          writes: Sequence[ObjectResult]) -> list[str]:
    changes = []
    # Switched on in an earlier pass, the cert-controller waits for the certificate.
    if any(w.action is Action.DELETED and w.ref.name.startswith(CERT_CONTROLLER_APP)
           for w in writes):
        changes.append("cert-manager's webhook certificate is Ready, so the cert-controller goes")
    if (previous.cert_manager.model_copy(update=_CERT_MANAGER_FACTS)
            != current.cert_manager.model_copy(update=_CERT_MANAGER_FACTS)):
        changes.append("certManagerConfig changed")
    if previous.cert_manager.ca_bundle != current.cert_manager.ca_bundle:
        changes.append("cert-manager issued a new webhook CA")
    if current.cert_manager.bundle_overlap and not previous.cert_manager.bundle_overlap:
        changes.append("the caBundle trusts the previous CA too until every webhook pod "
                       "serves the new certificate")
    elif previous.cert_manager.bundle_overlap and not current.cert_manager.bundle_overlap:
        changes.append("every webhook pod serves the new certificate, so the caBundle drops "
                       "the previous CA")
    return changes
