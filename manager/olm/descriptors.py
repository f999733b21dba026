"""What the CSV says about each owned CRD: display name, description, descriptors.

Spec and status descriptors tell the OpenShift console how to show a field (a Secret
picker, a resource-requirements editor, a conditions table). Paths are relative to
`.spec` or `.status`; tests check that every path exists in the CRD's schema.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_UI = "urn:alm:descriptor:com.tectonic.ui"
TEXT = f"{_UI}:text"
NUMBER = f"{_UI}:number"
ADVANCED = f"{_UI}:advanced"
RESOURCES = f"{_UI}:resourceRequirements"
NODE_SELECTOR = f"{_UI}:nodeSelector"
CONDITIONS = "urn:alm:descriptor:io.kubernetes.conditions"
SECRET = "urn:alm:descriptor:io.kubernetes:Secret"  # noqa: S105 (a UI hint)
NAMESPACE = "urn:alm:descriptor:io.kubernetes:Namespace"
TRUE_FALSE = (f"{_UI}:select:true", f"{_UI}:select:false")


def _group(name: str) -> str:
    return f"{_UI}:fieldGroup:{name}"


@dataclass(frozen=True)
class Descriptor:
    path: str
    display_name: str
    description: str
    x_descriptors: tuple[str, ...] = ()

    def to_csv(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"path": self.path, "displayName": self.display_name,
                                 "description": self.description}
        if self.x_descriptors:
            entry["x-descriptors"] = list(self.x_descriptors)
        return entry


@dataclass(frozen=True)
class OwnedKind:
    display_name: str
    description: str
    spec: tuple[Descriptor, ...] = ()
    status: tuple[Descriptor, ...] = ()
    # Kinds the operator creates for one object of this kind (the console's Resources tab).
    resources: tuple[tuple[str, str], ...] = field(default=())


def _common_configs(prefix: str, group: str) -> tuple[Descriptor, ...]:
    """Descriptors of CommonConfigs, inlined in appConfig (ESC) and globalConfig (ESM)."""
    return (
        Descriptor(f"{prefix}.logLevel", "Log level",
                   "Verbosity of the operand logs, from 1 (least) to 5.", (NUMBER, _group(group))),
        Descriptor(f"{prefix}.resources", "Resources",
                   "CPU and memory requests and limits of the operand containers.",
                   (RESOURCES, _group(group))),
        Descriptor(f"{prefix}.nodeSelector", "Node selector",
                   "Node labels the operand pods must be scheduled on.",
                   (NODE_SELECTOR, _group(group))),
        Descriptor(f"{prefix}.affinity", "Affinity", "Scheduling affinity of the operand pods.",
                   (ADVANCED, _group(group))),
        Descriptor(f"{prefix}.tolerations", "Tolerations", "Taints the operand pods tolerate.",
                   (ADVANCED, _group(group))),
        Descriptor(f"{prefix}.proxy.httpProxy", "HTTP proxy",
                   "Proxy URL for HTTP requests of the operand.", (TEXT, _group("proxy"))),
        Descriptor(f"{prefix}.proxy.httpsProxy", "HTTPS proxy",
                   "Proxy URL for HTTPS requests of the operand.", (TEXT, _group("proxy"))),
        Descriptor(f"{prefix}.proxy.noProxy", "No proxy",
                   "Comma-separated hosts, domains and CIDRs reached without the proxy.",
                   (TEXT, _group("proxy"))),
    )


_OPERAND_RESOURCES = (
    ("Deployment", "v1"), ("Service", "v1"), ("ServiceAccount", "v1"), ("Secret", "v1"),
    ("ClusterRole", "v1"), ("ClusterRoleBinding", "v1"), ("Role", "v1"), ("RoleBinding", "v1"),
    ("NetworkPolicy", "v1"), ("ValidatingWebhookConfiguration", "v1"), ("Certificate", "v1"),
)

EXTERNAL_SECRETS_CONFIG = OwnedKind(
    display_name="ExternalSecretsConfig",
    description="Installs and configures the external-secrets stack: controller, webhook, "
    "cert-controller or cert-manager certificates, and the optional bitwarden-sdk-server. "
    "A singleton named `cluster`.",
    spec=(
        Descriptor("controllerConfig.namespace", "Operand namespace",
                   "Namespace the external-secrets stack is installed in; set only at creation.",
                   (NAMESPACE,)),
        Descriptor("controllerConfig.labels", "Labels",
                   "Labels added to every object created for the operand.", (ADVANCED,)),
        *_common_configs("appConfig", "appConfig"),
        Descriptor("appConfig.operatingNamespace", "Operating namespace",
                   "Restricts external-secrets to this namespace; cluster-scoped stores and "
                   "ClusterExternalSecrets are then disabled.", (NAMESPACE, _group("appConfig"))),
        Descriptor("appConfig.webhookConfig.certificateCheckInterval",
                   "Certificate check interval",
                   "How often the webhook checks its certificate.", (TEXT, _group("webhook"))),
        Descriptor("appConfig.certManagerConfig.enabled", "Use cert-manager",
                   "Obtain the webhook certificate from cert-manager; set only at creation.",
                   (*TRUE_FALSE, _group("certManager"))),
        Descriptor("appConfig.certManagerConfig.addInjectorAnnotations", "Inject CA",
                   "Let cert-manager's CA injector set the webhook and CRD CA bundles.",
                   (*TRUE_FALSE, _group("certManager"))),
        Descriptor("appConfig.certManagerConfig.issuerRef.name", "Issuer name",
                   "The cert-manager Issuer or ClusterIssuer that signs the certificates.",
                   (TEXT, _group("certManager"))),
        Descriptor("appConfig.certManagerConfig.issuerRef.kind", "Issuer kind",
                   "Issuer or ClusterIssuer.", (TEXT, _group("certManager"))),
        Descriptor("appConfig.certManagerConfig.certificateDuration", "Certificate duration",
                   "Validity of the webhook certificate.", (TEXT, _group("certManager"))),
        Descriptor("appConfig.certManagerConfig.certificateRenewBefore", "Renew before",
                   "How long before expiry the certificate is renewed.",
                   (TEXT, _group("certManager"))),
        Descriptor("appConfig.bitwardenSecretManagerProvider.enabled", "Bitwarden provider",
                   "Deploy bitwarden-sdk-server for the Bitwarden Secrets Manager provider.",
                   (*TRUE_FALSE, _group("bitwarden"))),
        Descriptor("appConfig.bitwardenSecretManagerProvider.secretRef.name", "Bitwarden TLS",
                   "Secret with tls.crt, tls.key and ca.crt for bitwarden-sdk-server.",
                   (SECRET, _group("bitwarden"))),
    ),
    status=(
        Descriptor("conditions", "Conditions", "Ready, Degraded and Progressing.", (CONDITIONS,)),
        Descriptor("externalSecretsImage", "external-secrets image",
                   "Image the operand runs.", (TEXT,)),
        Descriptor("bitwardenSDKServerImage", "bitwarden-sdk-server image",
                   "Image bitwarden-sdk-server runs, when enabled.", (TEXT,)),
    ),
    resources=_OPERAND_RESOURCES,
)

EXTERNAL_SECRETS_MANAGER = OwnedKind(
    display_name="ExternalSecretsManager",
    description="Global defaults for everything the operator deploys (labels, proxy, log "
    "level, scheduling, resources) and the status of the operator's controllers. A "
    "singleton named `cluster`, created by the operator.",
    spec=(
        Descriptor("globalConfig.labels", "Labels",
                   "Labels added to every object the operator creates.", (ADVANCED,)),
        *_common_configs("globalConfig", "globalConfig"),
        Descriptor("features", "Features", "Optional operator features to enable.", (ADVANCED,)),
    ),
    status=(
        Descriptor("controllerStatuses", "Controller statuses",
                   "Conditions of each of the operator's controllers."),
        Descriptor("lastTransitionTime", "Last transition",
                   "When a controller status last changed.", (TEXT,)),
    ),
)

# Our own one-line summaries of the operand kinds (the console lists them).
_OPERAND_DESCRIPTIONS = {
    "ExternalSecret": "Reads data from an external secret store into a Kubernetes Secret.",
    "SecretStore": "How to reach and authenticate to an external secret provider, "
    "for use in its namespace.",
    "ClusterSecretStore": "A SecretStore that ExternalSecrets of any namespace can use.",
    "ClusterExternalSecret": "Creates an ExternalSecret in each namespace that matches a "
    "selector.",
    "PushSecret": "Writes the data of a Kubernetes Secret to external secret stores.",
    "ClusterPushSecret": "Creates a PushSecret in each namespace that matches a selector.",
    "ACRAccessToken": "Generates an Azure Container Registry access token.",
    "BeyondtrustWorkloadCredentialsDynamicSecret": "Generates temporary credentials from "
    "BeyondTrust Workload Credentials at each refresh.",
    "CloudsmithAccessToken": "Generates a Cloudsmith access token.",
    "ClusterGenerator": "A generator that ExternalSecrets of any namespace can use.",
    "ECRAuthorizationToken": "Generates an Amazon ECR authorization token.",
    "GCRAccessToken": "Generates a Google Container Registry access token.",
    "GeneratorState": "Remembers a generated value so that it can be cleaned up later.",
    "GithubAccessToken": "Generates a GitHub App installation access token.",
    "GitlabDeployToken": "Generates a GitLab deploy token.",
    "Grafana": "Generates a Grafana service account token.",
    "MFA": "Generates a time-based one-time password.",
    "Password": "Generates a random password.",
    "QuayAccessToken": "Generates a Quay robot account token.",
    "SSHKey": "Generates an SSH key pair.",
    "STSSessionToken": "Generates temporary AWS STS session credentials.",
    "UUID": "Generates a random UUID.",
    "VaultDynamicSecret": "Reads a dynamic secret from HashiCorp Vault.",
    "Webhook": "Generates a value by calling an HTTP endpoint.",
}

_READY = Descriptor("conditions", "Conditions", "Whether the object is ready, and why not.",
                    (CONDITIONS,))
_REFRESH = Descriptor("refreshInterval", "Refresh interval", "How often the data is synced.",
                      (TEXT,))
_OPERAND_SPEC = {
    "ExternalSecret": (
        _REFRESH,
        Descriptor("secretStoreRef.name", "Secret store", "The store to read from.", (TEXT,)),
        Descriptor("target.name", "Target Secret", "The Secret to write.", (SECRET,)),
    ),
    "PushSecret": (
        _REFRESH,
        Descriptor("selector.secret.name", "Source Secret", "The Secret to push.", (SECRET,)),
    ),
    "SecretStore": (Descriptor("provider", "Provider", "The provider and its settings.",
                               (ADVANCED,)),),
    "ClusterSecretStore": (Descriptor("provider", "Provider", "The provider and its settings.",
                                      (ADVANCED,)),),
}
_OPERAND_STATUS = dict.fromkeys(
    ("ExternalSecret", "SecretStore", "ClusterSecretStore", "ClusterExternalSecret",
     "PushSecret", "ClusterPushSecret"), (_READY,))


def operand_kind(kind: str, schema_description: str, group: str) -> OwnedKind:
    """What the CSV says about an operand kind; unknown kinds fall back to their schema."""
    description = _OPERAND_DESCRIPTIONS.get(kind) or _first_sentence(schema_description) \
        or f"{kind} of {group}."
    return OwnedKind(display_name=display_name(kind), description=description,
                     spec=_OPERAND_SPEC.get(kind, ()), status=_OPERAND_STATUS.get(kind, ()))


def display_name(kind: str) -> str:
    """`ACRAccessToken` -> `ACR Access Token`."""
    return " ".join(re.findall(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|\d+", kind))


def _first_sentence(text: str) -> str:
    sentence = " ".join(text.split()).split(". ")[0].strip()
    return sentence if sentence.endswith(".") or not sentence else sentence + "."
