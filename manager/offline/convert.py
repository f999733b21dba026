"""Red Hat's GA ExternalSecretsConfig and ExternalSecretsManager, in this operator's API.

Red Hat's operator (openshift/external-secrets-operator) serves the same group, version, kinds
and singleton name (`operator.openshift.io/v1alpha1`, `cluster`) with another spec shape: the
bitwarden plugin under `spec.plugins` with `mode: Enabled|Disabled`, cert-manager under
`spec.controllerConfig.certProvider.certManager`, the trusted CA bundle under
`spec.controllerConfig.trustedCABundle`, `features[].mode`, per-component `advancedOverrides`.
Stored under this operator's CRDs, such an object loses those fields (pruned as unknown) or is
refused, so it has to be converted first.

`convert_text` turns YAML documents (each an object or a `kind: List` of them) into objects
of this API, each with its report: every field mapped (from -> to, with a note where the
meaning shifts), every field not mapped and why (no equivalent, a different meaning, or a
value this API does not admit), and what was dropped on purpose (server-set metadata, status,
Red Hat's finalizer). Nothing is dropped silently. An object already in this operator's shape
is returned unchanged. Every result validates against manager.api.models; the API server's
CEL rules are checked only where it is applied (`kubectl apply --dry-run=server`).

The GA fields, one handler each, are in manager/offline/ga_shape.py. Values are never put
into a report (an overrideEnv value may be a credential), only the enum values converted.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic
import yaml

from manager.api.models import ExternalSecretsConfig, ExternalSecretsManager
from manager.names import API_VERSION, ESC_KIND, ESM_KIND, SINGLETON_NAME
from manager.offline.ga_shape import (
    DIFFERENT_MEANING,
    ESC_SPEC,
    ESM_SPEC,
    NO_EQUIVALENT,
    NOT_ADMISSIBLE,
    UNKNOWN_FIELD,
    Ctx,
    Mapped,
    NotMapped,
    Report,
    dotted,
)

__all__ = ["DIFFERENT_MEANING", "GA_FINALIZER", "NOT_ADMISSIBLE", "NO_EQUIVALENT", "Conversion",
           "ConvertError", "Mapped", "NotMapped", "convert_object", "convert_text", "dotted",
           "summary_lines"]

GA_FINALIZER = "externalsecretsconfigs.operator.openshift.io/external-secrets-controller"
GA_PROCESSED_ANNOTATION = "operator.openshift.io/external-secrets-processed"
LAST_APPLIED_ANNOTATION = "kubectl.kubernetes.io/last-applied-configuration"
SERVER_SET_METADATA = ("uid", "resourceVersion", "generation", "creationTimestamp",
                       "managedFields", "selfLink", "deletionTimestamp",
                       "deletionGracePeriodSeconds")


class ConvertError(ValueError):
    """Input that cannot be converted at all: not YAML, not an ESC or ESM."""


@dataclass(frozen=True)
class Conversion:
    kind: str
    name: str
    converted: bool
    """False: the object was already in this operator's shape and is returned unchanged."""
    result: dict[str, Any]
    mapped: tuple[Mapped, ...]
    not_mapped: tuple[NotMapped, ...]
    notes: tuple[str, ...]
    """What was dropped on purpose, and what changes without any field saying so."""


_MODELS: dict[str, type[pydantic.BaseModel]] = {
    ESC_KIND: ExternalSecretsConfig, ESM_KIND: ExternalSecretsManager}
_SPECS = {ESC_KIND: ESC_SPEC, ESM_KIND: ESM_SPEC}


def _documents(text: str) -> list[dict[str, Any]]:
    """The objects of YAML text: each document, or each item of a `kind: List`."""
    try:
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except yaml.YAMLError as error:
        raise ConvertError(f"not YAML: {error}") from error
    objects: list[dict[str, Any]] = []
    for doc in documents:
        for obj in _items(doc):
            if not isinstance(obj, dict):
                raise ConvertError(f"a document is not an object: {type(obj).__name__}")
            objects.append(obj)
    if not objects:
        raise ConvertError("no object in the input")
    return objects


def _items(doc: Any) -> list[Any]:
    if isinstance(doc, dict) and doc.get("kind") == "List":
        items = doc.get("items") or []
        return items if isinstance(items, list) else [items]
    return [doc]


def convert_text(text: str, *, adopt: bool = False) -> list[Conversion]:
    """Every ExternalSecretsConfig and ExternalSecretsManager of `text`, converted."""
    return [convert_object(obj, adopt=adopt) for obj in _documents(text)]


def convert_object(obj: Mapping[str, Any], *, adopt: bool = False) -> Conversion:
    """One object in this API. `adopt`: add controllerConfig.adoptExistingObjects "true" to an
    ExternalSecretsConfig (the opt-in for taking over the objects Red Hat's operator made)."""
    kind = obj.get("kind")
    if obj.get("apiVersion") != API_VERSION or kind not in _MODELS:
        raise ConvertError(f"{obj.get('apiVersion')}/{kind} is not an {ESC_KIND} or "
                           f"{ESM_KIND} of {API_VERSION}")
    name = str((obj.get("metadata") or {}).get("name") or SINGLETON_NAME)
    report = Report()
    if _already_ours(obj, kind):
        result = copy.deepcopy(dict(obj))
        report.notes.append("already in this operator's shape: written unchanged" + (
            " but for --adopt" if adopt and kind == ESC_KIND else ""))
        _empty_proxy_notes(obj, report)
        converted = False
    else:
        result = _convert(obj, kind, report)
        converted = True
    if adopt and kind == ESC_KIND:
        _adopt(result, report)
    _make_valid(result, _MODELS[kind], report)
    return Conversion(kind, name, converted, result, tuple(report.mapped),
                      tuple(report.not_mapped), tuple(report.notes))


def _already_ours(obj: Mapping[str, Any], kind: str) -> bool:
    """Valid in this API and without a trace of Red Hat's operator. (A GA-only field fails
    validation: the models refuse unknown fields.)"""
    metadata = obj.get("metadata") or {}
    if GA_FINALIZER in (metadata.get("finalizers") or []) or (
            GA_PROCESSED_ANNOTATION in (metadata.get("annotations") or {})):
        return False
    try:
        _MODELS[kind].model_validate(obj)
    except pydantic.ValidationError:
        return False
    return True


def _empty_proxy_notes(obj: Mapping[str, Any], report: Report) -> None:
    """`proxy: {}` is valid in both shapes with opposite meanings: say which one is kept."""
    spec = obj.get("spec") or {}
    for section in ("appConfig", "globalConfig"):
        if (spec.get(section) or {}).get("proxy") == {}:
            report.notes.append(
                f"spec.{section}.proxy: {{}} means no proxy here (the ESM's and the cluster's "
                f"are not used); in Red Hat's shape it meant the next source: if this object "
                f"comes from Red Hat's operator, remove it")


def _convert(obj: Mapping[str, Any], kind: str, report: Report) -> dict[str, Any]:
    result: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind,
                              "metadata": _metadata(obj.get("metadata") or {}, report)}
    spec: dict[str, Any] = {}
    if obj.get("spec") is not None:
        _SPECS[kind](Ctx(report, spec, ("spec",)), ("spec",), obj["spec"])
    result["spec"] = spec
    for key in obj:
        if key == "status":
            report.notes.append("status: dropped (the operator writes its own)")
        elif key not in ("apiVersion", "kind", "metadata", "spec"):
            report.refuse((key,), NO_EQUIVALENT, UNKNOWN_FIELD)
    if kind == ESC_KIND:
        _egress_note(spec, report)
    return result


def _metadata(metadata: Mapping[str, Any], report: Report) -> dict[str, Any]:
    """Name, labels and annotations; what only a server or Red Hat's operator sets goes."""
    out: dict[str, Any] = {"name": metadata.get("name") or SINGLETON_NAME}
    if "name" not in metadata:
        report.notes.append(f"metadata.name: absent, written as {SINGLETON_NAME!r}")
    for key, value in metadata.items():
        if key == "name":
            continue
        if key in SERVER_SET_METADATA or key == "namespace":
            report.notes.append(f"metadata.{key}: dropped (set by the API server)")
        elif key == "annotations" and isinstance(value, dict):
            _annotations(value, out, report)
        elif key == "finalizers" and isinstance(value, list):
            kept = [item for item in value if item != GA_FINALIZER]
            if len(kept) < len(value):
                report.notes.append(f"metadata.finalizers: {GA_FINALIZER} dropped (only Red "
                                    f"Hat's operator removes it)")
            if kept:
                out["finalizers"] = kept
                report.map(("metadata", key), ("metadata", key))
        else:
            out[key] = copy.deepcopy(value)
            report.map(("metadata", key), ("metadata", key))
    return out


def _annotations(annotations: Mapping[str, Any], out: dict[str, Any], report: Report) -> None:
    kept = {}
    for key, value in annotations.items():
        if key == LAST_APPLIED_ANNOTATION:
            report.notes.append(f"{dotted(('metadata', 'annotations', key))}: dropped "
                                f"(kubectl's record of the GA-shaped object; kubectl apply "
                                f"writes a new one)")
        elif key == GA_PROCESSED_ANNOTATION:
            report.notes.append(f"{dotted(('metadata', 'annotations', key))}: dropped (Red "
                                f"Hat's operator's bookkeeping)")
        else:
            kept[key] = value
    if kept:
        out["annotations"] = kept
        report.map(("metadata", "annotations"), ("metadata", "annotations"))


def _egress_note(spec: Mapping[str, Any], report: Report) -> None:
    """The default egress differs where no field says so."""
    policies = (spec.get("controllerConfig") or {}).get("networkPolicies") or []
    covered = {policy.get("componentName") for policy in policies}
    if "ExternalSecretsCoreController" not in covered:
        report.notes.append(
            "egress: Red Hat's operator denies the controller's connections to the secret "
            "providers unless controllerConfig.networkPolicies allow them; this operator "
            "allows a component without networkPolicies entries all egress")


def _adopt(result: dict[str, Any], report: Report) -> None:
    spec = result["spec"] = result.get("spec") or {}
    controller = spec["controllerConfig"] = spec.get("controllerConfig") or {}
    controller["adoptExistingObjects"] = "true"
    report.notes.append("spec.controllerConfig.adoptExistingObjects: \"true\" added (--adopt): "
                        "the operator takes over the objects of the names it renders that "
                        "Red Hat's operator made")


def _make_valid(result: dict[str, Any], model: type[pydantic.BaseModel],
                report: Report) -> None:
    """Validate against the model; a mapped value it refuses (a bound this API sets lower)
    is taken out again and reported as not admissible."""
    for _ in range(100):
        try:
            model.model_validate(result)
            return
        except pydantic.ValidationError as error:
            problems = error.errors()
        if not any(_withdraw(result, problem, report) for problem in problems):
            first = problems[0]
            raise ConvertError(f"the result is not valid at {dotted(tuple(first['loc']))}: "
                               f"{first['msg']}")
    raise ConvertError("the result could not be made valid")


def _withdraw(result: dict[str, Any], problem: Mapping[str, Any], report: Report) -> bool:
    """Remove the mapped field that holds the invalid value `problem` points at."""
    loc = dotted(tuple(problem["loc"]))
    for entry in sorted(report.mapped, key=lambda item: -len(item.target)):
        if entry.target and (loc == entry.target or loc.startswith(
                (entry.target + ".", entry.target + "["))):
            if not _remove(result, entry.target):
                continue
            report.mapped.remove(entry)
            report.refuse_text(entry.source, NOT_ADMISSIBLE, f"{loc}: {problem['msg']}")
            return True
    return False


def _remove(result: dict[str, Any], target: str) -> bool:
    """Delete the field at a dotted target (map keys only: list entries are whole)."""
    parts = target.replace("[", ".[").split(".")
    node: Any = result
    for part in parts[:-1]:
        node = node[int(part[1:-1])] if part.startswith("[") else node.get(part)
        if node is None:
            return False
    last = parts[-1]
    if last.startswith("[") or not isinstance(node, dict) or last not in node:
        return False
    del node[last]
    return True


def summary_lines(conversions: Iterable[Conversion]) -> list[str]:
    """The report, one line per field: what an administrator reads on stderr."""
    lines = []
    for conv in conversions:
        shape = "Red Hat's GA shape, converted" if conv.converted else "this operator's shape"
        lines.append(f"{conv.kind}/{conv.name}: {shape}")
        for entry in conv.mapped:
            target = entry.target or "(no field needed)"
            detail = f" ({entry.detail})" if entry.detail else ""
            note = f"; note: {entry.note}" if entry.note else ""
            lines.append(f"  mapped      {entry.source} -> {target}{detail}{note}")
        for refused in conv.not_mapped:
            lines.append(f"  NOT MAPPED  {refused.source}: {refused.kind}: {refused.why}")
        lines.extend(f"  note        {note}" for note in conv.notes)
    return lines
