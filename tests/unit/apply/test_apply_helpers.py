"""Pure parts of manager.apply: object identity, REST paths, what pruning may delete and in
which order, error texts."""

from __future__ import annotations

import pytest

from manager.apply.discovery import Resource, group_version_path
from manager.apply.ownership import ForeignObjectsError, is_foreign, managed_by
from manager.apply.prune import (
    MANAGED_SELECTOR,
    NEVER_PRUNED_KINDS,
    owned_by_us,
)
from manager.apply.results import (
    Action,
    ObjectError,
    ObjectRef,
    ObjectResult,
    TerminatingObjectError,
)
from manager.client.kube import ApiError, JsonObject
from manager.names import FIELD_MANAGER, MANAGED_BY_LABEL, OPERATOR_NAME
from manager.render.state import APPLY_ORDER, APPLY_STAGES, apply_stage, kind_rank, renderable_kinds

# --- ObjectRef ------------------------------------------------------------------------------


def test_a_ref_is_read_from_an_object() -> None:
    namespaced = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "external-secrets", "namespace": "es"}}
    cluster_scoped = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                      "metadata": {"name": "external-secrets-controller"}}
    assert ObjectRef.of(namespaced) == ObjectRef("apps/v1", "Deployment", "es",
                                                 "external-secrets")
    assert ObjectRef.of(cluster_scoped).namespace == ""
    assert str(ObjectRef.of(namespaced)) == "Deployment es/external-secrets"
    assert str(ObjectRef.of(cluster_scoped)) == "ClusterRole external-secrets-controller"


def test_identity_ignores_the_version_but_not_the_group() -> None:
    v1 = ObjectRef("cert-manager.io/v1", "Certificate", "es", "webhook")
    v1beta1 = ObjectRef("cert-manager.io/v1beta1", "Certificate", "es", "webhook")
    other_group = ObjectRef("example.io/v1", "Certificate", "es", "webhook")
    assert v1.identity() == v1beta1.identity()
    assert v1.identity() != other_group.identity()
    assert ObjectRef("v1", "Secret", "es", "s").group == ""
    assert ObjectRef("v1", "Secret", "es", "s").identity() != \
        ObjectRef("v1", "Secret", "other", "s").identity()


def test_only_real_actions_count_as_writes() -> None:
    ref = ObjectRef("v1", "Secret", "es", "s")
    assert not ObjectResult(ref, Action.UNCHANGED).wrote
    assert all(ObjectResult(ref, action).wrote
               for action in (Action.CREATED, Action.UPDATED, Action.DELETED))


def test_error_texts_name_the_verb_the_object_and_the_server_message() -> None:
    ref = ObjectRef("apps/v1", "Deployment", "es", "external-secrets")
    error = ObjectError(ref, "apply", ApiError(422, "Invalid", "spec.replicas: must be >= 0"))
    assert str(error) == ("apply Deployment es/external-secrets: 422 Invalid: "
                          "spec.replicas: must be >= 0")
    assert not error.transient
    assert ObjectError(ref, "delete", ApiError(503, "ServiceUnavailable", "later")).transient
    assert str(TerminatingObjectError(ref)).startswith("Deployment es/external-secrets is being")


# --- Resource paths -------------------------------------------------------------------------


def test_core_and_group_paths() -> None:
    secrets = Resource("v1", "Secret", "secrets", namespaced=True)
    roles = Resource("rbac.authorization.k8s.io/v1", "ClusterRole", "clusterroles", False)
    assert secrets.object_path("tls", "es") == "/api/v1/namespaces/es/secrets/tls"
    assert secrets.collection_path("es") == "/api/v1/namespaces/es/secrets"
    assert secrets.collection_path() == "/api/v1/secrets"  # all namespaces
    assert roles.object_path("r") == "/apis/rbac.authorization.k8s.io/v1/clusterroles/r"
    # A namespace given for a cluster-scoped kind is ignored, not put in the path.
    assert roles.object_path("r", "es") == "/apis/rbac.authorization.k8s.io/v1/clusterroles/r"
    assert group_version_path("v1") == "/api/v1"
    assert group_version_path("apps/v1") == "/apis/apps/v1"


def test_a_namespaced_object_path_needs_a_namespace() -> None:
    with pytest.raises(ValueError, match="namespaced"):
        Resource("v1", "Secret", "secrets", namespaced=True).object_path("tls")


def test_names_are_escaped_in_paths() -> None:
    secrets = Resource("v1", "Secret", "secrets", namespaced=True)
    assert secrets.object_path("a/b?c", "es") == "/api/v1/namespaces/es/secrets/a%2Fb%3Fc"


# --- prune: what may be deleted, in which order ---------------------------------------------


def labelled(labels: dict[str, str], managers: list[tuple[str, str]]) -> JsonObject:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "c", "namespace": "es", "labels": labels,
                         "managedFields": [{"manager": manager, "operation": operation,
                                            "fieldsType": "FieldsV1",
                                            "fieldsV1": {"f:metadata": {}}}
                                           for manager, operation in managers]}}


OUR_LABEL = {MANAGED_BY_LABEL: OPERATOR_NAME}


def test_an_object_we_applied_with_our_label_is_ours() -> None:
    assert MANAGED_SELECTOR == "app.kubernetes.io/managed-by=external-secrets-operator"
    assert owned_by_us(labelled(OUR_LABEL, [(FIELD_MANAGER, "Apply")]))


@pytest.mark.parametrize(("labels", "managers"), [
    (OUR_LABEL, [("kubectl-client-side-apply", "Update")]),  # copied our labels
    (OUR_LABEL, [(FIELD_MANAGER, "Update")]),                # not applied by us
    (OUR_LABEL, []),
    ({MANAGED_BY_LABEL: "someone-else"}, [(FIELD_MANAGER, "Apply")]),
    ({}, [(FIELD_MANAGER, "Apply")]),
], ids=["label-copied", "our-update-only", "no-managed-fields", "other-label", "no-label"])
def test_anything_else_is_never_ours_to_delete(labels: dict[str, str],
                                               managers: list[tuple[str, str]]) -> None:
    assert not owned_by_us(labelled(labels, managers))


def test_every_kind_the_renderer_produces_has_its_place_in_the_one_order() -> None:
    for _, kind in renderable_kinds():
        assert kind_rank(kind) < len(APPLY_ORDER), kind
    assert "Namespace" in NEVER_PRUNED_KINDS


@pytest.mark.parametrize(("first", "then"), [
    ("ValidatingWebhookConfiguration", "Service"),   # no webhook points at a missing Service
    ("ValidatingWebhookConfiguration", "Deployment"),
    ("Deployment", "Secret"),
    ("Deployment", "ServiceAccount"),
    ("Deployment", "ClusterRole"),
    ("RoleBinding", "Role"),
    ("ClusterRoleBinding", "ClusterRole"),
    ("ClusterRole", "ServiceAccount"),
    ("Certificate", "Secret"),
])
def test_dependents_are_deleted_before_what_they_depend_on(first: str, then: str) -> None:
    """Deletion (pruning, uninstall) is the apply order reversed."""
    assert kind_rank(first) > kind_rank(then)


@pytest.mark.parametrize(("later", "earlier"), [
    ("ServiceAccount", "Namespace"),  # and so every namespaced kind
    ("ClusterRoleBinding", "ClusterRole"),  # the API server refuses a binding to a missing role
    ("RoleBinding", "Role"),
    ("Deployment", "ServiceAccount"),  # a pod starts with its account, permissions, mounts
    ("Deployment", "RoleBinding"),
    ("Deployment", "ClusterRoleBinding"),
    ("Deployment", "Secret"),
    ("Deployment", "ConfigMap"),
    ("Deployment", "Certificate"),
    ("Deployment", "NetworkPolicy"),  # and under its egress policies
    ("ValidatingWebhookConfiguration", "Service"),  # the API server calls a webhook that runs
    ("ValidatingWebhookConfiguration", "Deployment"),
])
def test_a_kind_is_applied_in_a_later_stage_than_what_it_refers_to(later: str,
                                                                  earlier: str) -> None:
    assert apply_stage(later) > apply_stage(earlier)


def test_the_stages_hold_every_kind_once_in_the_one_order() -> None:
    kinds = [kind for stage in APPLY_STAGES for kind in stage]
    assert tuple(kinds) == APPLY_ORDER
    assert len(set(kinds)) == len(kinds)
    assert {kind for _, kind in renderable_kinds()} <= set(kinds)
    assert apply_stage("SomethingNew") == len(APPLY_STAGES)


# --- ownership --------------------------------------------------------------------------------


def _live(labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
          managers: tuple[tuple[str, str], ...] = ()) -> JsonObject:
    return {"metadata": {"name": "x", "labels": labels or {}, "annotations": annotations or {},
                         "managedFields": [{"manager": m, "operation": op}
                                           for m, op in managers]}}


def test_an_object_is_ours_only_once_our_field_manager_applied_it() -> None:
    assert not is_foreign(None)  # absent: nothing to take over
    assert is_foreign(_live(managers=(("helm", "Update"),)))
    assert is_foreign(_live({MANAGED_BY_LABEL: OPERATOR_NAME}, managers=(("kubectl", "Apply"),)))
    assert is_foreign(_live(managers=((FIELD_MANAGER, "Update"),)))  # an update, not an apply
    assert not is_foreign(_live(managers=(("helm", "Update"), (FIELD_MANAGER, "Apply"))))


def test_who_manages_a_foreign_object_helm_then_label_then_field_managers() -> None:
    helm = _live({MANAGED_BY_LABEL: "Helm"},
                 {"meta.helm.sh/release-name": "eso", "meta.helm.sh/release-namespace": "infra"},
                 (("helm", "Update"),))
    assert managed_by(helm) == "Helm release infra/eso (field managers helm)"
    labelled = _live({MANAGED_BY_LABEL: "argocd"}, managers=(("argocd-controller", "Apply"),))
    assert managed_by(labelled) == \
        "app.kubernetes.io/managed-by=argocd (field managers argocd-controller)"
    assert managed_by(_live(managers=(("kubectl-edit", "Update"), ("kubectl", "Apply")))) == \
        "field managers kubectl, kubectl-edit"
    assert managed_by(_live()) == "an unknown owner (no field manager recorded)"


def test_the_refusal_names_each_object_its_manager_and_the_fix() -> None:
    helm = _live(annotations={"meta.helm.sh/release-name": "eso"}, managers=(("helm", "Update"),))
    role = ObjectRef("rbac.authorization.k8s.io/v1", "ClusterRole", "",
                     "external-secrets-controller")
    error = ForeignObjectsError([(role, helm)])
    text = str(error)
    assert text.startswith("ClusterRole external-secrets-controller exists and is managed by "
                           "Helm release eso")
    assert "helm uninstall" in text
    assert 'spec.controllerConfig.adoptExistingObjects: "true"' in text
    assert error.reason == "ObjectNotOwned"
