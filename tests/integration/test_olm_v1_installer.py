"""OLM v1's contract for the installer ServiceAccount (issue 37 item 1; docs/olm.md "OLM v1").

OLM v1 (a ClusterExtension) applies every object of the rendered bundle as the ServiceAccount
that `ClusterExtension.spec.serviceAccount` names, and nothing more. OLM v1 itself does not
run here, so this test does what it would do, on the simulated cluster's RBAC-enforcing API
server: a ServiceAccount bound only to manifests/olm-v1/installer-rbac.yaml, authenticated by
a token from the TokenRequest API, sends for every object of the bundle as OLM v1 renders it
(manager/olm/registry_v1.py: the operand's and the operator's CRDs, the ClusterRoles and
ClusterRoleBindings it makes of the CSV's permissions, the ServiceAccount and the Deployment
of its install strategy, and the bundle's other manifests) each request an installer makes:
create, server-side apply, get, update, list, watch and delete (for real where this test
created the object, with dryRun for what the cluster already had: the CRDs the other tests
use). Every request must succeed. Then one rule at a time is taken out of that RBAC (a
permission the operator is granted, so that escalation prevention refuses its ClusterRole;
creating CRDs; updating the metrics Service) and the same requests must meet a 403 on the
object that rule is for.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import yaml

from manager.client.kube import APPLY_PATCH, ApiError, Kube
from manager.names import OPERAND_CRD_NAMES
from manager.olm import bundle, crds, identity, installer_rbac, registry_v1, yamlfile
from manager.paths import REPO_ROOT
from manager.runtime.operator import CRDS_DIR, load_crds
from tests.conftest import Cluster
from tests.waiting import eventually

NAMESPACE = identity.NAMESPACE
INSTALLER = installer_rbac.INSTALLER
FIELD_MANAGER = "olm-v1-installer"  # how OLM v1's applier would appear in managedFields
RBAC = "/apis/rbac.authorization.k8s.io/v1"
ACCESS_REVIEW = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"

Object = dict[str, Any]


@dataclass(frozen=True)
class Failure:
    verb: str
    obj: str  # "Kind name"
    status: int
    message: str

    def __str__(self) -> str:
        return f"{self.verb} {self.obj}: {self.status} {self.message[:200]}"


@dataclass
class Run:
    """The outcome of sending the installer's requests for every object."""

    failures: list[Failure] = field(default_factory=list)
    created: list[Object] = field(default_factory=list)  # what this run created
    requests: int = 0


def _object_path(obj: Object) -> tuple[str, str]:
    """(collection, object) paths of `obj`."""
    kind = registry_v1.kind_of(obj)
    version = obj["apiVersion"]
    base = f"/apis/{version}" if "/" in version else f"/api/{version}"
    namespace = obj["metadata"].get("namespace")
    where = f"/namespaces/{namespace}" if kind.namespaced else ""
    collection = f"{base}{where}/{kind.resource}"
    return collection, f"{collection}/{obj['metadata']['name']}"


def _label(obj: Object) -> str:
    return f"{obj['kind']} {obj['metadata']['name']}"


async def install(installer: Kube, objects: list[Object]) -> Run:
    """Every request an installer sends for `objects`, as `installer`; what failed."""
    run = Run()

    async def send(verb: str, obj: Object, call: Callable[[], Any]) -> Any:
        run.requests += 1
        try:
            return await call()
        except ApiError as error:
            if verb == "create" and error.status == 409:  # there already: authorized
                return None
            run.failures.append(Failure(verb, _label(obj), error.status, error.message))
            return None

    for obj in objects:  # in order: roles before their bindings
        collection, path = _object_path(obj)
        created = await send("create", obj, lambda c=collection, o=obj: installer.create(
            c, o, field_manager=FIELD_MANAGER))
        if created is not None:
            run.created.append(obj)
        await send("apply", obj, lambda p=path, o=obj: installer.request(
            "PATCH", p, query={"fieldManager": FIELD_MANAGER, "force": "true"}, body=o,
            content_type=APPLY_PATCH))
        if await send("get", obj, lambda p=path: installer.request("GET", p)) is not None:
            await send("update", obj, lambda p=path: update(installer, p))
    collections = {_object_path(obj)[0]: obj for obj in objects}
    for collection, obj in collections.items():
        await send("list", obj, lambda c=collection: installer.request(
            "GET", c, query={"limit": "1"}))
    await asyncio.gather(*(send("watch", obj, lambda c=collection: installer.text(
        c, query={"watch": "1", "timeoutSeconds": "1"}, timeout=10))
        for collection, obj in collections.items()))
    for obj in reversed(objects):  # what this run made goes; the rest only as a dry run
        path = _object_path(obj)[1]
        options: Object = {"apiVersion": "v1", "kind": "DeleteOptions",
                           "propagationPolicy": "Background"}
        if not removable(obj, run):  # in the body: with one, the server ignores the query
            options["dryRun"] = ["All"]
        await send("delete", obj, lambda p=path, o=options: installer.request(
            "DELETE", p, body=o))
    return run


def removable(obj: Object, run: Run) -> bool:
    """Whether the test deletes `obj` for real: what `run` created, but CRDs, which stay as
    other tests install them (and whose deletion takes a while)."""
    return obj in run.created and obj["kind"] != "CustomResourceDefinition"


async def gone(kube: Kube, run: Run) -> None:
    """Until what `run` created is deleted (as the admin: the run may have lacked a rule)."""
    for obj in reversed(run.created):
        if not removable(obj, run):
            continue
        path = _object_path(obj)[1]
        try:
            await kube.delete(path)
        except ApiError as error:
            if error.status != 404:
                raise

        async def absent(p: str = path) -> None:
            assert await kube.get(p) is None, f"{p} is still there"

        await eventually(absent, timeout=30, interval=0.1)


async def update(installer: Kube, path: str) -> Any:
    """PUT the object as read; again after a conflict (a controller wrote its status)."""
    for attempt in range(5):
        live = await installer.request("GET", path)
        try:
            return await installer.request("PUT", path, query={"fieldManager": FIELD_MANAGER},
                                           body=live)
        except ApiError as error:
            if error.status != 409 or attempt == 4:
                raise
    return None


# --- fixtures --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def generated() -> bundle.GeneratedFiles:
    return bundle.generate(bundle.BundleSources(REPO_ROOT,
                                                crds.fetch_operand_crds(REPO_ROOT)))


@pytest.fixture(scope="module")
def rendered(generated: bundle.GeneratedFiles) -> registry_v1.Rendered:
    documents = [yamlfile.load(text) for path, text in generated.all().items()
                 if path.parent == bundle.BUNDLE_MANIFESTS]
    return registry_v1.render(documents, NAMESPACE)


def shipped_rbac() -> list[Object]:
    """The installer RBAC as the repository ships it (not recomputed)."""
    return yamlfile.load_all((REPO_ROOT / bundle.INSTALLER_RBAC_FILE).read_text())


async def apply_admin(kube: Kube, obj: Object) -> None:
    await kube.apply(_object_path(obj)[1], obj, field_manager="integration-tests")


@pytest_asyncio.fixture(loop_scope="session")
async def installer(kube: Kube, cluster: Cluster, tmp_path: Path) -> AsyncIterator[Kube]:
    """A client authenticated as the installer ServiceAccount, which holds only the shipped
    RBAC (removed afterwards)."""
    await kube.apply(f"/api/v1/namespaces/{NAMESPACE}", {
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}},
        field_manager="integration-tests")
    documents = shipped_rbac()
    for obj in documents:
        await apply_admin(kube, obj)
    token = await kube.request(
        "POST", f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{INSTALLER}/token",
        body={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
              "spec": {"expirationSeconds": 3600}})
    admin = yaml.safe_load(cluster.kubeconfig.read_text())
    config = {
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "local", "cluster": admin["clusters"][0]["cluster"]}],
        "users": [{"name": INSTALLER, "user": {"token": token["status"]["token"]}}],
        "contexts": [{"name": "installer", "context": {"cluster": "local", "user": INSTALLER}}],
        "current-context": "installer",
    }
    path = tmp_path / "installer.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    path.chmod(0o600)
    client = Kube.connect(path)
    yield client
    await client.close()
    for obj in reversed(documents):
        await kube.delete(_object_path(obj)[1])


async def allowed(installer: Kube, attributes: dict[str, str]) -> bool:
    review = await installer.request("POST", ACCESS_REVIEW, body={
        "apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes}})
    return bool(review["status"].get("allowed"))


async def until_allowed(installer: Kube, attributes: dict[str, str], expected: bool) -> None:
    """RBAC changes reach the authorizer through its informers: wait until they have."""
    async def check() -> None:
        assert await allowed(installer, attributes) == expected, attributes

    await eventually(check, timeout=15, interval=0.1)


# --- the tests -------------------------------------------------------------------------------


def test_the_shipped_rbac_is_the_generated_one(generated: bundle.GeneratedFiles) -> None:
    """What the repository ships is what the bundle needs now (a change of rbac.yaml or of
    the bundle regenerates it: `python -m manager bundle`)."""
    assert generated.committed[bundle.INSTALLER_RBAC_FILE] == (
        REPO_ROOT / bundle.INSTALLER_RBAC_FILE).read_text()
    for obj in shipped_rbac():
        for rule in obj.get("rules") or []:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), rule
            assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule


async def test_every_bundle_object_installs_as_the_installer_service_account(
        kube: Kube, installer: Kube, rendered: registry_v1.Rendered,
        capsys: pytest.CaptureFixture[str]) -> None:
    kinds = sorted({o["kind"] for o in rendered.objects})
    run = await install(installer, rendered.objects)
    await gone(kube, run)
    with capsys.disabled():
        print(f"\n[olm v1] {len(rendered.objects)} objects ({', '.join(kinds)}): "
              f"{run.requests} requests as {INSTALLER}, {len(run.failures)} refused; "
              f"{len(run.created)} created, and all but CRDs deleted again")
    assert [str(f) for f in run.failures] == []
    crd_names = {o["metadata"]["name"] for o in rendered.objects
                 if o["kind"] == "CustomResourceDefinition"}
    operator_crds = {crd["metadata"]["name"] for crd in load_crds(CRDS_DIR)}  # ESC, ESM
    assert crd_names == {*OPERAND_CRD_NAMES, *operator_crds}
    assert {"ClusterRole", "ClusterRoleBinding", "ServiceAccount", "Deployment", "Service",
            "ConfigMap", "Secret", "NetworkPolicy"} <= set(kinds)
    # The operator's own permissions are among them: the CSV's, as ClusterRoles OLM v1 names.
    assert len(rendered.generated) == 4  # clusterPermissions and promoted permissions


@dataclass(frozen=True)
class Removal:
    what: str
    role: str  # ClusterRole or Role
    matches: Callable[[Object], bool]
    attributes: dict[str, str]  # what the installer may no longer do
    refused: Callable[[Failure], bool]  # a failure that rule explains


REMOVALS = (
    Removal("a permission the operator is granted (tokenreviews create)", "ClusterRole",
            lambda rule: "tokenreviews" in rule.get("resources", []),
            {"group": "authentication.k8s.io", "resource": "tokenreviews", "verb": "create"},
            lambda f: f.obj.startswith("ClusterRole ") and f.verb == "create"
            and "not currently held" in f.message),
    Removal("creating CRDs", "ClusterRole",
            lambda rule: rule.get("resources") == ["customresourcedefinitions"]
            and "create" in rule["verbs"],
            {"group": "apiextensions.k8s.io", "resource": "customresourcedefinitions",
             "verb": "create"},
            lambda f: f.obj.startswith("CustomResourceDefinition ") and f.verb == "create"),
    Removal("updating the metrics Service", "Role",
            lambda rule: rule.get("resources") == ["services"] and "update" in rule["verbs"],
            {"group": "", "resource": "services", "verb": "update", "namespace": NAMESPACE,
             "name": identity.METRICS_SERVICE},
            lambda f: f.obj == f"Service {identity.METRICS_SERVICE}" and f.verb == "update"),
)


@pytest.mark.parametrize("removal", REMOVALS, ids=lambda r: r.what)
async def test_one_rule_less_and_an_apply_is_refused(
        kube: Kube, installer: Kube, rendered: registry_v1.Rendered, removal: Removal,
        capsys: pytest.CaptureFixture[str]) -> None:
    [role] = [o for o in shipped_rbac() if o["kind"] == removal.role]
    kept = [rule for rule in role["rules"] if not removal.matches(rule)]
    assert len(kept) == len(role["rules"]) - 1, f"exactly one rule is for {removal.what}"
    await until_allowed(installer, removal.attributes, True)
    await apply_admin(kube, {**copy.deepcopy(role), "rules": kept})
    try:
        await until_allowed(installer, removal.attributes, False)
        run = await install(installer, rendered.objects)
        await gone(kube, run)
    finally:
        await apply_admin(kube, role)
        await until_allowed(installer, removal.attributes, True)
    with capsys.disabled():
        print(f"\n[olm v1] without the rule for {removal.what}: {len(run.failures)} of "
              f"{run.requests} requests refused, e.g. {run.failures[:1] and run.failures[0]}")
    failures = [str(f) for f in run.failures]
    assert run.failures, f"nothing was refused without the rule for {removal.what}"
    assert any(removal.refused(f) for f in run.failures), failures
    # Each failure is a refusal, or an object missing because its creation was refused (or,
    # for a binding, its role's: OLM v1 names both alike).
    refused = {f.obj.split(" ", 1)[1] for f in run.failures if f.status == 403}
    assert all(f.status == 403 or (f.status == 404 and f.obj.split(" ", 1)[1] in refused)
               for f in run.failures), failures
