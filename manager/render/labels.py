"""The operator's standard labels: the one place that decides them.

Every operand object and pod template carries them, over the user's labels:

    app=external-secrets
    app.kubernetes.io/name=<the component's app name>
    app.kubernetes.io/instance=external-secrets
    app.kubernetes.io/version=<the version of that component's image>
    app.kubernetes.io/managed-by=external-secrets-operator
    app.kubernetes.io/part-of=external-secrets-operator

Deployment and Service selectors use only name and instance: a Deployment's selector is
immutable, so it must not change when the version or the user's labels change. NetworkPolicy
pod selectors add managed-by (`policy_selector`): a policy must select only pods the operator
rendered, never another workload of the namespace that happens to share a name label.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from manager.names import MANAGED_BY_LABEL, OPERATOR_NAME

APP: Final = "external-secrets"
INSTANCE: Final = "external-secrets"
PART_OF: Final = OPERATOR_NAME
MANAGED_BY: Final = OPERATOR_NAME

NAME_KEY: Final = "app.kubernetes.io/name"
INSTANCE_KEY: Final = "app.kubernetes.io/instance"
VERSION_KEY: Final = "app.kubernetes.io/version"
MANAGED_BY_KEY: Final = MANAGED_BY_LABEL
PART_OF_KEY: Final = "app.kubernetes.io/part-of"

# The selector a pruner uses to find every object the operator manages.
MANAGED_SELECTOR: Final = f"{MANAGED_BY_KEY}={MANAGED_BY}"


def selector_labels(app_name: str) -> dict[str, str]:
    """Labels that select a component's pods."""
    return {NAME_KEY: app_name, INSTANCE_KEY: INSTANCE}


def standard_labels(app_name: str, version: str) -> dict[str, str]:
    return {
        "app": APP,
        NAME_KEY: app_name,
        INSTANCE_KEY: INSTANCE,
        VERSION_KEY: version,
        MANAGED_BY_KEY: MANAGED_BY,
        PART_OF_KEY: PART_OF,
    }


def object_labels(user_labels: Mapping[str, str], app_name: str,
                  version: str) -> dict[str, str]:
    """The labels of one object: the user's, then the standard ones over them."""
    return {**user_labels, **standard_labels(app_name, version)}


def policy_selector(*app_names: str) -> dict[str, Any]:
    """A NetworkPolicy podSelector matching the operand pods of these components only."""
    ours = {INSTANCE_KEY: INSTANCE, MANAGED_BY_KEY: MANAGED_BY}
    if len(app_names) == 1:
        return {"matchLabels": {NAME_KEY: app_names[0], **ours}}
    return {"matchLabels": ours,
            "matchExpressions": [{"key": NAME_KEY, "operator": "In", "values": list(app_names)}]}
