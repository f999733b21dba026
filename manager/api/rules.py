r"""Every CEL rule of the two CRDs, with its exact message.

Rules marked SEED are the seed's `+kubebuilder:validation:XValidation` markers, verbatim
except where a `has()` guard keeps them from failing on an absent optional field. The other
rules are additions (documented in docs/api.md): they reject, at admission, specs the
operator could never turn into a working installation.

Regular expressions come from manager/api/patterns.py, where the run-time checks find them
too; `patterns.cel` doubles their backslashes for CEL's string literals.
"""

from __future__ import annotations

from collections.abc import Callable

from manager.api import defaults, operand_flags, patterns
from manager.api.markers import Rule

# --- building blocks: the patterns of manager/api/patterns.py, as CEL string literals -------

_DNS_LABEL = patterns.cel(patterns.DNS_LABEL)
_DNS_SUBDOMAIN = patterns.cel(patterns.DNS_SUBDOMAIN)
_LABEL_KEY = patterns.cel(patterns.LABEL_KEY)
_LABEL_VALUE = patterns.cel(patterns.LABEL_VALUE)
_RESERVED_LABEL_KEY = patterns.cel(patterns.RESERVED_LABEL_KEY)
_GO_DURATION = patterns.cel(patterns.GO_DURATION)

# Regular expressions of metav1.Condition (pydantic patterns; Python `re` syntax).
CONDITION_TYPE_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON_PATTERN = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"


def _label_key_rule() -> Rule:
    return Rule(
        run_time="manager.kube_values.check_label_map",
        rule=(
            f"self.all(k, k.matches('{_LABEL_KEY}') && (k.contains('/') ? "
            "k.split('/')[0].size() <= 253 && k.split('/')[1].size() <= 63 : k.size() <= 63))"
        ),
        message=(
            "label keys must be an optional DNS subdomain prefix of at most 253 characters and "
            "'/', followed by a name of at most 63 characters that consists of alphanumeric "
            "characters, '-', '_' or '.' and starts and ends with an alphanumeric character "
            "(e.g. 'tier' or 'example.com/tier')"
        ),
        origin="added",
        note="The API server would refuse such a label on every object the operator creates.",
    )


# --- one-way settings: the way out -----------------------------------------------------------

# Deleting the ExternalSecretsConfig stops management and leaves the operand running; a new one
# takes the same objects over (they are the operator's), so re-creating it is how a one-way
# setting changes. Each seed rule keeps its exact message; a companion rule with the same
# expression adds this, so the API server's answer names both.
_RECREATE = ("delete the ExternalSecretsConfig (the operand keeps running, unmanaged) and "
             "create it again")
WAY_OUT_NAMESPACE = (
    f"to move the operand to another namespace, {_RECREATE} with the new namespace: the "
    "operator installs the operand there and removes what it created in the old namespace "
    "(the Namespace itself stays)"
)
WAY_OUT_CERT_MANAGER = (
    f"to switch between cert-manager and the built-in cert-controller, {_RECREATE} with the "
    "certManagerConfig you want: the operator moves the webhook certificate to the new source "
    "and removes the old one's objects"
)
WAY_OUT_ISSUER = (
    f"to use another issuer, {_RECREATE} with the new issuerRef: cert-manager then issues the "
    "webhook certificate from it"
)


def _way_out(message: str) -> Rule:
    """The companion of a seed's `self == oldSelf` rule. Written the other way round: the API
    server keys a field's rules by their expression, so two equal ones cannot coexist."""
    return Rule(rule="oldSelf == self", message=message, origin="added",
                note="Says how to change this one-way setting; the seed's rule `self == "
                     "oldSelf` on the same field keeps its exact message.")


# --- roots ----------------------------------------------------------------------------------

ESC_SINGLETON = Rule(  # SEED
    run_time="admission only: the operator reads only the object named cluster",
    rule="self.metadata.name == 'cluster'",
    message="ExternalSecretsConfig is a singleton, .metadata.name must be 'cluster'",
)
ESM_SINGLETON = Rule(  # SEED
    run_time="admission only: the operator reads only the object named cluster",
    rule="self.metadata.name == 'cluster'",
    message="ExternalSecretsManager is a singleton, .metadata.name must be 'cluster'",
)


def _has_controller_config(obj: str) -> str:
    return f"(has({obj}.spec) && has({obj}.spec.controllerConfig))"


def _default_namespace(obj: str) -> str:
    """CEL: `obj`'s controllerConfig (known to exist) names the default namespace."""
    cc = f"{obj}.spec.controllerConfig"
    return f"(!has({cc}.namespace) || {cc}.namespace == 'external-secrets')"


# Added: the seed's controllerConfig rules only run when both the old and the new object have
# a controllerConfig, so adding one later (with another namespace) or removing one (falling
# back to the default) would move the operand. This closes both holes with the seed's message:
# when controllerConfig appears or disappears, the side that has it must name the default.
NAMESPACE_ADDED_OR_REMOVED = Rule(
    rule=(
        f"{_has_controller_config('self')} == {_has_controller_config('oldSelf')} || "
        f"({_has_controller_config('self')} ? {_default_namespace('self')} "
        f": {_default_namespace('oldSelf')})"
    ),
    message=f"namespace can only be configured during creation; {WAY_OUT_NAMESPACE}",
    origin="added",
    note=(
        "The seed's controllerConfig rules only run when the old and the new object both have "
        "a controllerConfig; adding one later with another namespace, or removing one that "
        "names another namespace, would move the operand. Starts with the seed's message."
    ),
)

_OLD_CM = "oldSelf.spec.appConfig.certManagerConfig"
# Added: the seed says cert-manager configuration cannot be disabled once enabled; `enabled`
# is immutable, but removing the whole certManagerConfig (or appConfig) would bypass it.
CERT_MANAGER_NOT_REMOVABLE = Rule(
    rule=(
        "!(has(oldSelf.spec) && has(oldSelf.spec.appConfig) && "
        f"has({_OLD_CM}) && {_OLD_CM}.enabled == 'true') || "
        "(has(self.spec) && has(self.spec.appConfig) && has(self.spec.appConfig.certManagerConfig))"
    ),
    message=("certManagerConfig cannot be removed once enabled is set to 'true'; "
             f"{WAY_OUT_CERT_MANAGER}"),
    origin="added",
    note=(
        "The seed says cert-manager cannot be disabled once enabled; `enabled` is immutable, "
        "but removing certManagerConfig (or appConfig) would bypass that."
    ),
)

EXTERNAL_SECRETS_CONFIG = (ESC_SINGLETON, NAMESPACE_ADDED_OR_REMOVED, CERT_MANAGER_NOT_REMOVABLE)
EXTERNAL_SECRETS_MANAGER = (ESM_SINGLETON,)

# --- ExternalSecretsConfig.spec -------------------------------------------------------------

# Added: the webhook's lookahead (manager/config/types.py, LOOKAHEAD_MARGIN) is the renew-ahead less
# one check interval and a 10m margin, and must be at least one check interval. The defaults
# apply where the API server has not put them (webhookConfig absent: 5m). Malformed values
# are left to the fields' own rule.
_CM = "self.certManagerConfig"
_CHECK = "self.webhookConfig.certificateCheckInterval"
_HAS_CHECK = f"(has(self.webhookConfig) && has({_CHECK}))"
_CHECK_INTERVAL = (f"duration({_HAS_CHECK} ? {_CHECK} : "
                   f"'{defaults.CERTIFICATE_CHECK_INTERVAL}')")
_CHECK_MALFORMED = f"({_HAS_CHECK} && !{_CHECK}.matches('{_GO_DURATION}'))"
_CERT_MANAGER_ON = f"(has({_CM}) && has({_CM}.enabled) && {_CM}.enabled == 'true')"
LOOKAHEAD_MARGIN = "10m"
CERT_CONTROLLER_RENEW_AHEAD = "2160h"
CERT_CONTROLLER_REQUEUE_INTERVAL = "5m"
WEBHOOK_LIFETIMES = (
    Rule(
        run_time="manager.config.checks._check_lookahead",
        rule=(
            f"!{_CERT_MANAGER_ON} || {_CHECK_MALFORMED} || "
            f"(has({_CM}.certificateRenewBefore) && "
            f"!{_CM}.certificateRenewBefore.matches('{_GO_DURATION}')) || "
            f"duration(has({_CM}.certificateRenewBefore) ? {_CM}.certificateRenewBefore "
            f": '30m') >= {_CHECK_INTERVAL} + {_CHECK_INTERVAL} + "
            f"duration('{LOOKAHEAD_MARGIN}')"
        ),
        message=(
            "certManagerConfig.certificateRenewBefore must be at least twice "
            "webhookConfig.certificateCheckInterval (default 5m) plus 10m: the webhook "
            "checks every check interval that its certificate is still valid "
            "certificateRenewBefore - certificateCheckInterval - 10m ahead, and exits when "
            "it is not, so a shorter certificateRenewBefore makes it exit before cert-manager "
            "renews the certificate"
        ),
        origin="added",
        note=(
            "The operator renders the webhook's --lookahead-interval as certificateRenewBefore "
            "- certificateCheckInterval - 10m; below one check interval the webhook either "
            "exits before the renewal or misses an expiry."
        ),
    ),
    Rule(
        run_time="manager.config.checks._webhook_check_interval",
        rule=(
            f"{_CERT_MANAGER_ON} || {_CHECK_MALFORMED} || "
            f"{_CHECK_INTERVAL} + {_CHECK_INTERVAL} + duration('{LOOKAHEAD_MARGIN}') + "
            f"duration('{CERT_CONTROLLER_REQUEUE_INTERVAL}') <= "
            f"duration('{CERT_CONTROLLER_RENEW_AHEAD}')"
        ),
        message=(
            "webhookConfig.certificateCheckInterval must be at most 1079h52m30s with the "
            "built-in cert-controller, which renews the webhook certificate 90 days (2160h) "
            "before it expires: the webhook's lookahead, 2160h - 5m - "
            "certificateCheckInterval - 10m, must be at least one check interval"
        ),
        origin="added",
        note=(
            "The operator renders the webhook's --lookahead-interval as 2160h - 5m - "
            "certificateCheckInterval - 10m with the cert-controller."
        ),
    ),
)

# Added (the reference's C2 with our field names): bitwarden-sdk-server needs a TLS key pair,
# from secretRef or from cert-manager; with neither it can never start.
APPLICATION_CONFIG = (
    Rule(
        run_time="manager.config.merge._bitwarden",
        rule=(
            "!has(self.bitwardenSecretManagerProvider) || "
            "!has(self.bitwardenSecretManagerProvider.enabled) || "
            "self.bitwardenSecretManagerProvider.enabled != 'true' || "
            "has(self.bitwardenSecretManagerProvider.secretRef) || "
            "(has(self.certManagerConfig) && has(self.certManagerConfig.enabled) && "
            "self.certManagerConfig.enabled == 'true')"
        ),
        message=(
            "secretRef or certManagerConfig must be configured when "
            "bitwardenSecretManagerProvider is enabled"
        ),
        origin="added",
        note=(
            "bitwarden-sdk-server needs a TLS key pair from secretRef or from cert-manager; "
            "with neither it can never start (the reference operator's rule, our field names)."
        ),
    ),
    *WEBHOOK_LIFETIMES,
)

CERT_MANAGER_CONFIG = (
    Rule(  # SEED
        run_time="manager.config.merge._cert_manager",
        rule="self.enabled != 'true' || has(self.issuerRef)",
        message="issuerRef must be provided when enabled is set to 'true'.",
    ),
    Rule(  # SEED
        run_time="manager.config.merge._cert_manager",
        rule=(
            "has(self.addInjectorAnnotations) && self.addInjectorAnnotations != 'false' "
            "? self.enabled != 'false' : true"
        ),
        message="addInjectorAnnotations can only be set when enabled is set to 'true'.",
    ),
    # Added: cert-manager refuses a Certificate whose renewBefore is not shorter than its
    # duration. The matches() guards keep duration() from failing on a malformed value (the
    # field's own rule reports that one).
    Rule(
        run_time="manager.config.merge._cert_manager",
        rule=(
            "!has(self.certificateDuration) || !has(self.certificateRenewBefore) || "
            f"!self.certificateDuration.matches('{_GO_DURATION}') || "
            f"!self.certificateRenewBefore.matches('{_GO_DURATION}') || "
            "duration(self.certificateRenewBefore) < duration(self.certificateDuration)"
        ),
        message="certificateRenewBefore must be shorter than certificateDuration",
        origin="added",
        note="cert-manager refuses a Certificate whose renewBefore is not below its duration.",
    ),
)

ENABLED_IMMUTABLE = (
    Rule(rule="self == oldSelf", message="enabled is immutable once set"),  # SEED
    _way_out(WAY_OUT_CERT_MANAGER),
)

ISSUER_REF = (
    Rule(rule="self == oldSelf", message="issuerRef is immutable once set"),  # SEED
    _way_out(WAY_OUT_ISSUER),
    # SEED, guarded with has(): kind and group are optional.
    Rule(
        run_time="manager.config.merge._cert_manager",
        rule=(
            "!has(self.kind) || self.kind.lowerAscii() == 'issuer' || "
            "self.kind.lowerAscii() == 'clusterissuer'"
        ),
        message="kind must be either 'Issuer' or 'ClusterIssuer'",
        origin="seed+guard",
        note="`kind` is optional; without the guard an issuerRef without kind fails to evaluate.",
    ),
    Rule(
        run_time="manager.config.merge._cert_manager",
        rule="!has(self.group) || self.group.lowerAscii() == 'cert-manager.io'",
        message="group must be 'cert-manager.io'",
        origin="seed+guard",
        note="`group` is optional; without the guard an issuerRef without group fails to "
             "evaluate.",
    ),
)

CONTROLLER_CONFIG = (  # SEED
    Rule(
        rule=(
            "!has(oldSelf.namespace) && !has(self.namespace) || "
            "has(oldSelf.namespace) && has(self.namespace)"
        ),
        message="namespace can only be configured during creation",
    ),
)

NAMESPACE_IMMUTABLE = (
    Rule(rule="self == oldSelf", message="namespace is immutable once set"),  # SEED
    _way_out(WAY_OUT_NAMESPACE),
)

# Added: a namespace that is not a DNS label can never be created.
NAMESPACE_NAME = (
    Rule(
        run_time="manager.config.checks._namespace, manager.config.checks._operating_namespace",
        rule=f"self.matches('{_DNS_LABEL}')",
        message=(
            "must be a valid namespace name: lowercase alphanumeric characters or '-', "
            "starting and ending with an alphanumeric character"
        ),
        origin="added",
        note="A namespace whose name is not a DNS label can never be created.",
    ),
)

# Namespaces the operand must never share: the cluster's own and the distribution's. The
# operator also refuses, at run time, the namespace it runs in itself (manager/config/checks.py),
# which CEL cannot know.
SHARED_NAMESPACES = patterns.SHARED_NAMESPACES
SYSTEM_NAMESPACE_PREFIXES = patterns.SYSTEM_NAMESPACE_PREFIXES


def _quoted(names: tuple[str, ...]) -> str:
    return ", ".join(f"'{name}'" for name in names)


# Added: the operand's NetworkPolicies, RBAC and pruning act on the namespace it runs in.
OPERAND_NAMESPACE_NOT_SHARED = (
    Rule(
        run_time="manager.config.checks._namespace",
        rule=(
            f"!(self in [{_quoted(SHARED_NAMESPACES)}]) && "
            + " && ".join(f"!self.startsWith('{prefix}')" for prefix in SYSTEM_NAMESPACE_PREFIXES)
        ),
        message=(
            "spec.controllerConfig.namespace must not be a shared or system namespace: "
            f"{_quoted(SHARED_NAMESPACES)} and names starting with "
            f"{' or '.join(repr(p) for p in SYSTEM_NAMESPACE_PREFIXES)} are refused; choose a "
            "namespace of the operand's own, such as 'external-secrets'"
        ),
        origin="added",
        note=(
            "The operand's NetworkPolicies, RBAC and pruning act on its namespace; a shared or "
            "system namespace would put them next to workloads that are not the operand's."
        ),
    ),
)

# The NetworkPolicies the operator renders itself; a declared policy must not take their names.
OPERATOR_NETWORK_POLICIES = (
    "deny-all-traffic",
    "allow-to-dns",
    "allow-api-server-egress-for-main-controller",
    "allow-api-server-egress-for-webhook",
    "allow-api-server-egress-for-cert-controller",
    "allow-api-server-egress-for-bitwarden-server",
    "allow-main-controller-egress-to-bitwarden-server",
    "allow-provider-egress-for-main-controller",
    "allow-provider-egress-for-bitwarden-server",
)

NETWORK_POLICY_NAME = (
    Rule(
        run_time="manager.config.merge._egress_policies",
        rule=f"!(self in [{_quoted(OPERATOR_NETWORK_POLICIES)}])",
        message=(
            "name must not be the name of a NetworkPolicy the operator renders itself "
            f"({', '.join(OPERATOR_NETWORK_POLICIES)})"
        ),
        origin="added",
        note="Each entry becomes a NetworkPolicy of that name next to the operator's own.",
    ),
)

# Added: each entry becomes one NetworkPolicy named `name` in the operand namespace, so two
# entries with one name (for different components) would be one object.
NETWORK_POLICIES = (
    Rule(
        run_time="manager.config.merge._egress_policies",
        rule="self.all(p, self.exists_one(q, q.name == p.name))",
        message=(
            "names in networkPolicies must be unique: each entry becomes a NetworkPolicy of "
            "that name in the operand namespace"
        ),
        origin="added",
        note=(
            "The list is keyed by name and componentName, as in the reference operator, but "
            "both entries of one name would be the same NetworkPolicy object."
        ),
    ),
)

# Added: Secret and Issuer names are DNS subdomains; any other name can never be found.
OBJECT_NAME = (
    Rule(
        run_time=("admission only: the names the operator looks up itself are checked again "
                  "(manager.config.merge._bitwarden, manager.config.merge._cert_manager); the "
                  "others (a priorityClassName, the CA bundle's ConfigMap) go into objects the "
                  "API server checks"),
        rule=f"self.matches('{_DNS_SUBDOMAIN}')",
        message=(
            "must be a valid object name: lowercase alphanumeric characters, '-' or '.', "
            "starting and ending with an alphanumeric character"
        ),
        origin="added",
        note="Secrets and Issuers are named by DNS subdomains; any other name can never match.",
    ),
)

# Durations are bounded so that their rules cost-check; real values are a few characters.
DURATION_MAX_LENGTH = 32

# Added: a value metav1.Duration cannot parse makes the whole object unreadable to the operator.
DURATION = (
    Rule(
        run_time="manager.kube_values.parse_go_duration",
        rule=f"self.matches('{_GO_DURATION}')",
        message="must be a duration such as '30m', '1h30m' or '8760h'",
        origin="added",
        note="A value metav1.Duration cannot parse would make the whole object unreadable.",
    ),
)

# Added: a proxy value ends up in every operand container's environment; a control character
# (a pasted newline, a tab) is never part of a proxy URL or a no-proxy list.
PROXY_VALUE = (
    Rule(
        run_time="manager.config.checks._checked_proxy",
        # Unanchored (matches anywhere), so not patterns.cel(patterns.CONTROL_CHARACTER).
        rule=r"!self.matches('[\\x00-\\x1f\\x7f]')",
        message="must not contain control characters such as newlines or tabs",
        origin="added",
        note="A control character is never part of a proxy URL or list; it would reach every "
        "operand container's environment.",
    ),
)

# Added: the operand's Go HTTP client can only use a proxy URL with a scheme it knows and a
# host; anything else is silently ignored or fails every request to a provider.
PROXY_URL = (
    Rule(
        run_time="manager.config.checks._checked_proxy",
        rule=(
            "self == '' || (isURL(self) && url(self).getScheme() in ['http', 'https', 'socks5'] "
            "&& url(self).getHostname() != '')"
        ),
        message=(
            "must be a URL with a scheme (http, https or socks5) and a host, such as "
            "'http://proxy.example.com:3128'"
        ),
        origin="added",
        note="A proxy without a scheme and a host cannot be used by the operand.",
    ),
)

# --- labels and node selectors (added: the API server would refuse such labels on every
# object the operator creates, so the installation could never succeed) --------------------

LABEL_VALUE = (
    Rule(
        run_time="manager.kube_values.check_label_map",
        rule=f"self.matches('{_LABEL_VALUE}')",
        message=(
            "label values must be empty or consist of alphanumeric characters, '-', '_' or '.', "
            "starting and ending with an alphanumeric character"
        ),
        origin="added",
        note="The API server would refuse such a label value on every object.",
    ),
)

NODE_SELECTOR_KEYS = (_label_key_rule(),)

USER_LABEL_KEYS = (
    _label_key_rule(),
    Rule(
        run_time="manager.config.checks._checked_user_labels",
        rule=f"self.all(k, !k.matches('{_RESERVED_LABEL_KEY}'))",
        message=(
            "label keys 'app', 'app.kubernetes.io/*', 'external-secrets.io/*', "
            "'rbac.authorization.k8s.io/*' and 'servicebinding.io/controller' are reserved "
            "for the operator"
        ),
        origin="added",
        note=(
            "The operator sets these keys itself (selectors, RBAC aggregation); a user value "
            "would be overridden, so it is refused where it is written."
        ),
    ),
)

# --- administrator knobs (issue 15): annotations, componentConfigs, webhook, trusted CA -----

_RESERVED_ANNOTATION_KEY = patterns.cel(patterns.RESERVED_ANNOTATION_KEY)


def _cel_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f"'{item}'" for item in items) + "]"

_CONFIGMAP_KEY = patterns.cel(patterns.CONFIGMAP_KEY)

# The reference operator's C3-C7, with the operator's own prefixes added to C7's.
ANNOTATION_KEYS = (
    Rule(
        run_time="manager.config.checks._annotations",
        rule=f"self.all(key, key.matches('{_LABEL_KEY}'))",
        message=(
            "Annotation keys must consist of alphanumeric characters, '-', '_' or '.', starting "
            "and ending with alphanumeric, with an optional lowercase DNS subdomain prefix and "
            "'/' (e.g., 'my-key' or 'example.com/my-key')"
        ),
        origin="added",
        note="The reference operator's rule (C3); the API server refuses such keys anyway.",
    ),
    Rule(
        run_time="manager.config.checks._annotations",
        rule="self.all(key, !key.contains('/') || key.split('/')[0].size() <= 253)",
        message="Annotation key prefix (DNS subdomain) must be no more than 253 characters",
        origin="added", note="The reference operator's rule (C4).",
    ),
    Rule(
        run_time="manager.config.checks._annotations",
        rule=("self.all(key, key.contains('/') ? key.split('/')[1].size() <= 63 "
              ": key.size() <= 63)"),
        message="Annotation key name part must be no more than 63 characters",
        origin="added", note="The reference operator's rule (C5).",
    ),
    Rule(
        run_time="manager.config.checks._annotations",
        rule=(f"self.all(key, key in {_cel_list(patterns.PLATFORM_ANNOTATION_KEYS)} || "
              f"!key.matches('{_RESERVED_ANNOTATION_KEY}'))"),
        message=(
            "Annotation keys containing reserved domains 'kubernetes.io/', 'openshift.io/', "
            "'k8s.io/' (including subdomains like '*.kubernetes.io/') or the operator's own "
            "prefixes 'cert-manager.io/', 'external-secrets.io/', "
            "'external-secrets-operator.io/' are not allowed, except "
            + ", ".join(f"'{key}'" for key in patterns.PLATFORM_ANNOTATION_KEYS)
        ),
        origin="added",
        note=("The reference operator's C6 and C7 in one rule, plus the prefixes the operator "
              "writes itself (cert-manager.io/inject-ca-from), minus the platform annotations "
              "administrators need on workloads (the SCC pin, workload partitioning, the "
              "autoscaler's eviction veto)."),
    ),
)

OVERRIDE_ENV = (
    Rule(
        run_time="manager.config.checks._override_env",
        rule=(f"self.all(e, !{_cel_list(patterns.RESERVED_ENV_PREFIXES)}.exists(p, "
              f"e.name.startsWith(p)) && !(e.name in {_cel_list(patterns.RESERVED_ENV_NAMES)}))"),
        message=(
            "Environment variable names with reserved prefixes 'HOSTNAME', 'KUBERNETES_', "
            "'EXTERNAL_SECRETS_', and the names the operator sets (HTTP_PROXY, HTTPS_PROXY, "
            "NO_PROXY and their lowercase forms: use proxy; SSL_CERT_DIR, SSL_CERT_FILE: use "
            "trustedCABundle) are not allowed"
        ),
        origin="added",
        note="The reference operator's C9, plus the variables the operator sets itself.",
    ),
)

_PDB = "self.deploymentConfigs.podDisruptionBudget"
_UNMANAGED_REPLICAS = ("(has(self.deploymentConfigs.manageReplicas) && "
                       "self.deploymentConfigs.manageReplicas == 'false')")
COMPONENT_CONFIG = (
    Rule(
        run_time=("admission only: the operator reads the tuning of ExternalSecretsCoreController "
                  "only (manager.config.merge._controller_flags); another component's is never "
                  "used"),
        rule="!has(self.tuning) || self.componentName == 'ExternalSecretsCoreController'",
        message="tuning can only be set for componentName ExternalSecretsCoreController",
        origin="added", note="The tuning flags are the core controller's.",
    ),
    Rule(
        run_time=("admission only: at run time a budget for one replica is not rendered and is "
                  "listed in status.ignoredSettings; above one replica "
                  "manager.config.checks._check_budget refuses it"),
        rule=(f"!has(self.deploymentConfigs) || !has({_PDB}) || "
              f"!has({_PDB}.minAvailable) || {_UNMANAGED_REPLICAS} || "
              f"{_PDB}.minAvailable < (has(self.deploymentConfigs.replicas) ? "
              "self.deploymentConfigs.replicas : 1)"),
        message=("podDisruptionBudget.minAvailable must be lower than replicas (1 when "
                 "unset), or no pod could ever be evicted (node drains would hang)"),
        origin="added",
        note=("A budget that allows no eviction blocks every node drain; replicas defaults "
              "to 1."),
    ),
    Rule(
        run_time="manager.config.checks._check_budget",
        rule=(f"!has(self.deploymentConfigs) || !has({_PDB}) || "
              f"!has({_PDB}.minAvailable) || !{_UNMANAGED_REPLICAS} || "
              f"{_PDB}.minAvailable == 0"),
        message=("podDisruptionBudget.minAvailable cannot be above 0 when manageReplicas is "
                 "'false': the operator does not know how many pods run, and minAvailable "
                 "as high as the pod count (1 pod, minAvailable 1) blocks every node drain; "
                 "use podDisruptionBudget.maxUnavailable"),
        origin="added",
        note=("With manageReplicas 'false' the budget is rendered whatever the replica count; "
              "only maxUnavailable (or minAvailable 0) always allows an eviction."),
    ),
)

# componentConfigs[].overrideArgs: the release's flags (manager/api/operand_flags.py) that the
# operator does not render, each with a value of its type. Chosen by componentName, so one
# rule holds each component's regular expression.
_OVERRIDES_DOC = 'docs/operations.md, "overrideArgs (unsupported)"'


def _by_component(expression: Callable[[str], str]) -> str:
    """`expression(command)` of the entry's component (bitwarden has its own rule)."""
    webhook, certcontroller, controller = (
        expression(operand_flags.COMMANDS[name])
        for name in ("Webhook", "CertController", "ExternalSecretsCoreController"))
    return (f"(self.componentName == 'Webhook' ? {webhook} : "
            f"self.componentName == 'CertController' ? {certcontroller} : {controller})")


def _owned(command: str) -> str:
    return f"'{patterns.cel(operand_flags.owned_pattern(command))}'"


def _refused(command: str) -> str:
    return f"'{patterns.cel(operand_flags.refused_pattern(command))}'"


def _allowed(command: str) -> str:
    return f"'{patterns.cel(operand_flags.allowed_pattern(command))}'"


def _first_arg(condition: Callable[[str], str]) -> str:
    return "'overrideArgs: ' + " + _by_component(
        lambda c: f"self.overrideArgs.filter(a, {condition(c)})[0]") + " + ' '"


def _owned_arg(command: str) -> str:
    return f"a.matches({_owned(command)})"


def _refused_arg(command: str) -> str:
    return f"a.matches({_refused(command)})"


def _bad_arg(command: str) -> str:
    return (f"!a.matches({_owned(command)}) && !a.matches({_refused(command)}) && "
            f"!a.matches({_allowed(command)})")


OVERRIDE_ARGS_MESSAGE_OWNED = (
    "sets a flag the operator renders (it has a field or a value the rendered objects depend "
    f"on: {_OVERRIDES_DOC}); remove it")
OVERRIDE_ARGS_MESSAGE_REFUSED = (
    "sets a flag that would widen what the operand touches or collide with what the operator "
    f"renders (addresses, metrics serving, CRDs: {_OVERRIDES_DOC}); remove it")
OVERRIDE_ARGS_MESSAGE_UNKNOWN = (
    f"must be --flag=value with a flag of external-secrets {operand_flags.snapshot().version} "
    "that the operator does not render, and a value of its type (true or false, an "
    f"integer, a duration such as 90s: {_OVERRIDES_DOC})")


def _no_arg_such_that(arg: Callable[[str], str], message: str, suffix: str, note: str) -> Rule:
    """No overrideArgs entry of the component matches `arg`; the refusal names the first."""
    return Rule(
        run_time="manager.config.checks._override_args",
        rule="!has(self.overrideArgs) || " + _by_component(
            lambda c: f"!self.overrideArgs.exists(a, {arg(c)})"),
        message=message,
        message_expression=f"{_first_arg(arg)} + '{suffix}'",
        origin="added",
        note=note,
    )


OVERRIDE_ARGS = (
    Rule(
        run_time="manager.config.checks._override_args",
        rule=f"!has(self.overrideArgs) || self.componentName != '{operand_flags.NO_OVERRIDES}'",
        message=(f"overrideArgs cannot be set for {operand_flags.NO_OVERRIDES}: the operator "
                 "cannot check its flags"),
        origin="added", note="No Go module serves bitwarden-sdk-server's source.",
    ),
    _no_arg_such_that(_owned_arg, f"overrideArgs {OVERRIDE_ARGS_MESSAGE_OWNED}",
                      OVERRIDE_ARGS_MESSAGE_OWNED,
                      "The Services, probes, certificates and typed fields depend on these "
                      "flags."),
    _no_arg_such_that(_refused_arg, f"overrideArgs {OVERRIDE_ARGS_MESSAGE_REFUSED}",
                      OVERRIDE_ARGS_MESSAGE_REFUSED,
                      "--crd-names, the metrics TLS flags and --live-addr: each reaches "
                      "beyond the operand or breaks what is rendered."),
    _no_arg_such_that(_bad_arg, f"each overrideArgs entry {OVERRIDE_ARGS_MESSAGE_UNKNOWN}",
                      OVERRIDE_ARGS_MESSAGE_UNKNOWN,
                      "The flags are read from the pinned release's source; a flag it lacks "
                      "would stop the container at start."),
)

DEPLOYMENT_CONFIG = (
    Rule(
        run_time="admission only: replicas is not read when manageReplicas is 'false'",
        rule="!has(self.manageReplicas) || self.manageReplicas == 'true' || !has(self.replicas)",
        message=("replicas cannot be set when manageReplicas is 'false' (the replicas are then "
                 "left to a HorizontalPodAutoscaler or kubectl scale)"),
        origin="added", note="The two say opposite things about who sets replicas.",
    ),
)

POD_DISRUPTION_BUDGET = (
    Rule(
        run_time="manager.config.checks._check_budget_fields",
        rule="has(self.maxUnavailable) != has(self.minAvailable)",
        message="set exactly one of maxUnavailable and minAvailable",
        origin="added", note="A PodDisruptionBudget takes one or the other.",
    ),
)

TUNING = (
    Rule(
        run_time="manager.config.merge._controller_flags",
        rule=("!has(self.clientQPS) || !has(self.clientBurst) || "
              "self.clientBurst >= self.clientQPS"),
        message="clientBurst must be at least clientQPS",
        origin="added", note="A burst below the steady rate has no effect on client-go's limiter.",
    ),
)

CONFIGMAP_KEY = (
    Rule(
        run_time=("admission only: the key goes into the pods' ConfigMap volume, which the API "
                  "server checks when the operator applies the Deployment"),
        rule=f"self.matches('{_CONFIGMAP_KEY}')",
        message="must be a ConfigMap key: alphanumeric characters, '-', '_' or '.'",
        origin="added", note="A key no ConfigMap can hold could never be mounted.",
    ),
)

PRIORITY_CLASS_NAME = OBJECT_NAME
