"""`spec.managementState` of the ExternalSecretsConfig: whether the operator acts on the
operand (Managed), only watches it (Unmanaged), or removes it (Removed). Absent means
Managed."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

MANAGED: Final = "Managed"
UNMANAGED: Final = "Unmanaged"
REMOVED: Final = "Removed"


def management_state(esc: Mapping[str, Any]) -> str:
    return str((esc.get("spec") or {}).get("managementState") or MANAGED)
