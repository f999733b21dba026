r"""The syntax Kubernetes imposes on names, labels and durations, and the operator's own
reserved names: declared once.

Each pattern is a Python regular expression without anchors. The CRD's CEL rules
(manager/api/rules.py) embed it with `cel()`, the operator's run-time checks
(manager/kube_values.py, manager/config/) match it with `re.fullmatch`.
tests/api/test_patterns_agree.py sends one table of values through both, CEL on the real
API server, so the two can never drift apart.
"""

from __future__ import annotations

import re

DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS_SUBDOMAIN = rf"{DNS_LABEL}(\.{DNS_LABEL})*"
# The name part of a qualified name (label keys, annotation keys) and of label values.
QUALIFIED_NAME_PART = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
LABEL_KEY = rf"({DNS_SUBDOMAIN}/)?{QUALIFIED_NAME_PART}"
LABEL_VALUE = rf"({QUALIFIED_NAME_PART})?"
# A Go time.Duration as metav1.Duration parses it (no sign: negative intervals make no sense).
GO_DURATION = r"([0-9]+(\.[0-9]*)?(ns|us|µs|ms|s|m|h))+"

# A control character: never part of a proxy URL or list (the CEL rule and the run-time check).
CONTROL_CHARACTER = r"[\x00-\x1f\x7f]"

# Label keys the operator sets itself (selectors, RBAC aggregation); users may not set them.
RESERVED_LABEL_PREFIXES = ("app.kubernetes.io/", "external-secrets.io/",
                           "rbac.authorization.k8s.io/")
RESERVED_LABEL_KEYS = ("app", "servicebinding.io/controller")
RESERVED_LABEL_KEY = "|".join(
    [f"{re.escape(prefix)}.*" for prefix in RESERVED_LABEL_PREFIXES]
    + [re.escape(key) for key in RESERVED_LABEL_KEYS])

# Namespaces the operand must never share: the cluster's own and the distribution's.
SHARED_NAMESPACES = ("default", "openshift")
SYSTEM_NAMESPACE_PREFIXES = ("kube-", "openshift-")


def cel(pattern: str) -> str:
    """`pattern`, anchored, for a single-quoted CEL string literal: CEL unescapes the string
    before compiling the regular expression, so every backslash is doubled."""
    return f"^({pattern})$".replace("\\", "\\\\")


def matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def is_reserved_label_key(key: str) -> bool:
    return matches(RESERVED_LABEL_KEY, key)


def is_shared_namespace(namespace: str) -> bool:
    return namespace in SHARED_NAMESPACES or namespace.startswith(SYSTEM_NAMESPACE_PREFIXES)

# Annotation keys an administrator may not set on the operand's objects: the platform's own
# domains (and their subdomains), and the prefixes the operator and cert-manager's CA
# injector write themselves.
RESERVED_ANNOTATION_DOMAINS = ("kubernetes.io", "k8s.io", "openshift.io")
OPERATOR_ANNOTATION_PREFIXES = ("cert-manager.io/", "external-secrets.io/",
                                "external-secrets-operator.io/")
RESERVED_ANNOTATION_KEY = "|".join(
    [rf"([^/]*\.)?{re.escape(domain)}/.*" for domain in RESERVED_ANNOTATION_DOMAINS]
    + [f"{re.escape(prefix)}.*" for prefix in OPERATOR_ANNOTATION_PREFIXES])
# Platform annotations in those domains that administrators need on workloads, so they are
# allowed: pinning the SCC (against a higher-priority one another product installs), workload
# partitioning of management pods, and the cluster autoscaler's eviction veto.
REQUIRED_SCC_ANNOTATION = "openshift.io/required-scc"
# The SCC the operator's and the operand's restricted securityContexts are written for
# (OpenShift 4.11 and later); their pods pin it with the annotation above.
RESTRICTED_SCC = "restricted-v2"
PLATFORM_ANNOTATION_KEYS = (REQUIRED_SCC_ANNOTATION, "target.workload.openshift.io/management",
                            "cluster-autoscaler.kubernetes.io/safe-to-evict")

# Environment variables the operator or the platform sets in operand containers: overrideEnv
# may not name them (the proxy variables come from the proxy settings, the CA variables from
# trustedCABundle).
RESERVED_ENV_PREFIXES = ("HOSTNAME", "KUBERNETES_", "EXTERNAL_SECRETS_")
RESERVED_ENV_NAMES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy",
                      "no_proxy", "SSL_CERT_DIR", "SSL_CERT_FILE")
RESERVED_ENV_NAME = "|".join(
    [f"{re.escape(prefix)}.*" for prefix in RESERVED_ENV_PREFIXES]
    + [re.escape(name) for name in RESERVED_ENV_NAMES])
# A ConfigMap data key (IsConfigMapKey).
CONFIGMAP_KEY = r"[-._a-zA-Z0-9]+"


def is_reserved_annotation_key(key: str) -> bool:
    return key not in PLATFORM_ANNOTATION_KEYS and matches(RESERVED_ANNOTATION_KEY, key)


def is_reserved_env_name(name: str) -> bool:
    return matches(RESERVED_ENV_NAME, name)
