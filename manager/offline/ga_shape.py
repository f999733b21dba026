"""Red Hat's GA shape of ExternalSecretsConfig and ExternalSecretsManager, field by field.

Each GA field has a handler that writes the field of this API that says the same (`Ctx.put`)
and reports it (`Report`): mapped, with the enum value converted and a note where the effect
differs, or not mapped, with why. The fields are those of openshift/external-secrets-operator's
api/v1alpha1 types and of Red Hat's published API reference; a field without a handler is
reported as unknown. manager/offline/convert.py runs these over whole objects.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from manager.config.types import KNOWN_FEATURES

Path = tuple[str | int, ...]

NO_EQUIVALENT = "no equivalent"
DIFFERENT_MEANING = "different meaning"
NOT_ADMISSIBLE = "not admissible here"
UNKNOWN_FIELD = "not a field of Red Hat's API (nor of this one) that this converter knows"


def dotted(path: Path) -> str:
    """`spec.controllerConfig.componentConfigs[0].overrideEnv` for a path."""
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text


@dataclass(frozen=True)
class Mapped:
    source: str
    target: str
    """The field written, or "" when this API needs none for the same effect."""
    detail: str = ""
    """The enum value converted, as `Enabled -> "true"`."""
    note: str = ""
    """Where the effect differs in a way the administrator should know."""


@dataclass(frozen=True)
class NotMapped:
    source: str
    kind: str
    """NO_EQUIVALENT, DIFFERENT_MEANING or NOT_ADMISSIBLE."""
    why: str


@dataclass
class Report:
    mapped: list[Mapped] = field(default_factory=list)
    not_mapped: list[NotMapped] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def map(self, source: Path, target: Path | None, detail: str = "", note: str = "") -> None:
        self.mapped.append(Mapped(dotted(source), dotted(target) if target else "", detail,
                                  note))

    def refuse(self, source: Path, kind: str, why: str) -> None:
        self.refuse_text(dotted(source), kind, why)

    def refuse_text(self, source: str, kind: str, why: str) -> None:
        self.not_mapped.append(NotMapped(source, kind, why))


@dataclass
class Ctx:
    """Where converted fields go: `out`, which sits at `base` in the result."""

    report: Report
    out: dict[str, Any]
    base: Path

    def put(self, where: tuple[str, ...], value: Any) -> Path:
        node = self.out
        for key in where[:-1]:
            node = node.setdefault(key, {})
        node[where[-1]] = value
        return self.base + where


Handler = Callable[[Ctx, Path, Any], None]


# --- handler builders -------------------------------------------------------------------------


def _to(where: tuple[str, ...], note: str = "") -> Handler:
    """The value, as it is, at `where`."""
    def handle(ctx: Ctx, src: Path, value: Any) -> None:
        ctx.report.map(src, ctx.put(where, copy.deepcopy(value)), note=note)
    return handle


def _enum(where: tuple[str, ...], table: Mapping[Any, tuple[str, str]]) -> Handler:
    """A value converted by `table` (source value -> (target value, note))."""
    def handle(ctx: Ctx, src: Path, value: Any) -> None:
        if not _hashable(value) or value not in table:
            ctx.report.refuse(src, NO_EQUIVALENT, f"a value other than {', '.join(table)}")
            return
        target, note = table[value]
        ctx.report.map(src, ctx.put(where, target), f'{value} -> "{target}"', note)
    return handle


def _no_field(note: str) -> Handler:
    """A field whose effect this API has without any field."""
    def handle(ctx: Ctx, src: Path, _value: Any) -> None:
        ctx.report.map(src, None, note=note)
    return handle


def _refused(kind: str, why: str) -> Handler:
    def handle(ctx: Ctx, src: Path, _value: Any) -> None:
        ctx.report.refuse(src, kind, why)
    return handle


def _by_value(table: Mapping[Any, Handler]) -> Handler:
    """A different handler for each value (unknown values have no equivalent)."""
    def handle(ctx: Ctx, src: Path, value: Any) -> None:
        chosen = table.get(value) if _hashable(value) else None
        if chosen is None:
            ctx.report.refuse(src, NO_EQUIVALENT,
                              f"a value other than {', '.join(map(str, table))}")
            return
        chosen(ctx, src, value)
    return handle


def _fields(handlers: Mapping[str, Handler]) -> Handler:
    """An object converted field by field; a field without a handler is reported."""
    def handle(ctx: Ctx, src: Path, value: Any) -> None:
        if not isinstance(value, dict):
            ctx.report.refuse(src, NO_EQUIVALENT, "expected an object")
            return
        for key, item in value.items():
            handler = handlers.get(key)
            if handler is None:
                ctx.report.refuse((*src, key), NO_EQUIVALENT, UNKNOWN_FIELD)
            else:
                handler(ctx, (*src, key), item)
    return handle


def _entries(where: tuple[str, ...], handlers: Mapping[str, Handler]) -> Handler:
    """A list of objects converted field by field into a list at `where`."""
    convert = _fields(handlers)

    def handle(ctx: Ctx, src: Path, value: Any) -> None:
        if not isinstance(value, list):
            ctx.report.refuse(src, NO_EQUIVALENT, "expected a list")
            return
        items: list[dict[str, Any]] = []
        for index, item in enumerate(value):
            entry: dict[str, Any] = {}
            convert(Ctx(ctx.report, entry, ctx.base + where + (len(items),)), (*src, index),
                    item)
            if entry:
                items.append(entry)
        if items:
            ctx.put(where, items)
    return handle


def _hashable(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) or value is None


# --- the GA shape, field by field -------------------------------------------------------------


_PROXY_URLS = ("httpProxy", "httpsProxy", "noProxy")
_EMPTY_PROXY = ("empty, so Red Hat's operator went on to the next proxy source; not written: "
                "here a proxy given without a URL would hide the next source")


def _proxy(where: tuple[str, ...]) -> Handler:
    """ProxyConfig. A proxy without any URL is not written: Red Hat's operator then uses the
    next source (the ESM's, then the cluster's), while this API would take it as "no proxy"."""
    convert = _fields({
        **{key: _to((*where, key)) for key in _PROXY_URLS},
        "networkPolicyProvisioning": _by_value({
            "Managed": _refused(NO_EQUIVALENT, (
                "this operator creates no NetworkPolicy for the proxy: a component without "
                "controllerConfig.networkPolicies entries may reach any address, the proxy "
                "included; with entries, add the proxy to their egress")),
            "Unmanaged": _no_field("this operator never creates a NetworkPolicy for the proxy, "
                                   "which is what Unmanaged asks"),
        }),
    })

    def handle(ctx: Ctx, src: Path, value: Any) -> None:
        if isinstance(value, dict) and not any(value.get(key) for key in _PROXY_URLS):
            for key in _PROXY_URLS:
                if key in value:
                    ctx.report.map((*src, key), None, note=_EMPTY_PROXY)
            if not value:
                ctx.report.notes.append(f"{dotted(src)}: {{}} not written: {_EMPTY_PROXY}")
            value = {key: item for key, item in value.items() if key not in _PROXY_URLS}
        convert(ctx, src, value)
    return handle


def _common(where: tuple[str, ...]) -> dict[str, Handler]:
    """CommonConfigs: the same fields at the same place in both shapes."""
    return {
        "logLevel": _to((*where, "logLevel")),
        "resources": _to((*where, "resources")),
        "affinity": _to((*where, "affinity")),
        "tolerations": _to((*where, "tolerations")),
        "nodeSelector": _to((*where, "nodeSelector")),
        "proxy": _proxy((*where, "proxy")),
    }


_APP = ("appConfig",)
_BITWARDEN = (*_APP, "bitwardenSecretManagerProvider")
_CERT_MANAGER = (*_APP, "certManagerConfig")
_TRUSTED_CA = (*_APP, "trustedCABundle")
_CONTROLLER = ("controllerConfig",)

_BITWARDEN_MODE = {
    "Enabled": ("true", ""),
    "Disabled": ("false", (
        "Red Hat's Disabled stops managing bitwarden-sdk-server and leaves its objects as they "
        "are; here \"false\" means not installed: this operator removes the bitwarden objects "
        "it created (it never touches Red Hat's: delete those yourself)")),
}
_CERT_MANAGER_MODE = {"Enabled": ("true", ""), "Disabled": ("false", "")}

_ADVANCED = ("Red Hat's advancedOverrides replaced the pod's field; componentConfigs[] does the "
             "same for this component, over appConfig and globalConfig")
_ARGS_WHY = ("advancedOverrides args replaced the container's whole argument list; here "
             "overrideArgs only adds flags the operator does not render itself (and is "
             "unsupported): translate the flags you need by hand (docs/operations.md, "
             "\"overrideArgs (unsupported)\")")


def _override_containers(ctx: Ctx, src: Path, value: Any) -> None:
    """advancedOverrides' containers: only the component's main one, resources and args."""
    if not isinstance(value, list):
        ctx.report.refuse(src, NO_EQUIVALENT, "expected a list")
        return
    for index, container in enumerate(value):
        where = (*src, index)
        if not isinstance(container, dict):
            ctx.report.refuse(where, NO_EQUIVALENT, "expected an object")
            continue
        for key, item in container.items():
            if key == "name":
                ctx.report.map((*where, key), None, note=(
                    "named the container Red Hat's operator patched; componentConfigs[] "
                    "resources apply to the component's container"))
            elif key == "resources" and "resources" not in ctx.out:
                _to(("resources",), _ADVANCED)(ctx, (*where, key), item)
            elif key == "resources":
                ctx.report.refuse((*where, key), NO_EQUIVALENT,
                                  "a second container's resources: one set per component here")
            elif key == "args":
                ctx.report.refuse((*where, key), DIFFERENT_MEANING, _ARGS_WHY)
            else:
                ctx.report.refuse((*where, key), NO_EQUIVALENT, UNKNOWN_FIELD)


_ADVANCED_OVERRIDES = _fields({"spec": _fields({"template": _fields({"spec": _fields({
    "affinity": _to(("affinity",), _ADVANCED),
    "tolerations": _to(("tolerations",), _ADVANCED),
    "nodeSelector": _to(("nodeSelector",), _ADVANCED),
    "topologySpreadConstraints": _to(("topologySpreadConstraints",), _ADVANCED),
    "containers": _override_containers,
})})})})

_COMPONENT_CONFIG = {
    "componentName": _to(("componentName",)),
    "deploymentConfigs": _fields({
        "revisionHistoryLimit": _to(("deploymentConfigs", "revisionHistoryLimit")),
        "replicas": _to(("deploymentConfigs", "replicas"), (
            "more than one replica also renders a PodDisruptionBudget and a soft spread "
            "across nodes here")),
    }),
    "overrideEnv": _to(("overrideEnv",)),
    "advancedOverrides": _ADVANCED_OVERRIDES,
}

_NETWORK_POLICY = {
    "name": _to(("name",), (
        "the NetworkPolicy is named exactly so here; Red Hat's operator named it eso-user-<name>, "
        "and that object is not this operator's (delete it once this one exists)")),
    "componentName": _to(("componentName",)),
    "egress": _to(("egress",)),
}

ESC_SPEC = _fields({
    "appConfig": _fields({
        **_common(_APP),
        "operatingNamespace": _to((*_APP, "operatingNamespace")),
        "webhookConfig": _fields({
            "certificateCheckInterval": _to((*_APP, "webhookConfig", "certificateCheckInterval")),
        }),
    }),
    "plugins": _fields({"bitwardenSecretManagerProvider": _fields({
        "mode": _enum((*_BITWARDEN, "enabled"), _BITWARDEN_MODE),
        "secretRef": _fields({"name": _to((*_BITWARDEN, "secretRef", "name"))}),
    })}),
    "controllerConfig": _fields({
        "certProvider": _fields({"certManager": _fields({
            "mode": _enum((*_CERT_MANAGER, "enabled"), _CERT_MANAGER_MODE),
            "injectAnnotations": _to((*_CERT_MANAGER, "addInjectorAnnotations"), (
                "may change here (immutable in Red Hat's); either way this operator copies the "
                "issued CA into the webhooks itself")),
            "issuerRef": _fields({key: _to((*_CERT_MANAGER, "issuerRef", key))
                                  for key in ("name", "kind", "group")}),
            "certificateDuration": _to((*_CERT_MANAGER, "certificateDuration")),
            "certificateRenewBefore": _to((*_CERT_MANAGER, "certificateRenewBefore")),
        })}),
        "labels": _to((*_CONTROLLER, "labels")),
        "annotations": _to((*_CONTROLLER, "annotations")),
        "networkPolicies": _entries((*_CONTROLLER, "networkPolicies"), _NETWORK_POLICY),
        "componentConfigs": _entries((*_CONTROLLER, "componentConfigs"), _COMPONENT_CONFIG),
        "trustedCABundle": _fields({
            "name": _to((*_TRUSTED_CA, "configMapName"), (
                "trusted here by the controller and bitwarden-sdk-server (Red Hat's: the "
                "controller only)")),
            "key": _to((*_TRUSTED_CA, "key")),
            "optional": _by_value({
                False: _no_field("this operator always requires the ConfigMap and its key "
                                 "(Degraded until they exist), which is what false asks"),
                True: _refused(DIFFERENT_MEANING, (
                    "true goes on without the bundle while the ConfigMap or key is missing; "
                    "this operator holds the controller's Deployment back and reports "
                    "Degraded instead")),
            }),
        }),
    }),
})

_GENERIC_TARGETS_NOTE = ("here enabling it also gives the controller the right to write "
                         "ConfigMaps; Red Hat's operator left that RBAC to you")


def _feature_entry(ctx: Ctx, src: Path, entry: Any, index: int) -> dict[str, Any] | None:
    name = entry.get("name") if isinstance(entry, dict) else None
    if name not in KNOWN_FEATURES:
        ctx.report.refuse(src, NO_EQUIVALENT, f"this operator has no feature named {name!r} "
                                              f"(it has {', '.join(sorted(KNOWN_FEATURES))})")
        return None
    assert isinstance(entry, dict)
    out: dict[str, Any] = {"name": name}
    sub = Ctx(ctx.report, out, (*ctx.base, "features", index))
    ctx.report.map((*src, "name"), (*sub.base, "name"))
    note = _GENERIC_TARGETS_NOTE if name == "UnsafeAllowGenericTargets" else ""
    modes = {mode: (enabled, note) for mode, (enabled, _) in _CERT_MANAGER_MODE.items()}
    for key, value in entry.items():
        if key == "mode":
            _enum(("enabled",), modes)(sub, (*src, key), value)
        elif key == "enabled" and isinstance(value, bool):  # the technology preview's shape
            sub.report.map((*src, key), sub.put(("enabled",), str(value).lower()),
                           f'{value} -> "{str(value).lower()}"', note)
        elif key != "name":
            ctx.report.refuse((*src, key), NO_EQUIVALENT, UNKNOWN_FIELD)
    if "enabled" not in out:
        out["enabled"] = "false"
        ctx.report.notes.append(f"{dotted(src)}: no mode, Red Hat's default Disabled: written "
                                f"as enabled \"false\"")
    return out


def _features(ctx: Ctx, src: Path, value: Any) -> None:
    if not isinstance(value, list):
        ctx.report.refuse(src, NO_EQUIVALENT, "expected a list")
        return
    items: list[dict[str, Any]] = []
    for index, entry in enumerate(value):
        converted = _feature_entry(ctx, (*src, index), entry, len(items))
        if converted is not None:
            items.append(converted)
    if items:
        ctx.put(("features",), items)


ESM_SPEC = _fields({
    "globalConfig": _fields({
        **_common(("globalConfig",)),
        "labels": _to(("globalConfig", "labels")),
    }),
    "features": _features,
})
