"""Server-side apply, pruning and ordering: DesiredState → the cluster.

- `Applier`: server-side apply with field manager `external-secrets-operator`, forcing
  ownership; a write is sent only when the object is missing, out of date or drifted
  (`convergence`).
- `Pruner`: deletion of our objects that are no longer desired (`prune`, safety rules there).
- `ownership`: whose an object is, and who manages one that is not ours.
- `Discovery`: kind → REST resource, cached per group version.
"""

from manager.apply.applier import Applier, Observed
from manager.apply.discovery import Discovery, Resource
from manager.apply.ownership import ForeignObjectsError
from manager.apply.prune import MANAGED_SELECTOR, Pruner
from manager.apply.results import (
    Action,
    ObjectError,
    ObjectRef,
    ObjectResult,
    TerminatingObjectError,
)

__all__ = [
    "MANAGED_SELECTOR",
    "Action",
    "Applier",
    "Discovery",
    "ForeignObjectsError",
    "ObjectError",
    "ObjectRef",
    "ObjectResult",
    "Observed",
    "Pruner",
    "Resource",
    "TerminatingObjectError",
]
