"""DesiredState: the rendered objects, grouped by component, and the order to apply them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from manager.render.templates import template_kinds

# Apply stages by kind: a stage refers only to earlier ones (namespaced objects need their
# Namespace; a binding needs its role, or the API server refuses it as an escalation; a pod
# needs its ServiceAccount, RBAC, Secrets, ConfigMaps and egress policies; the webhook
# configuration needs the webhook's Service and Deployment). The kinds of one stage do not
# refer to each other, so a pass applies a whole stage at once: five round trips, not one
# per kind.
APPLY_STAGES: Final = (
    ("Namespace",),
    ("ServiceAccount", "ClusterRole", "Role", "Secret", "ConfigMap", "Certificate", "Service",
     "PodDisruptionBudget", "NetworkPolicy"),
    ("ClusterRoleBinding", "RoleBinding"),
    ("Deployment",),
    ("ValidatingWebhookConfiguration", "ServiceMonitor", "PrometheusRule"),
)
APPLY_ORDER: Final = tuple(kind for stage in APPLY_STAGES for kind in stage)
"""The kinds in apply order; deletion (pruning, uninstalling) goes in reverse."""
CLUSTER_SCOPED_KINDS: Final = frozenset(
    {"Namespace", "ClusterRole", "ClusterRoleBinding", "ValidatingWebhookConfiguration"}
)


def kind_rank(kind: str) -> int:
    """Position of a kind in APPLY_ORDER (unknown kinds go last). Deletion (pruning and
    uninstalling) uses the reverse: dependents first, RBAC and the Namespace last."""
    return APPLY_ORDER.index(kind) if kind in APPLY_ORDER else len(APPLY_ORDER)


def apply_stage(kind: str) -> int:
    """The stage of a kind in APPLY_STAGES (unknown kinds last, after every stage)."""
    return next((n for n, stage in enumerate(APPLY_STAGES) if kind in stage),
                len(APPLY_STAGES))


def apply_rank(obj: Mapping[str, Any]) -> int:
    return kind_rank(str(obj.get("kind")))


def renderable_kinds() -> tuple[tuple[str, str], ...]:
    """Every (apiVersion, kind) a template can produce, in apply order."""
    return tuple(sorted(template_kinds(),
                        key=lambda pair: (apply_rank({"kind": pair[1]}), pair)))


@dataclass(frozen=True)
class DesiredState:
    """The operand as it should be: complete manifests, by component.

    `components` holds only the enabled components; a component that is absent is to be
    removed from the cluster (its managed objects pruned).
    """

    namespace: str
    components: Mapping[str, tuple[dict[str, Any], ...]]

    def objects(self) -> tuple[dict[str, Any], ...]:
        """Every object in apply order (stable: component order, then template order)."""
        everything = [obj for objects in self.components.values() for obj in objects]
        return tuple(sorted(everything, key=apply_rank))

    def kinds(self) -> tuple[tuple[str, str], ...]:
        """The (apiVersion, kind) pairs the renderer can ever produce, rendered now or not.

        Pruning lists exactly these kinds by label, so objects of a kind that the current
        configuration no longer renders (a Certificate after switching back) are found too.
        """
        return renderable_kinds()
