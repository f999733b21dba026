"""Every name the operator shares with the cluster: its API, singletons, labels and field
manager, its own objects, and the operand objects it reads or names by name."""

from typing import Final

GROUP: Final = "operator.openshift.io"
VERSION: Final = "v1alpha1"
API_VERSION: Final = f"{GROUP}/{VERSION}"

ESC_KIND: Final = "ExternalSecretsConfig"
ESC_PLURAL: Final = "externalsecretsconfigs"
ESM_KIND: Final = "ExternalSecretsManager"
ESM_PLURAL: Final = "externalsecretsmanagers"
SINGLETON_NAME: Final = "cluster"

OPERATOR_NAME: Final = "external-secrets-operator"
FIELD_MANAGER: Final = OPERATOR_NAME
DEFAULT_OPERAND_NAMESPACE: Final = "external-secrets"
OPERATOR_NAMESPACE: Final = "external-secrets-operator"

OPERATOR_DEPLOYMENT: Final = f"{OPERATOR_NAME}-controller-manager"  # and its ServiceAccount
OPERATOR_CONTAINER: Final = "manager"

ESC_PATH: Final = f"/apis/{API_VERSION}/{ESC_PLURAL}/{SINGLETON_NAME}"
ESM_PATH: Final = f"/apis/{API_VERSION}/{ESM_PLURAL}/{SINGLETON_NAME}"

MANAGED_BY_LABEL: Final = "app.kubernetes.io/managed-by"

# The leader election Lease, in the operator's namespace.
LEASE_NAME: Final = "external-secrets-operator-leader"

# The operand's objects that the operator reads, or that it names in status, alerts and
# annotations (the templates under manifests/operand/ render them; the golden files hold both
# to the same names). A workload's Deployment, its pods' app.kubernetes.io/name and its
# PodDisruptionBudget share one name.
CONTROLLER_DEPLOYMENT: Final = "external-secrets"
WEBHOOK_DEPLOYMENT: Final = "external-secrets-webhook"
CERT_CONTROLLER_DEPLOYMENT: Final = "external-secrets-cert-controller"
BITWARDEN_DEPLOYMENT: Final = "bitwarden-sdk-server"
DEPLOYMENT_NAMES: Final = {"controller": CONTROLLER_DEPLOYMENT, "webhook": WEBHOOK_DEPLOYMENT,
                           "cert-controller": CERT_CONTROLLER_DEPLOYMENT,
                           "bitwarden": BITWARDEN_DEPLOYMENT}
# The (Cluster)Role and binding that let the controller write ConfigMaps while the
# UnsafeAllowGenericTargets feature is on (named in the ESM status).
GENERIC_TARGETS_ROLE: Final = "external-secrets-controller-generic-targets"
# cert-manager's Certificate for the webhook, whose CA the injector annotation names.
WEBHOOK_CERTIFICATE: Final = "external-secrets-webhook"
# The Secrets holding the webhook's serving certificate (names, not secrets): the
# cert-controller's, and the one cert-manager issues.
WEBHOOK_SECRET: Final = "external-secrets-webhook"  # noqa: S105
WEBHOOK_SECRET_CERT_MANAGER: Final = "external-secrets-webhook-cm"  # noqa: S105

# OpenShift's console (Observe > Dashboards) shows the Grafana dashboard of every ConfigMap
# labelled console.openshift.io/dashboard=true in openshift-config-managed: the namespace and
# the label are the console's convention, the ConfigMap of that name is the operator's
# (OperandMonitoring on, manager/render/dashboard.py).
CONSOLE_DASHBOARDS_NAMESPACE: Final = "openshift-config-managed"
CONSOLE_DASHBOARD_LABEL: Final = "console.openshift.io/dashboard"
DASHBOARD_CONFIGMAP: Final = "external-secrets-operator-dashboard"

# The operand's CRDs: found by their label, told apart from other CRDs of that label by group.
OPERAND_CRD_LABEL: Final = "external-secrets.io/component=controller"
OPERAND_CRD_GROUPS: Final = frozenset({"external-secrets.io", "generators.external-secrets.io"})
# The operand CRDs the bundle ships (bundle/manifests, from the pinned external-secrets
# release): status.relatedObjects names each, since `oc adm inspect` has no "every CRD of a
# group". tests/integration/test_controller_install.py holds it to the CRDs of that release.
OPERAND_CRD_NAMES: Final = tuple(f"{plural}.{group}" for group, plurals in (
    ("external-secrets.io", ("clusterexternalsecrets", "clusterpushsecrets",
                             "clustersecretstores", "externalsecrets", "pushsecrets",
                             "secretstores")),
    ("generators.external-secrets.io", (
        "acraccesstokens", "beyondtrustworkloadcredentialsdynamicsecrets",
        "cloudsmithaccesstokens", "clustergenerators", "ecrauthorizationtokens",
        "gcraccesstokens", "generatorstates", "githubaccesstokens", "gitlabdeploytokens",
        "grafanas", "mfas", "passwords", "quayaccesstokens", "sshkeys", "stssessiontokens",
        "uuids", "vaultdynamicsecrets", "webhooks")),
) for plural in plurals)
CRD_API_VERSION: Final = "apiextensions.k8s.io/v1"
CRD_KIND: Final = "CustomResourceDefinition"
CRD_COLLECTION: Final = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"


def is_operand_crd(name: str) -> bool:
    return name.partition(".")[2] in OPERAND_CRD_GROUPS
