"""What the templates see: structured values computed from the EffectiveConfig.

Templates print these only through `| tojson`. The names (documented in
manifests/operand/README.md):

    namespace, labels, selector, policy_selector, controller_policy_selector,
    operand_pods_selector, outbound_pods_selector, log_level, operating_namespace,
    egress_policy.{name, egress} (provider-egress only),
    images.{external_secrets, bitwarden_sdk_server},
    webhook.{check_interval, lookahead_interval, certificate_secret, annotations,
             configuration_labels, ca_bundle, failure_policy, timeout_seconds, tls_args},
    cert_manager.{issuer_ref, duration, renew_before},
    bitwarden.{tls_secret_name},
    pod.{security_context, node_selector, affinity, tolerations, topology_spread_constraints,
         priority_class_name, extra_volumes},
    container.{security_context, resources, env, extra_volume_mounts},
    deployment.{replicas, revision_history_limit, leader_election},
    controller_args (the controller's tuning flags), concurrent,
    generic_targets (the controller's --unsafe-allow-generic-targets),
    controller_lease.{id, lease_duration, renew_deadline, retry_period},
    disruption_budget.{name, max_unavailable, min_available} (disruption-budget only),
    dashboard.{name, namespace, labels, data} (console-dashboard only)
"""

from __future__ import annotations

import hashlib
from typing import Any, Final

from manager.api.patterns import REQUIRED_SCC_ANNOTATION, RESTRICTED_SCC
from manager.config import (
    CertManagerSettings,
    EffectiveConfig,
    LoadedSource,
    ProxySettings,
    WorkloadSettings,
)
from manager.names import (
    DEPLOYMENT_NAMES,
    WEBHOOK_CERTIFICATE,
    WEBHOOK_SECRET,
    WEBHOOK_SECRET_CERT_MANAGER,
)
from manager.render import labels
from manager.render.alerts import monitoring_context
from manager.render.components import (
    APP_NAMES,
    BITWARDEN,
    BITWARDEN_APP,
    BITWARDEN_CERTIFICATE,
    CERT_CONTROLLER_APP,
    COMPONENT_WORKLOADS,
    CONSOLE_DASHBOARD,
    CONTROLLER,
    CONTROLLER_APP,
    DISRUPTION_BUDGET,
    PROVIDER_EGRESS,
    WEBHOOK_APP,
    WORKLOAD_COMPONENTS,
    budgeted_workloads,
)
from manager.render.dashboard import dashboard_context
from manager.render.leader_election import CONTROLLER_LEASE, CONTROLLER_LEASE_ID
from manager.tls_profile import webhook_tls_args

# logLevel (1-5) follows the Kubernetes logging guidelines the seed cites: 1 is the default
# (normal informational logs), 2 steady-state information, 3 extended information about
# changes, 4 debug, 5 trace. The operand's zap logger has two informational levels (info, and
# debug for its logr V(1) messages), so 1-3 are `info` and 4-5 `debug`. Not the reference
# operator's 1 -> warn, 2 -> error, which hides the operand's info logs by default.
OPERAND_LOG_LEVELS: Final = {1: "info", 2: "info", 3: "info", 4: "debug", 5: "debug"}

# The restricted Pod Security profile. No runAsUser: OpenShift's SCCs assign one, and the
# images run as a non-root user elsewhere.
RESTRICTED_CONTAINER_SECURITY_CONTEXT: Final = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "readOnlyRootFilesystem": True,
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}
RESTRICTED_POD_SECURITY_CONTEXT: Final = {
    "runAsNonRoot": True,
    "seccompProfile": {"type": "RuntimeDefault"},
}

WEBHOOK_CONFIGURATIONS: Final = ("externalsecret-validate", "secretstore-validate")
INJECT_CA_FROM: Final = "cert-manager.io/inject-ca-from"
COMPONENT_LABEL: Final = "external-secrets.io/component"
COMPONENT_VALUE: Final = "webhook"
"""The webhook configurations' label the cert-controller looks for before it writes its CA
into one (external-secrets' pkg/controllers/webhookconfig)."""

TRUSTED_CA_CONFIGMAP: Final = "external-secrets-trusted-ca-bundle"
TRUSTED_CA_VOLUME: Final = "trusted-ca-bundle"
TRUSTED_CA_MOUNT_PATH: Final = "/etc/pki/tls/certs"
PROXY_VARIABLES: Final = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")

# appConfig.trustedCABundle: the administrator's ConfigMap, mounted where SSL_CERT_DIR points.
# Go's crypto/x509 (the controller) loads the first system bundle file it finds and then every
# file of each SSL_CERT_DIR directory; setting the variable replaces the default directories,
# so they are listed too (the proxy's trusted CA bundle is mounted at /etc/pki/tls/certs).
USER_CA_VOLUME: Final = "trusted-ca-user"
USER_CA_MOUNT_PATH: Final = "/etc/external-secrets/trusted-ca"
USER_CA_FILE: Final = "ca-bundle.crt"
SYSTEM_CERT_DIRECTORIES: Final = ("/etc/ssl/certs", "/etc/pki/tls/certs")
USER_CA_ENV: Final = {"name": "SSL_CERT_DIR",
                      "value": ":".join((*SYSTEM_CERT_DIRECTORIES, USER_CA_MOUNT_PATH))}
# The workloads that call the secret providers, and so get the proxy (its variables and its
# trusted CA bundle) and the trusted CA bundle. The webhook and the cert-controller only ever
# call the API server, which must not go through a proxy.
CALLING_OUT: Final = frozenset({"controller", "bitwarden"})
# What each workload's process reads once, at start, from a mounted source (Go reads its
# root CAs once; bitwarden-sdk-server its key pair). Everything else mounted is reloaded by
# the process itself (the webhook's serving certificate: controller-runtime's certificate
# watcher) or not read at all. A change of these sources' content rolls exactly these pods.
LOADED_ONCE: Final[dict[str, tuple[LoadedSource, ...]]] = {
    "controller": ("trusted-ca", "proxy-ca"),
    "bitwarden": ("trusted-ca", "proxy-ca", "bitwarden-tls"),
}
LOADED_CONTENT_ANNOTATION: Final = "operator.openshift.io/loaded-content-hash"



def webhook_secret(cert_manager: CertManagerSettings) -> str:
    """The Secret whose certificate the webhook serves: cert-manager's once it is on and has
    issued it; until then, during a switch, the cert-controller's, which stays meanwhile.
    On the way back the other way round: cert-manager's until the cert-controller has made
    its own (steps/ca_overlap.py, `way_back`)."""
    if cert_manager.enabled != cert_manager.mount_previous:
        return WEBHOOK_SECRET_CERT_MANAGER
    return WEBHOOK_SECRET


def bridging(cert_manager: CertManagerSettings) -> bool:
    """The caBundle trusts the previous CAs too while the webhook pods move to a new one:
    then the operator alone writes it (steps/ca_overlap.py)."""
    return cert_manager.bundle_overlap is not None


def webhook_configuration_labels(cert_manager: CertManagerSettings) -> dict[str, str]:
    """The webhook configurations' own label, by which the cert-controller finds them and
    writes its CA into them: withheld while the operator bridges two CAs."""
    return {} if bridging(cert_manager) else {COMPONENT_LABEL: COMPONENT_VALUE}


def injector_annotations(config: EffectiveConfig) -> dict[str, str] | None:
    """cert-manager's CA injector annotation (addInjectorAnnotations): withheld while the
    webhook still serves the cert-controller's Secret and while the operator bridges two CAs,
    since the injector writes the new CA as soon as it is issued."""
    cert_manager = config.cert_manager
    if (not cert_manager.enabled or not cert_manager.add_injector_annotations
            or cert_manager.mount_previous or bridging(cert_manager)):
        return None
    return {INJECT_CA_FROM: f"{config.namespace}/{WEBHOOK_CERTIFICATE}"}


def operand_log_level(level: int) -> str:
    """The --loglevel flag value of the operand for a spec logLevel (1-5)."""
    try:
        return OPERAND_LOG_LEVELS[level]
    except KeyError:
        raise ValueError(f"logLevel must be 1 to 5, not {level}") from None


def proxy_env(proxy: ProxySettings | None) -> list[dict[str, str]]:
    """HTTP_PROXY, HTTPS_PROXY, NO_PROXY and their lowercase twins, for the values set.
    NO_PROXY is always set: the administrator's entries and what must stay in the cluster
    (ProxySettings.effective_no_proxy)."""
    if proxy is None:
        return []
    values = dict(zip(PROXY_VARIABLES,
                      (proxy.http_proxy, proxy.https_proxy, proxy.effective_no_proxy),
                      strict=True))
    upper = [{"name": name, "value": value} for name, value in values.items() if value]
    lower = [{"name": item["name"].lower(), "value": item["value"]} for item in upper]
    return upper + lower


def _component_version(config: EffectiveConfig, component: str) -> str:
    if component in (BITWARDEN, BITWARDEN_CERTIFICATE):
        return config.versions.bitwarden_sdk_server
    return config.versions.external_secrets


def merged_env(base: list[dict[str, Any]],
               overrides: tuple[dict[str, Any], ...]) -> list[dict[str, Any]]:
    """`base` with each override replacing the variable of its name, else appended."""
    names = {item["name"]: index for index, item in enumerate(base)}
    merged = list(base)
    for variable in overrides:
        if variable["name"] in names:
            merged[names[variable["name"]]] = dict(variable)
        else:
            names[variable["name"]] = len(merged)
            merged.append(dict(variable))
    return merged


def controller_args(config: EffectiveConfig) -> list[str]:
    """The controller's tuning flags, after the flags it always gets (--concurrent is one)."""
    tuning = config.controller_flags
    args = []
    if tuning.client_qps is not None:
        args.append(f"--client-qps={tuning.client_qps}")
    if tuning.client_burst is not None:
        args.append(f"--client-burst={tuning.client_burst}")
    for flag, value in (("--enable-secrets-caching", tuning.enable_secrets_caching),
                        ("--enable-configmaps-caching", tuning.enable_config_maps_caching),
                        ("--enable-managed-secrets-caching",
                         tuning.enable_managed_secrets_caching)):
        if value is not None:
            args.append(f"{flag}={str(value).lower()}")
    if tuning.store_requeue_interval is not None:
        args.append(f"--store-requeue-interval={tuning.store_requeue_interval}")
    return args


def _spread_across_nodes(selector: dict[str, str]) -> list[dict[str, Any]]:
    return [{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
             "whenUnsatisfiable": "ScheduleAnyway", "labelSelector": {"matchLabels": selector}}]


def required_scc(config: EffectiveConfig) -> dict[str, str]:
    """The SCC every operand pod asks for (OpenShift admits it with restricted-v2 even where a
    higher-priority SCC another product installs would match first); the administrator's
    own `openshift.io/required-scc` in controllerConfig.annotations replaces it."""
    if REQUIRED_SCC_ANNOTATION in config.annotations:
        return {}
    return {REQUIRED_SCC_ANNOTATION: RESTRICTED_SCC}


def loaded_content_annotations(config: EffectiveConfig, workload: str | None,
                               ) -> dict[str, str]:
    """The pod template annotation that changes with the content `workload` loads once."""
    digests = [f"{source}={config.loaded_once[source]}"
               for source in LOADED_ONCE.get(workload or "", ()) if source in config.loaded_once]
    if not digests:
        return {}
    combined = hashlib.sha256(";".join(digests).encode()).hexdigest()[:16]
    return {LOADED_CONTENT_ANNOTATION: combined}


def component_contexts(config: EffectiveConfig, component: str) -> list[dict[str, Any]]:
    """The contexts a component's templates render with: one, except for provider-egress,
    which renders its template once per egress policy, as the policy's own component, and
    disruption-budget, once per workload with a budget, as that workload's component. The
    console-dashboard's context alone carries the dashboard (built for it only)."""
    if component == CONSOLE_DASHBOARD:
        return [{**template_context(config, component),
                 "dashboard": dashboard_context(config)}]
    if component == DISRUPTION_BUDGET:
        enabled = set(WORKLOAD_COMPONENTS.values())
        contexts = []
        for workload in budgeted_workloads(config, enabled):
            budget = config.workloads[workload].disruption_budget
            assert budget is not None  # budgeted_workloads says so
            contexts.append({
                **template_context(config, WORKLOAD_COMPONENTS[workload]),
                "disruption_budget": {"name": DEPLOYMENT_NAMES[workload],
                                      "max_unavailable": budget.max_unavailable,
                                      "min_available": budget.min_available}})
        return contexts
    if component != PROVIDER_EGRESS:
        return [template_context(config, component)]
    owners = {"controller": CONTROLLER, "bitwarden": BITWARDEN}
    return [{**template_context(config, owners[policy.workload]),
             "egress_policy": {"name": policy.name, "egress": list(policy.egress)}}
            for policy in config.egress_policies]


def template_context(config: EffectiveConfig, component: str) -> dict[str, Any]:
    """The values the templates of `component` render from."""
    app_name = APP_NAMES[component]
    cert_manager = config.cert_manager
    workload_name = COMPONENT_WORKLOADS.get(component)
    workload = (config.workloads[workload_name] if workload_name is not None
                else WorkloadSettings(resources=config.resources, affinity=config.affinity,
                                      tolerations=config.tolerations,
                                      node_selector=config.node_selector))
    calls_out = workload_name in CALLING_OUT
    trusted_ca = config.trusted_ca if calls_out else None
    proxy = config.proxy if calls_out else None
    proxied = proxy is not None
    selector = labels.selector_labels(app_name)
    return {
        "namespace": config.namespace,
        "labels": labels.object_labels(config.labels, app_name,
                                       _component_version(config, component)),
        "selector": selector,
        "policy_selector": labels.policy_selector(app_name),
        "controller_policy_selector": labels.policy_selector(CONTROLLER_APP),
        "operand_pods_selector": labels.policy_selector(
            CONTROLLER_APP, WEBHOOK_APP, CERT_CONTROLLER_APP, BITWARDEN_APP),
        "outbound_pods_selector": labels.policy_selector(CONTROLLER_APP, BITWARDEN_APP),
        "log_level": operand_log_level(config.log_level),
        "operating_namespace": config.operating_namespace,
        "images": {
            "external_secrets": config.images.external_secrets,
            "bitwarden_sdk_server": config.images.bitwarden_sdk_server,
        },
        "webhook": {
            "check_interval": config.webhook_check_interval,
            "lookahead_interval": config.webhook_lookahead_interval,
            "certificate_secret": webhook_secret(cert_manager),
            "annotations": injector_annotations(config),
            "configuration_labels": webhook_configuration_labels(cert_manager),
            # Set by the cluster facts only (steps/facts.py): cert-manager's CA, or the
            # overlap of old and new CAs, or on the way back the caBundle the cert-controller
            # has yet to replace.
            "ca_bundle": cert_manager.bundle_overlap or cert_manager.ca_bundle,
            "failure_policy": config.webhook.failure_policy,
            "timeout_seconds": config.webhook.timeout_seconds,
            # The cluster's TLS security profile, as far as Go can follow it (tls_profile.py).
            "tls_args": list(webhook_tls_args(config.tls_profile)),
        },
        "cert_manager": {
            "secret_name": WEBHOOK_SECRET_CERT_MANAGER,
            "issuer_ref": {"name": cert_manager.issuer_name, "kind": cert_manager.issuer_kind,
                           "group": cert_manager.issuer_group},
            "duration": cert_manager.duration,
            "renew_before": cert_manager.renew_before,
        },
        "bitwarden": {"tls_secret_name": config.bitwarden.tls_secret_name},
        "deployment": {
            "replicas": workload.replicas,
            "revision_history_limit": workload.revision_history_limit,
            "leader_election": workload.replicas is None or workload.replicas > 1,
        },
        "concurrent": config.controller_flags.concurrent,
        "controller_args": controller_args(config),
        "generic_targets": config.generic_targets,
        # The controller's Lease and timings (render/leader_election.py says why).
        "controller_lease": {"id": CONTROLLER_LEASE_ID, **CONTROLLER_LEASE.flags()},
        "monitoring": monitoring_context(config),
        "pod": {
            "annotations": {**required_scc(config),
                            **loaded_content_annotations(config, workload_name)},
            "security_context": RESTRICTED_POD_SECURITY_CONTEXT,
            "node_selector": workload.node_selector,
            "affinity": workload.affinity,
            "tolerations": workload.tolerations,
            "topology_spread_constraints": (
                workload.topology_spread_constraints
                or (_spread_across_nodes(selector) if workload.spread_across_nodes else None)),
            "priority_class_name": workload.priority_class_name,
            "extra_volumes": ([{"name": TRUSTED_CA_VOLUME,
                                "configMap": {"name": TRUSTED_CA_CONFIGMAP}}]
                              if proxied else [])
            + ([{"name": USER_CA_VOLUME,
                 "configMap": {"name": trusted_ca.config_map_name,
                               "items": [{"key": trusted_ca.key, "path": USER_CA_FILE}]}}]
               if trusted_ca else []),
        },
        "container": {
            "security_context": RESTRICTED_CONTAINER_SECURITY_CONTEXT,
            "resources": workload.resources,
            # Unsupported overrides: after the rendered flags, none of which they name.
            "override_args": list(workload.override_args),
            "env": merged_env(proxy_env(proxy) + ([USER_CA_ENV] if trusted_ca else []),
                              workload.override_env),
            "extra_volume_mounts": ([{"name": TRUSTED_CA_VOLUME,
                                      "mountPath": TRUSTED_CA_MOUNT_PATH, "readOnly": True}]
                                    if proxied else [])
            + ([{"name": USER_CA_VOLUME, "mountPath": USER_CA_MOUNT_PATH, "readOnly": True}]
               if trusted_ca else []),
        },
    }
