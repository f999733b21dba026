"""Cluster facts a pass checks before it changes anything beyond the namespace.

A spec can be valid and still not work in this cluster: cert-manager requested but not
installed, an issuerRef naming an Issuer that does not exist, a bitwarden secretRef naming a
missing Secret or one without the keys bitwarden-sdk-server mounts. Each becomes a
`MissingDependencyError` (Degraded, with the field and the fix) that holds back only the
objects that depend on what is missing (`holds`): every other object is still applied and
repaired, and nothing is deleted until every dependency is there. Issuers and CRDs are read
as metadata only; the bitwarden TLS Secret must be read whole to see its key names, which
are kept and its values dropped at once (never logged).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from functools import partial

from manager.apply import ObjectRef
from manager.apply.discovery import Discovery
from manager.client.kube import CRD_COLLECTION, PARTIAL_METADATA, ApiError, Kube
from manager.client.watch_spec import WatchSpec
from manager.config import ESC_APP, EffectiveConfig, TrustedCA
from manager.errors import PassError
from manager.names import (
    CONSOLE_DASHBOARDS_NAMESPACE,
    CRD_API_VERSION,
    CRD_KIND,
    DEPLOYMENT_NAMES,
    OPERAND_CRD_LABEL,
    WEBHOOK_SECRET_CERT_MANAGER,
)
from manager.render.context import CALLING_OUT

CERT_MANAGER_API = "cert-manager.io/v1"
CERT_MANAGER_CRDS = {
    "Certificate": "certificates.cert-manager.io",
    "Issuer": "issuers.cert-manager.io",
    "ClusterIssuer": "clusterissuers.cert-manager.io",
}
# The operand's own APIs, which its controller and webhook need at start-up (OLM installs them
# from the bundle). Two stand for the whole set: they are installed together.
OPERAND_API = "external-secrets.io/v1"
OPERAND_CRDS = {
    "ExternalSecret": "externalsecrets.external-secrets.io",
    "SecretStore": "secretstores.external-secrets.io",
}
# The keys bitwarden-sdk-server's Deployment mounts from its TLS Secret (bitwarden template).
BITWARDEN_TLS_KEYS = ("tls.crt", "tls.key", "ca.crt")
MONITORING_CRDS = ("servicemonitors.monitoring.coreos.com", "prometheusrules.monitoring.coreos.com")


Holds = Callable[[ObjectRef], bool]


def _everything(_: ObjectRef) -> bool:
    return True


def deployments(*components: str) -> Holds:
    """The Deployments of these components (their pods would mount or need what is missing)."""
    names = frozenset(DEPLOYMENT_NAMES[component] for component in components)
    return lambda ref: ref.kind == "Deployment" and ref.name in names


class MissingDependencyError(PassError):
    """The spec cannot work in this cluster as it is; the administrator must act.

    `subject` names the object that is missing or wrong, `inspect` the command that shows
    what there is (for status.failure); `holds` says which rendered objects wait for it (by
    default, all). `held` lists those a pass held back, once it knows them."""

    def __init__(self, reason: str, field: str, message: str, *, subject: str, inspect: str,
                 holds: Holds = _everything, held: Sequence[ObjectRef] = ()):
        super().__init__(f"{field}: {message}")
        self.reason = reason
        self.field = field
        self.message = message
        self.subject = subject
        self.inspect = inspect
        self.holds = holds
        self.held = tuple(held)

    def holding(self, held: Sequence[ObjectRef]) -> MissingDependencyError:
        """The same problem, with the objects a pass held back for it."""
        return MissingDependencyError(self.reason, self.field, self.message,
                                      subject=self.subject, inspect=self.inspect,
                                      holds=self.holds, held=held)

    def __str__(self) -> str:
        text = super().__str__()
        if not self.held:
            return text
        shown = ", ".join(str(ref) for ref in self.held[:3])
        more = f" and {len(self.held) - 3} more" if len(self.held) > 3 else ""
        return f"{text}. Held back until then: {shown}{more}; everything else is applied"


def _cert_manager_dependants(config: EffectiveConfig) -> Holds:
    """What needs cert-manager or its Issuer: the Certificates; until cert-manager has issued
    the webhook's Secret, the webhook too (its Deployment mounts that Secret, its
    configurations take that CA) and bitwarden-sdk-server when cert-manager issues its
    certificate. Once the Secret exists the webhook needs only it: a lost Issuer then stops
    renewals, never the re-creation of a deleted webhook Deployment or configuration."""
    bitwarden = deployments("bitwarden") if config.bitwarden.issue_certificate else None
    if config.cert_manager.issued:
        return lambda ref: ref.kind == "Certificate" or bool(bitwarden and bitwarden(ref))
    webhook = deployments("webhook")
    return lambda ref: (ref.kind in ("Certificate", "ValidatingWebhookConfiguration")
                        or webhook(ref) or bool(bitwarden and bitwarden(ref)))


@dataclass(frozen=True)
class Preflight:
    kube: Kube
    discovery: Discovery

    async def check(self, config: EffectiveConfig) -> list[MissingDependencyError]:
        """Every dependency that is missing, in the order the pass reports them (the first
        names the condition's reason)."""
        checks: list[Callable[[], Awaitable[None]]] = [self._check_operand_crds]
        if config.cert_manager.enabled:
            checks.append(partial(self._check_cert_manager, config))
        if config.bitwarden.enabled and not config.bitwarden.issue_certificate:
            checks.append(partial(self._check_bitwarden_secret, config))
        if config.trusted_ca is not None:
            checks.append(partial(self._check_trusted_ca, config.trusted_ca, config.namespace))
        checks.append(partial(self._check_operating_namespace, config))
        problems = []
        for check in checks:
            try:
                await check()
            except MissingDependencyError as problem:
                problems.append(problem)
        return problems

    async def _check_trusted_ca(self, trusted_ca: TrustedCA, namespace: str) -> None:
        """The ConfigMap of appConfig.trustedCABundle, with its key: without it the
        controller's new pods could never start (their volume cannot be mounted)."""
        name, key = trusted_ca.config_map_name, trusted_ca.key
        field = f"{ESC_APP}.trustedCABundle"
        found = await self.kube.get(f"/api/v1/namespaces/{namespace}/configmaps/{name}")
        if found is None:
            raise MissingDependencyError(
                "TrustedCABundleNotFound", f"{field}.configMapName",
                f'ConfigMap "{name}" not found in namespace "{namespace}". Create it with the '
                f'PEM certificates under the key "{key}", or remove trustedCABundle; until then '
                "the Deployments that mount it keep running as they are",
                subject=f"ConfigMap {namespace}/{name}",
                inspect=f"kubectl get configmaps -n {namespace}", holds=deployments(*CALLING_OUT))
        if key not in (found.get("data") or {}):
            raise MissingDependencyError(
                "TrustedCABundleInvalid", f"{field}.key",
                f'ConfigMap "{name}" in namespace "{namespace}" has no key "{key}". Put the PEM '
                "certificates there, or set key to the one that holds them",
                subject=f"ConfigMap {namespace}/{name}",
                inspect=f"kubectl describe configmap -n {namespace} {name}",
                holds=deployments(*CALLING_OUT))

    async def _check_operand_crds(self) -> None:
        """The operand's controller exits at start without its own CRDs; say so plainly."""
        missing = [crd for kind, crd in OPERAND_CRDS.items()
                   if await self.discovery.resolve(OPERAND_API, kind) is None]
        if missing:
            raise MissingDependencyError(
                "OperandCRDsMissing", "CustomResourceDefinitions",
                f"the operand's CRDs {', '.join(missing)} are not installed, and external-secrets "
                "cannot start without them. They ship in the operator's bundle: reinstall the "
                "operator through OLM (or apply them); the operator continues by itself once "
                "they exist", subject=f"CustomResourceDefinition {missing[0]}",
                inspect=f"kubectl get crd -l {OPERAND_CRD_LABEL}",
                holds=deployments("controller", "webhook", "cert-controller"))

    async def _check_operating_namespace(self, config: EffectiveConfig) -> None:
        """operatingNamespace naming a namespace that does not exist: only the objects that go
        into that namespace wait."""
        namespace = config.operating_namespace
        if namespace is None or namespace == config.namespace:
            return
        path = f"/api/v1/namespaces/{namespace}"
        if await self.kube.get(path, accept=PARTIAL_METADATA) is not None:
            return
        raise MissingDependencyError(
            "OperatingNamespaceNotFound", f"{ESC_APP}.operatingNamespace",
            f'namespace "{namespace}" does not exist. Create it, or set operatingNamespace to '
            "an existing namespace; the controller's Role and RoleBinding go there. Everything "
            "else is installed, and the controller watches nothing until then",
            subject=f"Namespace {namespace}", inspect="kubectl get namespaces",
            holds=lambda ref: ref.namespace == namespace)

    async def _check_cert_manager(self, config: EffectiveConfig) -> None:
        settings = config.cert_manager
        field = f"{ESC_APP}.certManagerConfig"
        for kind in ("Certificate", settings.issuer_kind):
            if await self.discovery.resolve(CERT_MANAGER_API, kind) is None:
                crd = f"{CRD_COLLECTION}/{CERT_MANAGER_CRDS[kind]}"
                if await self.kube.get(crd, accept=PARTIAL_METADATA) is not None:
                    # Installed a moment ago: discovery follows shortly, so retry soon.
                    raise ApiError(503, "ServiceUnavailable",
                                   f"the CRD {CERT_MANAGER_CRDS[kind]} exists but its API is not "
                                   "served yet", "GET", crd)
                raise MissingDependencyError(
                    "CertManagerNotInstalled", f"{field}.enabled",
                    f'is "true", but cert-manager is not installed: the API server does not '
                    f"serve {CERT_MANAGER_CRDS[kind]} ({CERT_MANAGER_API}). Install "
                    "cert-manager; the operator continues by itself once its CRDs exist",
                    subject=f"CustomResourceDefinition {CERT_MANAGER_CRDS[kind]}",
                    inspect=f"kubectl get crd {CERT_MANAGER_CRDS[kind]}",
                    holds=_cert_manager_dependants(config))
        resource = await self.discovery.require(CERT_MANAGER_API, settings.issuer_kind)
        name = settings.issuer_name or ""
        namespace = config.namespace if resource.namespaced else None
        found = await self.kube.get(resource.object_path(name, namespace), accept=PARTIAL_METADATA)
        if found is None:
            where = f' in namespace "{namespace}"' if namespace else ""
            listing = f"{settings.issuer_kind.lower()}s" + (f" -n {namespace}" if namespace else "")
            raise MissingDependencyError(
                "IssuerNotFound", f"{field}.issuerRef",
                f'{settings.issuer_kind} "{name}" not found{where}. Create it (issuerRef is '
                + ("immutable); until then the webhook keeps serving the certificate cert-manager "
                   "issued, which is not renewed, and nothing is removed" if settings.issued else
                   "immutable); until then the built-in cert-controller keeps serving the "
                   "webhook certificate and nothing is removed"),
                subject=f"{settings.issuer_kind} {f'{namespace}/' if namespace else ''}{name}",
                inspect=f"kubectl get {listing}", holds=_cert_manager_dependants(config))

    async def _check_bitwarden_secret(self, config: EffectiveConfig) -> None:
        name = config.bitwarden.tls_secret_name or ""
        namespace = config.namespace
        field = f"{ESC_APP}.bitwardenSecretManagerProvider.secretRef.name"
        keys = await self._secret_keys(f"/api/v1/namespaces/{namespace}/secrets/{name}")
        if keys is None:
            raise MissingDependencyError(
                "BitwardenSecretNotFound", field,
                f'Secret "{name}" not found in namespace "{namespace}". Create it with the keys '
                f"tls.crt, tls.key and ca.crt, {_bitwarden_alternative(config)}",
                subject=f"Secret {namespace}/{name}", inspect=f"kubectl get secrets -n {namespace}",
                holds=deployments("bitwarden"))
        missing = [key for key in BITWARDEN_TLS_KEYS if key not in keys]
        if missing:
            raise MissingDependencyError(
                "BitwardenSecretInvalid", field,
                f'Secret "{name}" in namespace "{namespace}" has no {", ".join(missing)}: '
                "bitwarden-sdk-server mounts tls.crt (its certificate), tls.key (its private key) "
                "and ca.crt (the CA that signed it). Add the missing keys to the Secret; the "
                "operator continues by itself once they are there",
                subject=f"Secret {namespace}/{name}",
                inspect=f"kubectl describe secret -n {namespace} {name}",  # key names only
                holds=deployments("bitwarden"))

    async def _secret_keys(self, path: str) -> frozenset[str] | None:
        """The key names of a Secret (None if it does not exist). Kubernetes cannot list a
        Secret's keys without its values, so the values are dropped before returning."""
        secret = await self.kube.get(path)
        if secret is None:
            return None
        keys = frozenset(secret.get("data") or {}) | frozenset(secret.get("stringData") or {})
        secret.clear()
        return keys


def _bitwarden_alternative(config: EffectiveConfig) -> str:
    """The other way out, only one the API server accepts: removing secretRef is refused
    without cert-manager, and cert-manager cannot be switched on once certManagerConfig says
    "false" (enabled is immutable)."""
    if config.cert_manager.enabled:
        return "or remove secretRef to have cert-manager issue the certificate"
    return ('or switch bitwarden off (bitwardenSecretManagerProvider.enabled: "false") until '
            "the Secret exists")


def dependency_watches(config: EffectiveConfig) -> set[WatchSpec]:
    """Watches that end a wait for a missing dependency as soon as it appears."""
    specs = {crd_watch(CERT_MANAGER_CRDS["Certificate"])}
    specs.update(crd_watch(name) for name in OPERAND_CRDS.values())
    settings = config.cert_manager
    if settings.enabled:
        specs.add(crd_watch(CERT_MANAGER_CRDS[settings.issuer_kind]))
        namespace = config.namespace if settings.issuer_kind == "Issuer" else None
        specs.add(WatchSpec(CERT_MANAGER_API, settings.issuer_kind, namespace,
                            field_selector=f"metadata.name={settings.issuer_name}"))
    if settings.enabled:  # its ca.crt goes into the webhooks (facts.py) or is checked there
        specs.add(WatchSpec("v1", "Secret", config.namespace, any_change=True,
                            field_selector=f"metadata.name={WEBHOOK_SECRET_CERT_MANAGER}"))
    if config.monitoring.enabled:  # their arrival (or removal) changes what is rendered
        specs.update(crd_watch(name) for name in MONITORING_CRDS)
        # so does the console's dashboards namespace (facts.py, render/dashboard.py)
        specs.add(WatchSpec("v1", "Namespace",
                            field_selector=f"metadata.name={CONSOLE_DASHBOARDS_NAMESPACE}"))
    if config.operating_namespace is not None:
        specs.add(WatchSpec("v1", "Namespace",
                            field_selector=f"metadata.name={config.operating_namespace}"))
    if config.trusted_ca is not None:
        specs.add(WatchSpec("v1", "ConfigMap", config.namespace, any_change=True,
                            field_selector=f"metadata.name={config.trusted_ca.config_map_name}"))
    bitwarden = config.bitwarden
    if bitwarden.enabled:  # its arrival, and every renewal or rotation (facts.py rolls the pods)
        specs.add(WatchSpec("v1", "Secret", config.namespace, any_change=True,
                            field_selector=f"metadata.name={bitwarden.tls_secret_name}"))
    return specs


def crd_watch(name: str) -> WatchSpec:
    """One CRD, by name, any change (status included: Established). While in sync it also
    vouches to discovery that its kind is absent, if it is (apply/discovery.py), so every
    kind that may not be served is looked up only while its CRD is watched."""
    return WatchSpec(CRD_API_VERSION, CRD_KIND, field_selector=f"metadata.name={name}",
                     any_change=True)
