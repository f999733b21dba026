"""How a pass that did not succeed is reported: its Outcome (the conditions) and the Failure
behind it (`status.failure`: the object, the request and the server's answer, and the command
that shows more). Pure functions, one per kind of problem."""

from __future__ import annotations

from manager.api.models import Failure
from manager.apply import ForeignObjectsError, ObjectError, ObjectRef, TerminatingObjectError
from manager.client.kube import ApiError
from manager.config import ESM_GLOBAL, ConfigError
from manager.errors import PassError
from manager.names import (
    ESC_KIND,
    ESM_KIND,
    OPERATOR_DEPLOYMENT,
    OPERATOR_NAME,
    OPERATOR_NAMESPACE,
)
from manager.reporting.status import Outcome, OutcomeKind, inspect_command
from manager.steps.preflight import MissingDependencyError

LOGS = f"kubectl logs -n {OPERATOR_NAMESPACE} deployment/{OPERATOR_DEPLOYMENT}"
PLAN = ("python -m manager plan -f <file of ExternalSecretsConfig/cluster> (repeats each "
        "request as a server-side dry run)")
RBAC = f"kubectl get clusterrole {OPERATOR_NAME}-manager -o yaml"


def failed_outcome(problem: PassError) -> Outcome:
    """The Outcome of a pass that stopped with `problem` (an error the pass expects)."""
    if isinstance(problem, ConfigError):
        return config_outcome(problem)
    if isinstance(problem, MissingDependencyError):
        return Outcome(OutcomeKind.DEGRADED, problem.reason, str(problem),
                       failure=Failure(inspect=problem.inspect, object=problem.subject))
    if isinstance(problem, ForeignObjectsError):
        ref = problem.refs[0]
        return Outcome(OutcomeKind.DEGRADED, problem.reason, str(problem), failure=Failure(
            inspect=f"{inspect_command(ref.kind, ref.namespace, ref.name)} --show-managed-fields",
            object=str(ref)))
    if isinstance(problem, TerminatingObjectError):
        ref = problem.ref
        return Outcome(OutcomeKind.RETRYING, "ObjectTerminating", str(problem), failure=Failure(
            inspect=inspect_command(ref.kind, ref.namespace, ref.name), object=str(ref)))
    if isinstance(problem, ObjectError):
        return api_outcome(problem.error, str(problem), problem.ref, problem.verb)
    if isinstance(problem, ApiError):
        return api_outcome(problem, str(problem))
    raise TypeError(f"not a pass failure: {problem!r}")


def config_outcome(error: ConfigError) -> Outcome:
    if error.field.startswith(ESM_GLOBAL):
        return Outcome(OutcomeKind.DEGRADED, "InvalidGlobalConfig",
                       f"ExternalSecretsManager cluster {error.field}: {error.message}",
                       failure=Failure(inspect=_explain(ESM_KIND, error.field),
                                       object=f"{ESM_KIND} cluster"))
    if error.field.startswith("env."):
        return Outcome(OutcomeKind.DEGRADED, "InvalidOperatorEnvironment",
                       f"operator Deployment {error.field}: {error.message}",
                       failure=Failure(
                           inspect=f"kubectl set env -n {OPERATOR_NAMESPACE} deployment/"
                                   f"{OPERATOR_DEPLOYMENT} --list",
                           object=f"Deployment {OPERATOR_NAMESPACE}/{OPERATOR_DEPLOYMENT}"))
    return Outcome(OutcomeKind.DEGRADED, "InvalidConfiguration", str(error),
                   failure=Failure(inspect=_explain(ESC_KIND, error.field),
                                   object=f"{ESC_KIND} cluster"))


def _explain(kind: str, field: str) -> str:
    """`kubectl explain` of the field (without map keys or list indexes)."""
    path = field.split("[", 1)[0]
    return f"kubectl explain {kind.lower()}.{path}"


def api_outcome(error: ApiError, text: str, ref: ObjectRef | None = None,
                verb: str = "") -> Outcome:
    failure = Failure(
        inspect=_api_inspect(error, verb),
        object=str(ref) if ref is not None and ref.name != "*" else None,
        request=f"{error.method} {error.path}".strip() or None,
        response=f"{error.status} {error.reason}: {error.message}")
    if error.transient or error.not_found:  # not found: an API went away mid-pass
        return Outcome(OutcomeKind.RETRYING, "APIError", text, failure=failure)
    if error.status in (401, 403):
        return Outcome(OutcomeKind.DEGRADED, "Forbidden",
                       f"{text}. The operator's ServiceAccount lacks a permission: install the "
                       "RBAC shipped with the operator (manifests/operator/rbac.yaml)",
                       failure=failure)
    return Outcome(OutcomeKind.DEGRADED, "ApplyRejected",
                   f"{text}. The API server rejected the object; check the fields of the "
                   "ExternalSecretsConfig that shape it", failure=failure)


def _api_inspect(error: ApiError, verb: str) -> str:
    if error.status in (401, 403):
        return RBAC
    if verb == "apply" and not error.transient:
        return PLAN
    return LOGS
