"""Syntax and semantics of Kubernetes values that CRD schemas cannot check.

Pure functions used by `manager.config` to validate a spec before anything is rendered:
label keys and values, resource quantities and requirements, tolerations, affinity and Go
durations. Each checker raises `InvalidValueError` with the JSON path below the value it was
given, so the caller can name the full field.

The rules follow the API server's own validation of Pod specs (apimachinery's
`IsQualifiedName`, `IsValidLabelValue`, core `ValidateResourceRequirements`,
`ValidateTolerations`, `ValidateAffinity`), so a value accepted here is accepted when the
operator applies the Deployment.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any
from urllib.parse import urlsplit

from manager.api.patterns import (
    CONTROL_CHARACTER,
    DNS_LABEL,
    DNS_SUBDOMAIN,
    GO_DURATION,
    LABEL_VALUE,
    QUALIFIED_NAME_PART,
    matches,
)


class InvalidValueError(ValueError):
    """A value is not valid.

    `path` locates the culprit inside the value handed to the checker, as a suffix to append
    to that value's own path: ".limits.cpu", "[0].key", "['example.com/tier']" or "".
    """

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.path = path
        self.message = message


def _join(path: str, key: str | int) -> str:
    """`path` extended by a map key or list index, in JSON-path style."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    if re.fullmatch(r"[A-Za-z][A-Za-z0-9]*", key):
        return f"{path}.{key}"
    return f"{path}[{key!r}]"


# --- names, labels and URLs ---------------------------------------------------------------

# The schemes Go's HTTP proxy support (the operand's) understands.
PROXY_SCHEMES = ("http", "https", "socks5")
# The characters Go's url.Parse (so CEL's isURL, and the operand) allows in user:password.
_USERINFO = r"[A-Za-z0-9\-._~!$&'()*+,;=:%@]*"


def has_control_character(value: str) -> bool:
    return re.search(CONTROL_CHARACTER, value) is not None


def proxy_url_problem(value: str) -> str | None:
    """Why `value` cannot be a proxy URL (scheme and host), or None."""
    try:
        parts = urlsplit(value)
        hostname = parts.hostname
    except ValueError:
        return "is not a URL"
    userinfo = parts.netloc.rpartition("@")[0]
    if parts.scheme.lower() not in PROXY_SCHEMES or not hostname or not matches(
            _USERINFO, userinfo):
        return (f"must be a URL with a scheme ({', '.join(PROXY_SCHEMES)}) and a host, such as "
                "'http://proxy.example.com:3128'")
    return None


def is_dns_label(value: str) -> bool:
    """RFC 1123 label: what namespaces and most object names must be."""
    return len(value) <= 63 and matches(DNS_LABEL, value)


def is_dns_subdomain(value: str) -> bool:
    """RFC 1123 subdomain: what Secrets, Issuers and label key prefixes must be."""
    return len(value) <= 253 and matches(DNS_SUBDOMAIN, value)


def qualified_name_problem(key: str) -> str | None:
    """Why `key` is not a qualified name (label key, toleration key), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and not is_dns_subdomain(prefix):
        return "the prefix before '/' must be a DNS subdomain of at most 253 characters"
    if not name or len(name) > 63 or not matches(QUALIFIED_NAME_PART, name):
        return ("the name must be 1-63 characters: alphanumeric, '-', '_' or '.', "
                "starting and ending with an alphanumeric character")
    return None


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a valid label value, or None."""
    if len(value) > 63 or not matches(LABEL_VALUE, value):
        return ("a label value must be empty or 1-63 characters: alphanumeric, '-', '_' or "
                "'.', starting and ending with an alphanumeric character")
    return None


def check_label_map(labels: Mapping[str, str], path: str = "") -> None:
    """Every key a qualified name and every value a valid label value."""
    for key, value in labels.items():
        problem = qualified_name_problem(key)
        if problem is not None:
            raise InvalidValueError(_join(path, key), f"invalid key: {problem}")
        if not isinstance(value, str):
            raise InvalidValueError(_join(path, key), "label values must be strings")
        problem = label_value_problem(value)
        if problem is not None:
            raise InvalidValueError(_join(path, key), problem)


# --- Go durations (metav1.Duration) -------------------------------------------------------

_DURATION_UNITS_NS = {
    "ns": 1,
    "us": 1_000,
    "µs": 1_000,  # U+00B5 MICRO SIGN
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
}
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]*)?)(ns|us|µs|ms|s|m|h)")
_MAX_DURATION_NS = 2**63 - 1


def parse_go_duration(text: str) -> int:
    """Nanoseconds of a duration ("5m", "1h30m", "8760h") as time.ParseDuration reads it,
    accepting exactly what the CRDs' rule accepts (patterns.GO_DURATION: no sign, a unit on
    every number, a digit before every point), so no value passes here that admission
    refuses (tests/api/test_patterns_agree.py holds the two together)."""
    if not matches(GO_DURATION, text):
        raise InvalidValueError("", f"invalid duration {text!r}: expected numbers with units "
                                    "(ns, us, ms, s, m, h) such as '30m', '1h30m' or '8760h'")
    total = sum((Fraction(number) * _DURATION_UNITS_NS[unit]
                 for number, unit in _DURATION_PART.findall(text)), Fraction(0))
    nanoseconds = int(total)  # Go drops fractions of a nanosecond
    if nanoseconds > _MAX_DURATION_NS:
        raise InvalidValueError("", f"duration {text!r} is too long (at most about 292 years)")
    return nanoseconds


def _trimmed(value: Fraction) -> str:
    """A non-negative fraction with at most 9 decimals and no trailing zeros."""
    whole = int(value)
    decimals = f"{int((value - whole) * 10**9):09d}".rstrip("0")
    return f"{whole}.{decimals}" if decimals else str(whole)


def format_go_duration(nanoseconds: int) -> str:
    """Go's time.Duration.String(): 300s -> "5m0s", 8760h -> "8760h0m0s"."""
    if nanoseconds == 0:
        return "0s"
    sign = "-" if nanoseconds < 0 else ""
    size = abs(nanoseconds)
    if size < 1_000:
        return f"{sign}{size}ns"
    if size < 1_000_000:
        return f"{sign}{_trimmed(Fraction(size, 1_000))}µs"
    if size < 1_000_000_000:
        return f"{sign}{_trimmed(Fraction(size, 1_000_000))}ms"
    hours, rest = divmod(size, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = f"{_trimmed(Fraction(rest, 1_000_000_000))}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def normal_go_duration(text: str) -> str:
    """A duration as Go prints it: "5m" -> "5m0s"."""
    return format_go_duration(parse_go_duration(text))


# --- resource quantities and requirements -------------------------------------------------

_QUANTITY = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_BINARY_SUFFIXES = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL_SUFFIXES: dict[str, Fraction] = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
}
_STANDARD_RESOURCES = frozenset({"cpu", "memory", "ephemeral-storage"})


def parse_quantity(value: object) -> Fraction:
    """The exact value of a resource.Quantity written as a string ("500m", "1Gi") or int."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise InvalidValueError("", "a quantity must be a string such as '500m' or '1Gi', or an "
                                    "integer")
    if isinstance(value, int):
        return Fraction(value)
    match = _QUANTITY.fullmatch(value)
    if match is None:
        raise InvalidValueError("", f"{value!r} is not a quantity (e.g. '100m', '0.5', "
                                    "'256Mi', '1G')")
    number = Fraction(match.group("number"))
    suffix = match.group("suffix") or ""
    if suffix in _BINARY_SUFFIXES:
        return number * _BINARY_SUFFIXES[suffix]
    if suffix in _DECIMAL_SUFFIXES:
        return number * _DECIMAL_SUFFIXES[suffix]
    if suffix:
        exponent = int(suffix[1:])
        scale = Fraction(10**exponent) if exponent >= 0 else Fraction(1, 10**-exponent)
        return number * scale
    return number


def _is_extended_resource(name: str) -> bool:
    """Resources from device plugins: domain-prefixed, outside kubernetes.io."""
    prefix = name.partition("/")[0] if "/" in name else ""
    return bool(prefix) and prefix != "kubernetes.io" and not prefix.endswith(".kubernetes.io")


def _check_resource_name(name: str, path: str) -> None:
    problem = qualified_name_problem(name)
    if problem is not None:
        raise InvalidValueError(path, f"invalid resource name: {problem}")
    if "/" not in name and name not in _STANDARD_RESOURCES and not name.startswith("hugepages-"):
        raise InvalidValueError(path, "unknown resource; use cpu, memory, ephemeral-storage, "
                                      "hugepages-<size> or a domain-prefixed extended resource")


def _quantities(requirements: Mapping[str, Any], section: str) -> dict[str, Fraction]:
    values = requirements.get(section) or {}
    if not isinstance(values, Mapping):
        raise InvalidValueError(_join("", section), "must be a map of resource name to quantity")
    parsed: dict[str, Fraction] = {}
    for name, raw in values.items():
        path = _join(_join("", section), name)
        _check_resource_name(name, path)
        try:
            quantity = parse_quantity(raw)
        except InvalidValueError as error:
            raise InvalidValueError(path, error.message) from None
        if quantity < 0:
            raise InvalidValueError(path, "must not be negative")
        parsed[name] = quantity
    return parsed


def check_resource_requirements(requirements: Mapping[str, Any]) -> None:
    """A core/v1 ResourceRequirements the API server accepts for every operand container."""
    unknown = set(requirements) - {"limits", "requests", "claims"}
    if unknown:
        raise InvalidValueError(_join("", sorted(unknown)[0]), "unknown field; use limits and "
                                                               "requests")
    if requirements.get("claims"):
        raise InvalidValueError(".claims", "resource claims are not supported: the operand pods "
                                           "declare no resourceClaims; remove claims")
    limits = _quantities(requirements, "limits")
    requests = _quantities(requirements, "requests")
    for name, request in requests.items():
        limit = limits.get(name)
        path = _join(".requests", name)
        if limit is not None and request > limit:
            raise InvalidValueError(path, f"must be less than or equal to limits.{name}; lower the "
                                          "request or raise the limit")
        if _is_extended_resource(name):
            if limit is None or limit != request:
                raise InvalidValueError(path, "extended resources cannot be overcommitted: set "
                                              "limits to the same value")
            if request.denominator != 1:
                raise InvalidValueError(path, "extended resources must be whole numbers")


# --- tolerations ----------------------------------------------------------------------------

_TOLERATION_FIELDS = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def check_toleration(toleration: Mapping[str, Any], path: str) -> None:
    """One core/v1 Toleration, as the API server validates it in a pod."""
    unknown = set(toleration) - _TOLERATION_FIELDS
    if unknown:
        raise InvalidValueError(_join(path, sorted(unknown)[0]), "unknown toleration field")
    key = toleration.get("key") or ""
    operator = toleration.get("operator") or "Equal"
    value = toleration.get("value") or ""
    effect = toleration.get("effect") or ""
    if key:
        problem = qualified_name_problem(key)
        if problem is not None:
            raise InvalidValueError(_join(path, "key"), problem)
    elif operator != "Exists":
        raise InvalidValueError(_join(path, "operator"), "must be Exists when key is empty (which "
                                                         "tolerates every taint)")
    if operator == "Exists" and value:
        raise InvalidValueError(_join(path, "value"), "must be empty when operator is Exists")
    if operator == "Equal":
        problem = label_value_problem(value)
        if problem is not None:
            raise InvalidValueError(_join(path, "value"), problem)
    elif operator != "Exists":
        raise InvalidValueError(_join(path, "operator"), "must be Equal or Exists")
    if effect and effect not in _TAINT_EFFECTS:
        raise InvalidValueError(_join(path, "effect"),
                                f"must be one of {', '.join(_TAINT_EFFECTS)}")
    if toleration.get("tolerationSeconds") is not None and effect != "NoExecute":
        raise InvalidValueError(_join(path, "tolerationSeconds"), "may only be set when effect is "
                                                                  "NoExecute")


def check_tolerations(tolerations: Sequence[Mapping[str, Any]]) -> None:
    for index, toleration in enumerate(tolerations):
        check_toleration(toleration, f"[{index}]")


# --- affinity ----------------------------------------------------------------------------

_NODE_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")
_LABEL_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _check_requirement(requirement: Mapping[str, Any], path: str,
                       operators: Sequence[str]) -> None:
    key = requirement.get("key") or ""
    problem = qualified_name_problem(key) if key else "must not be empty"
    if problem is not None:
        raise InvalidValueError(_join(path, "key"), problem)
    operator = requirement.get("operator")
    values = requirement.get("values") or []
    if operator not in operators:
        raise InvalidValueError(_join(path, "operator"), f"must be one of {', '.join(operators)}")
    if operator in ("In", "NotIn") and not values:
        raise InvalidValueError(_join(path, "values"), f"must not be empty for operator {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise InvalidValueError(_join(path, "values"), f"must be empty for operator {operator}")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not re.fullmatch(r"-?[0-9]+",
                                                                         str(values[0]))):
        raise InvalidValueError(_join(path, "values"), f"must be a single integer for operator "
                                                       f"{operator}")


def _check_node_selector_term(term: Mapping[str, Any], path: str) -> None:
    for index, requirement in enumerate(term.get("matchExpressions") or []):
        _check_requirement(requirement, f"{_join(path, 'matchExpressions')}[{index}]",
                           _NODE_OPERATORS)
    for index, requirement in enumerate(term.get("matchFields") or []):
        if requirement.get("key") != "metadata.name":
            raise InvalidValueError(f"{_join(path, 'matchFields')}[{index}].key",
                                    "only metadata.name is supported")


def _check_weight(item: Mapping[str, Any], path: str) -> None:
    weight = item.get("weight")
    if not isinstance(weight, int) or isinstance(weight, bool) or not 1 <= weight <= 100:
        raise InvalidValueError(_join(path, "weight"), "must be an integer from 1 to 100")


def _check_node_affinity(node: Mapping[str, Any], path: str) -> None:
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is not None:
        terms = required.get("nodeSelectorTerms") or []
        terms_path = _join(_join(path, "requiredDuringSchedulingIgnoredDuringExecution"),
                           "nodeSelectorTerms")
        if not terms:
            raise InvalidValueError(terms_path, "must have at least one term")
        for index, term in enumerate(terms):
            _check_node_selector_term(term, f"{terms_path}[{index}]")
    preferred_path = _join(path, "preferredDuringSchedulingIgnoredDuringExecution")
    for index, item in enumerate(node.get("preferredDuringSchedulingIgnoredDuringExecution")
                                 or []):
        item_path = f"{preferred_path}[{index}]"
        _check_weight(item, item_path)
        _check_node_selector_term(item.get("preference") or {}, _join(item_path, "preference"))


def _check_pod_affinity_term(term: Mapping[str, Any], path: str) -> None:
    topology_key = term.get("topologyKey") or ""
    problem = qualified_name_problem(topology_key) if topology_key else "must not be empty"
    if problem is not None:
        raise InvalidValueError(_join(path, "topologyKey"), problem)
    for selector_field in ("labelSelector", "namespaceSelector"):
        selector = term.get(selector_field) or {}
        selector_path = _join(path, selector_field)
        try:
            check_label_map(selector.get("matchLabels") or {})
        except InvalidValueError as error:
            raise InvalidValueError(_join(selector_path, "matchLabels") + error.path,
                               error.message) from None
        for index, requirement in enumerate(selector.get("matchExpressions") or []):
            _check_requirement(requirement,
                               f"{_join(selector_path, 'matchExpressions')}[{index}]",
                               _LABEL_SELECTOR_OPERATORS)


def _check_pod_affinity(pod: Mapping[str, Any], path: str) -> None:
    required_path = _join(path, "requiredDuringSchedulingIgnoredDuringExecution")
    for index, term in enumerate(pod.get("requiredDuringSchedulingIgnoredDuringExecution")
                                 or []):
        _check_pod_affinity_term(term, f"{required_path}[{index}]")
    preferred_path = _join(path, "preferredDuringSchedulingIgnoredDuringExecution")
    for index, item in enumerate(pod.get("preferredDuringSchedulingIgnoredDuringExecution")
                                 or []):
        item_path = f"{preferred_path}[{index}]"
        _check_weight(item, item_path)
        _check_pod_affinity_term(item.get("podAffinityTerm") or {},
                                 _join(item_path, "podAffinityTerm"))


def check_affinity(affinity: Mapping[str, Any]) -> None:
    """A core/v1 Affinity: the semantic rules the API server applies to pods."""
    unknown = set(affinity) - {"nodeAffinity", "podAffinity", "podAntiAffinity"}
    if unknown:
        raise InvalidValueError(_join("", sorted(unknown)[0]),
                                "unknown field; use nodeAffinity, podAffinity or podAntiAffinity")
    if affinity.get("nodeAffinity") is not None:
        _check_node_affinity(affinity["nodeAffinity"], ".nodeAffinity")
    for kind in ("podAffinity", "podAntiAffinity"):
        if affinity.get(kind) is not None:
            _check_pod_affinity(affinity[kind], f".{kind}")
