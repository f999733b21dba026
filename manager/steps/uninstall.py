"""Removal of the operand: every object the operator created, found by its label.

Deleting the ExternalSecretsConfig stops management and leaves the operand running (the
design's rule, so that a mistaken `kubectl delete` never takes secrets syncing down). This
module is the separate, explicit step for administrators who want the operand gone.

    plan = await plan_uninstall(kube)       # read only: what would be deleted, what is kept
    report = await execute_uninstall(kube, plan)

Safety rules, each enforced here:
- objects are found by the server-side label selector
  `app.kubernetes.io/managed-by=external-secrets-operator`, for every kind the renderer can
  produce (so also kinds the current configuration no longer renders);
- an object is deleted only if it carries that label AND the operator's field manager has
  applied it (`owned_by_us`, the pruning rule): an object that merely copied our labels is
  listed as kept, never deleted;
- user objects (ExternalSecrets, SecretStores, PushSecrets, generators, Secrets without our
  label) are never among the candidates: no renderable kind selects them;
- the Secret cert-manager issued for one of our Certificates (`ownership.issued_for`: our
  label from the Certificate's secretTemplate, cert-manager's field manager) is a candidate
  with that Certificate, deleted right after it (so cert-manager does not issue it again);
  a Secret that no Certificate of ours names stays, whatever its labels;
- deletion runs in reverse apply order, each preconditioned on the listed uid;
- a Namespace goes last, only if it carries our label, and only if nothing in it is someone
  else's: deleting a namespace deletes everything inside, user Secrets included;
- while ExternalSecretsConfig/cluster exists the operator would re-create what is deleted,
  so `execute_uninstall` refuses unless forced;
- limited to one namespace (`--namespace`), it keeps the cluster-scoped objects while
  another operand namespace uses them (the ExternalSecretsConfig's, or one where our
  Deployments still run): their names are the same for every operand namespace. So are
  those of the namespaced objects rendered outside any operand namespace (`SHARED_PLACES`:
  the console's dashboard in openshift-config-managed), which a plan limited to a namespace
  includes too, and keeps on the same terms.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from functools import partial
from typing import TypeVar

from manager.apply import Discovery, ObjectRef, Resource
from manager.apply.ownership import CERTIFICATE_NAME_ANNOTATION, issued_for
from manager.apply.prune import MANAGED_SELECTOR, owned_by_us
from manager.client.kube import PARTIAL_METADATA, PARTIAL_METADATA_LIST, ApiError, JsonObject, Kube
from manager.management import MANAGED, management_state
from manager.names import (
    CONSOLE_DASHBOARDS_NAMESPACE,
    DEFAULT_OPERAND_NAMESPACE,
    ESC_KIND,
    ESC_PATH,
    ESC_PLURAL,
    MANAGED_BY_LABEL,
    OPERATOR_NAME,
    SINGLETON_NAME,
)
from manager.render.state import kind_rank, renderable_kinds

# Kinds whose objects, when not the operator's, mean a namespace holds something of value.
FOREIGN_CONTENT_KINDS = (
    ("v1", "Secret"), ("v1", "ConfigMap"), ("v1", "Pod"), ("v1", "Service"),
    ("v1", "PersistentVolumeClaim"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"), ("batch/v1", "Job"), ("batch/v1", "CronJob"),
    # An administrator's own policy for the namespace (docs/gitops.md): their setting.
    ("networking.k8s.io/v1", "NetworkPolicy"),
)
# Every namespaced kind of these API groups is user content (ExternalSecret, SecretStore,
# PushSecret, the generators, ...), whatever release of external-secrets is installed.
USER_API_GROUPS = ("external-secrets.io", "generators.external-secrets.io")
# Created in every namespace by Kubernetes and OpenShift themselves.
AUTOMATIC_CONFIGMAPS = frozenset({"kube-root-ca.crt", "openshift-service-ca.crt"})
# Where the operator renders namespaced objects outside the operand namespace, under names
# the same for every operand namespace: the console's dashboard (render/dashboard.py).
SHARED_PLACES: dict[tuple[str, str], str] = {("v1", "ConfigMap"): CONSOLE_DASHBOARDS_NAMESPACE}
SERVICE_ACCOUNT_ANNOTATION = "kubernetes.io/service-account.name"
NAMESPACE_KEPT = ("the operator does not delete namespaces; `kubectl delete namespace` (it also "
                  "deletes every Secret in it) or `python -m manager uninstall --operand --yes` "
                  "removes it")
CERTIFICATE_ANNOTATION = CERTIFICATE_NAME_ANNOTATION


RETRY_DELAYS = (0.5, 1.0, 2.0, 4.0, 8.0)
_T = TypeVar("_T")


async def _retrying(request: Callable[[], Awaitable[_T]]) -> _T:
    """A read, retried while the server answers with a transient error (429 while a CRD's
    storage initialises, 503 during an API server restart)."""
    for delay in RETRY_DELAYS:
        try:
            return await request()
        except ApiError as error:
            if not error.transient:
                raise
        await asyncio.sleep(delay)
    return await request()


class UninstallRefusedError(Exception):
    """Deleting now would be undone (the operator still manages the operand)."""


@dataclass(frozen=True)
class Candidate:
    """An object the operator created, as listed (its uid guards the deletion)."""

    resource: Resource
    ref: ObjectRef
    uid: str

    def path(self) -> str:
        return self.resource.object_path(self.ref.name, self.ref.namespace or None)


@dataclass(frozen=True)
class Kept:
    """An object found with our label that is not deleted, and why."""

    ref: ObjectRef
    reason: str


@dataclass(frozen=True)
class UninstallPlan:
    """What `--yes` would do. `namespace` is the scope (None: every namespace)."""

    namespace: str | None
    esc_exists: bool
    objects: tuple[Candidate, ...]       # in deletion order, Namespaces excluded
    namespaces: tuple[Candidate, ...]    # deleted after everything else
    kept: tuple[Kept, ...]
    esc_manages: bool = False
    """The ExternalSecretsConfig exists with managementState Managed: the operator would
    re-create what is deleted (Unmanaged and Removed do not)."""

    @property
    def empty(self) -> bool:
        return not self.objects and not self.namespaces


@dataclass
class UninstallReport:
    deleted: list[ObjectRef] = field(default_factory=list)
    skipped: list[Kept] = field(default_factory=list)     # changed since the plan
    errors: list[str] = field(default_factory=list)


def deletion_order() -> tuple[tuple[str, str], ...]:
    """The renderable kinds in reverse apply order, Namespace excluded (it goes last)."""
    kinds = [pair for pair in renderable_kinds() if pair[1] != "Namespace"]
    return tuple(sorted(kinds, key=lambda pair: -kind_rank(pair[1])))


async def read_esc(kube: Kube) -> JsonObject | None:
    return await _retrying(partial(kube.get, ESC_PATH))


def operand_namespace_of(esc: JsonObject) -> str:
    controller_config = (esc.get("spec") or {}).get("controllerConfig") or {}
    return str(controller_config.get("namespace") or DEFAULT_OPERAND_NAMESPACE)


async def plan_uninstall(kube: Kube, namespace: str | None = None, *,
                         namespaces: bool = True) -> UninstallPlan:
    """List, without changing anything, what removing the operand means.

    Scope: `namespace` if given; else the operand namespace of the ExternalSecretsConfig if
    it exists; else every namespace (an ExternalSecretsConfig deleted and created again with
    another namespace leaves an operand behind in the first one). Without `namespaces` (the
    operator's own removal, managementState Removed) Namespaces are kept: deleting one needs
    the right to delete any namespace, which the operator does not hold."""
    esc = await read_esc(kube)
    explicit = namespace
    if namespace is None and esc is not None:
        namespace = operand_namespace_of(esc)
    discovery = Discovery(kube)
    objects: list[Candidate] = []
    kept: list[Kept] = []
    for api_version, kind in deletion_order():
        resource = await discovery.resolve(api_version, kind)
        if resource is None:  # the API is not served here, so nothing of it exists
            continue
        for place in _places(namespace, (api_version, kind)):
            found, refused = await _list_ours(kube, resource, place)
            objects.extend(found)
            kept.extend(refused)
    listed = {candidate.ref for candidate in objects}
    issued = [c for c in await _issued_secrets(kube, discovery, objects) if c.ref not in listed]
    issued_refs = {candidate.ref for candidate in issued}
    kept = [entry for entry in kept if entry.ref not in issued_refs]
    objects = sorted([*objects, *issued], key=lambda c: -kind_rank(c.ref.kind))  # stable
    if explicit is not None:
        others = await _other_operands(kube, discovery, explicit, esc)
        if others:
            shared = [c for c in objects if _shared(c, explicit)]
            objects = [c for c in objects if not _shared(c, explicit)]
            kept.extend(Kept(c.ref, f"the operand in namespace {', '.join(sorted(others))} "
                             "uses it (cluster-scoped objects and the console's dashboard are "
                             "shared by every operand namespace); uninstall that operand to "
                             "remove it") for c in shared)
    doomed: list[Candidate] = []
    namespace_resource = await discovery.require("v1", "Namespace")
    ours, refused = await _list_ours(kube, namespace_resource, None)
    kept.extend(refused)
    for candidate in ours:
        if namespace is not None and candidate.ref.name != namespace:
            continue
        if not namespaces:
            kept.append(Kept(candidate.ref, NAMESPACE_KEPT))
            continue
        foreign = await foreign_content(kube, discovery, candidate.ref.name, objects)
        if foreign:
            kept.append(Kept(candidate.ref, "it holds objects the operator did not create: "
                             + ", ".join(str(ref) for ref in foreign)
                             + "; delete those (or the namespace) yourself"))
        else:
            doomed.append(candidate)
    return UninstallPlan(namespace, esc is not None, tuple(objects), tuple(doomed),
                         tuple(kept), esc is not None and management_state(esc) == MANAGED)


def _places(namespace: str | None, kind: tuple[str, str]) -> list[str | None]:
    """Where to list our objects of `kind` for a plan limited to `namespace` (None: every
    namespace): there, and where the operator renders that kind for every operand."""
    shared = SHARED_PLACES.get(kind)
    if namespace is None or shared is None or shared == namespace:
        return [namespace]
    return [namespace, shared]


def _shared(candidate: Candidate, namespace: str) -> bool:
    """The object is the same for every operand namespace, not `namespace`'s alone."""
    place = SHARED_PLACES.get((candidate.ref.api_version, candidate.ref.kind))
    return not candidate.resource.namespaced or (
        candidate.ref.namespace == place and place != namespace)


async def _other_operands(kube: Kube, discovery: Discovery, namespace: str,
                          esc: JsonObject | None) -> set[str]:
    """Operand namespaces other than `namespace`: the ExternalSecretsConfig's, and any where
    Deployments the operator applied still run (an operand left behind, not yet pruned)."""
    others = set()
    if esc is not None and operand_namespace_of(esc) != namespace:
        others.add(operand_namespace_of(esc))
    deployments = await discovery.require("apps/v1", "Deployment")
    found, _ = await _list_ours(kube, deployments, None)
    others.update(c.ref.namespace for c in found if c.ref.namespace != namespace)
    return others


async def _list_ours(kube: Kube, resource: Resource, namespace: str | None,
                     ) -> tuple[list[Candidate], list[Kept]]:
    """Objects of one kind with our label: those we applied, and those we did not.
    Metadata only: the data of Secrets never reaches this process."""
    path = resource.collection_path(namespace if resource.namespaced else None)
    listing = await _retrying(partial(kube.list, path, label_selector=MANAGED_SELECTOR,
                                      accept=PARTIAL_METADATA_LIST))
    found: list[Candidate] = []
    kept: list[Kept] = []
    for item in listing.get("items") or []:
        item.update(apiVersion=resource.api_version, kind=resource.kind)
        ref = ObjectRef.of(item)
        if item["metadata"].get("deletionTimestamp"):
            kept.append(Kept(ref, "already being deleted"))
        elif owned_by_us(item):
            found.append(Candidate(resource, ref, item["metadata"]["uid"]))
        else:
            kept.append(Kept(ref, f"labelled {MANAGED_SELECTOR}, but the operator never "
                             "applied it (someone copied the label)"))
    return found, kept


async def _issued_secrets(kube: Kube, discovery: Discovery,
                          ours: Iterable[Candidate]) -> list[Candidate]:
    """The Secrets cert-manager issued for our Certificates among `ours`
    (`ownership.issued_for`): each Certificate read whole for its secretName, the Secret's
    metadata only."""
    issued: list[Candidate] = []
    for certificate in [c for c in ours if c.ref.kind == "Certificate"]:
        whole = await _retrying(partial(kube.get, certificate.path()))
        name = ((whole or {}).get("spec") or {}).get("secretName")
        if whole is None or not name:
            continue
        secrets = await discovery.require("v1", "Secret")
        path = secrets.object_path(name, certificate.ref.namespace)
        secret = await _retrying(partial(kube.get, path, accept=PARTIAL_METADATA))
        if secret is None or secret["metadata"].get("deletionTimestamp") \
                or not issued_for(secret, whole):
            continue
        ref = ObjectRef("v1", "Secret", certificate.ref.namespace, name)
        issued.append(Candidate(secrets, ref, secret["metadata"]["uid"]))
    return issued


async def foreign_content(kube: Kube, discovery: Discovery, namespace: str,
                          ours: Iterable[Candidate]) -> list[ObjectRef]:
    """Objects in `namespace` that are not the operator's and would die with it."""
    ours = list(ours)
    expected = _issued_for_us(ours)
    rendered = frozenset(kind for _, kind in renderable_kinds())
    foreign: list[ObjectRef] = []
    for api_version, kind in [*FOREIGN_CONTENT_KINDS, *await _user_kinds(kube)]:
        resource = await discovery.resolve(api_version, kind)
        if resource is None or not resource.namespaced:
            continue
        path = resource.collection_path(namespace)
        listing = await _retrying(partial(kube.list, path, accept=PARTIAL_METADATA_LIST))
        for item in listing.get("items") or []:
            metadata = item["metadata"]
            ref = ObjectRef(api_version, kind, namespace, metadata["name"])
            if not _ours(ref, item, rendered) and not _created_for_us(ref, metadata, expected):
                foreign.append(ref)
    return foreign


def _ours(ref: ObjectRef, item: JsonObject, rendered: frozenset[str]) -> bool:
    """Of a kind the operator applies: labelled and applied by it (a copied label does not
    count). Of another kind (the Pods of our Deployments): labelled."""
    labels = item["metadata"].get("labels") or {}
    if labels.get(MANAGED_BY_LABEL) != OPERATOR_NAME:
        return False
    return ref.kind not in rendered or owned_by_us(item)


def _issued_for_us(ours: list[Candidate]) -> set[tuple[str, str, str]]:
    """(kind, namespace, name) of our ServiceAccounts and Certificates: OpenShift gives each
    ServiceAccount pull and token Secrets, and cert-manager writes each Certificate's key pair
    into a Secret; those Secrets serve our objects only."""
    return {(c.ref.kind, c.ref.namespace, c.ref.name) for c in ours
            if c.ref.kind in ("ServiceAccount", "Certificate")}


def _created_for_us(ref: ObjectRef, metadata: JsonObject,
                    issuers: set[tuple[str, str, str]]) -> bool:
    if ref.kind == "ConfigMap" and ref.name in AUTOMATIC_CONFIGMAPS:
        return True
    if ref.kind != "Secret":
        return False
    annotations = metadata.get("annotations") or {}
    account = annotations.get(SERVICE_ACCOUNT_ANNOTATION)
    certificate = annotations.get(CERTIFICATE_ANNOTATION)
    return (("ServiceAccount", ref.namespace, account) in issuers
            or ("Certificate", ref.namespace, certificate) in issuers)


async def _user_kinds(kube: Kube) -> list[tuple[str, str]]:
    """Every namespaced kind of the external-secrets API groups this server serves."""
    kinds: list[tuple[str, str]] = []
    for group in USER_API_GROUPS:
        document = await _retrying(partial(kube.get, f"/apis/{group}"))
        preferred = ((document or {}).get("preferredVersion") or {}).get("groupVersion")
        if not preferred:
            continue
        served = await _retrying(partial(kube.get, f"/apis/{preferred}")) or {}
        kinds.extend((preferred, entry["kind"]) for entry in served.get("resources") or []
                     if "/" not in entry["name"] and entry.get("namespaced"))
    return kinds


async def execute_uninstall(kube: Kube, plan: UninstallPlan, *, force: bool = False,
                            ) -> UninstallReport:
    """Delete what `plan` lists: objects first, Namespaces last (only those with no error
    inside). Refuses while the ExternalSecretsConfig exists, unless `force`."""
    if plan.esc_manages and not force and not plan.empty:
        raise UninstallRefusedError(
            f"{ESC_KIND}/{SINGLETON_NAME} still exists and is Managed, so the operator would "
            f"re-create every object deleted now. Delete it first (kubectl delete "
            f"{ESC_PLURAL} {SINGLETON_NAME}; that leaves the operand in place), or set its "
            "spec.managementState to Removed (the operator then removes the operand itself), "
            "or pass --force to delete anyway")
    report = UninstallReport()
    failed_namespaces: set[str] = set()
    for candidate in plan.objects:
        if not await _delete(kube, candidate, report):
            failed_namespaces.add(candidate.ref.namespace)
    for candidate in plan.namespaces:
        if candidate.ref.name in failed_namespaces:
            report.skipped.append(Kept(candidate.ref, "an object in it could not be deleted"))
            continue
        await _delete(kube, candidate, report)
    return report


async def _delete(kube: Kube, candidate: Candidate, report: UninstallReport) -> bool:
    try:
        await kube.delete(candidate.path(), uid=candidate.uid)
    except ApiError as error:
        if error.conflict:  # the uid precondition failed: re-created since it was listed
            report.skipped.append(Kept(candidate.ref, "re-created since it was listed"))
            return True
        report.errors.append(f"delete {candidate.ref}: {error.status} {error.reason}: "
                             f"{error.message}")
        return False
    report.deleted.append(candidate.ref)
    return True
