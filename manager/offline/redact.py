"""What a support bundle (`python -m manager gather`) may show: the one place that decides.

A bundle is handed to people outside the cluster, so it must hold no secret value. A value is
hidden for where it is (by position) or for what it looks like (by shape), and every value
hidden either way is learned and replaced in all text of the bundle too. The rules:

By position, in objects:

- **Secrets**: name, namespace, labels, type and key names only; the values are learned
  (but for the `namespace` of a service-account token Secret: its own) and never written.
  Annotation values are `<redacted>` and learned, except those of `KEPT_SECRET_ANNOTATIONS`
  (the ServiceAccount of a token, the Service or Certificate a serving certificate is for:
  names, uids, times and host names).
- **Server bookkeeping that can carry data**: `metadata.managedFields` and the
  `kubectl.kubernetes.io/last-applied-configuration` annotation (a whole earlier object, a
  Secret's data included) are dropped from every object.
- **Environment variables** (`env` of containers, `overrideEnv` of the ExternalSecretsConfig):
  a `valueFrom` reference is kept (it names a Secret key, it holds no value); a literal
  `value` is kept only for the variables the operator itself sets or reads
  (`KEPT_ENV_NAMES`, URLs without credentials). Every other literal value is replaced: its
  name says nothing reliable about it (`overrideEnv` takes any name), and a support case
  rarely needs it.
- **HTTP headers** (`httpHeaders` of probes and lifecycle hooks): every value is replaced
  (`Authorization: Basic ...`, an API key): the names are kept.
- **Command lines** (`args` and `command` of containers, `overrideArgs` of the
  ExternalSecretsConfig): the value of every flag whose name is secret-looking
  (`secret_name`) is replaced, in both forms: `--token=VALUE` (also inside one element such
  as a `sh -c` script) and `--password VALUE` as two elements (also inside a script: the
  word after the flag), where the value is the next element unless that starts with "-"
  (then the flag is taken as a switch). Other flags (`--namespace=...`, `--loglevel=...`)
  are kept.

A name is **secret-looking** when its last word (words split at "-", "_", "." and at
camelCase humps, case ignored) is one of `SECRET_WORDS` (password, passwd, passphrase, pass,
pwd, secret, token, apikey, credential(s), auth, cookie, jwt), or is "key" after one of
`KEY_QUALIFIERS` (api, access, secret, private, signing, encryption, master, account, shared,
session): `--token`, `--client-secret`, `X-Vault-Token`, `aws_secret_access_key`, `apiKey`
are; `--secret-name`, `--token-file`, `--metrics-key-file`, `--enable-secrets-caching` are
not. A value of `NOT_SECRET_VALUES` (true, false, null, ...) is kept.

By shape, in every string of an object and in all text (logs, Events, the plan, metrics):

- URL user information (`scheme://user:password@host` loses `user:password`), PEM private
  keys, JWTs (`eyJ...` with two or four dots, an empty signature included), `Bearer`
  tokens, `Basic` credentials (base64 of `user:password`), the credential of an
  `Authorization:` header whatever its scheme, Vault tokens (`hvs.`, `hvb.`, `hvr.`), AWS
  access key IDs (`AKIA...`, `ASIA...`), GitHub tokens (`ghp_`, `gho_`, `ghu_`, `ghs_`,
  `ghr_`, `github_pat_`).
- Assignments to a secret-looking name: `name=value` anywhere (`password=...`,
  `--token=...`, `?access_token=...`), `"name": "value"` with the name quoted (JSON), and
  `name: value` at the start of a line (YAML, HTTP headers); a quoted value is hidden whole.

Learned values, in all text: every value hidden above, raw, base64 (standard and URL-safe,
with and without padding) and, for URL passwords, percent-decoded, is replaced wherever it
appears: an operand that prints a value it read from a Secret does not leak it. A value of
`MIN_ANYWHERE_LENGTH` (6) characters or more is replaced anywhere; one of 4 or 5 characters
only as a whole token (not next to a letter, digit or "_": `p4ss` in `pw=p4ss,` but not in
`p4ssage`); one of 1 to 3 characters is not searched for at all and stays visible wherever
text repeats it outside the positions and shapes above (replacing "abc" or "8" everywhere
would ruin the logs). `NOT_SECRET_VALUES` are never learned.
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import unquote

from manager.render.context import PROXY_VARIABLES

REDACTED = "<redacted>"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MIN_LEARNED_LENGTH = 4  # shorter learned values are not searched for in text
MIN_ANYWHERE_LENGTH = 6  # shorter ones are replaced as whole tokens only

# Variables whose literal values the bundle shows: the operator's own (its Deployment, the
# CSV, OLM's injection) and those it renders into the operand. Proxy URLs lose credentials.
KEPT_ENV_NAMES = frozenset({
    *PROXY_VARIABLES, *(name.lower() for name in PROXY_VARIABLES),
    "RELATED_IMAGE_EXTERNAL_SECRETS", "RELATED_IMAGE_BITWARDEN_SDK_SERVER",
    "OPERAND_EXTERNAL_SECRETS_IMAGE_VERSION", "BITWARDEN_SDK_SERVER_IMAGE_VERSION",
    "OPERATOR_IMAGE_VERSION", "OPERATOR_CONDITION_NAME", "POD_NAMESPACE", "POD_NAME",
    "LEADER_ELECT", "METRICS_ADDR", "SSL_CERT_DIR",
    "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT",
})
SERVICE_ACCOUNT_TOKEN = "kubernetes.io/service-account-token"  # noqa: S105 (a type)
ENV_LIST_KEYS = frozenset({"env", "overrideEnv"})
HEADER_LIST_KEYS = frozenset({"httpHeaders"})
ARGUMENT_LIST_KEYS = frozenset({"args", "command", "overrideArgs"})
# Secret annotations set by Kubernetes, OpenShift's service CA and cert-manager whose values
# are names, uids, times or host names: shown, and not learned.
KEPT_SECRET_ANNOTATIONS = frozenset({
    "kubernetes.io/service-account.name", "kubernetes.io/service-account.uid",
    "service.beta.openshift.io/originating-service-name",
    "service.beta.openshift.io/originating-service-uid", "service.beta.openshift.io/expiry",
    "service.alpha.openshift.io/originating-service-name",
    "service.alpha.openshift.io/originating-service-uid", "service.alpha.openshift.io/expiry",
    "cert-manager.io/certificate-name", "cert-manager.io/issuer-name",
    "cert-manager.io/issuer-kind", "cert-manager.io/issuer-group", "cert-manager.io/common-name",
    "cert-manager.io/alt-names", "cert-manager.io/ip-sans", "cert-manager.io/uri-sans",
})

SECRET_WORDS = frozenset({"password", "passwd", "passphrase", "pass", "pwd", "secret", "token",
                          "apikey", "credential", "credentials", "auth", "cookie", "jwt"})
KEY_QUALIFIERS = frozenset({"api", "access", "secret", "private", "signing", "encryption",
                            "master", "account", "shared", "session"})
NOT_SECRET_VALUES = frozenset({"", "true", "false", "null", "nil", "none", "yes", "no", "on",
                               "off", "~", "[]", "{}", '""', "''"})

_SCHEME = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)"
# The authority up to its last "@" (a password may hold "@"), then a password holding "/".
_USERINFO = (re.compile(_SCHEME + r"(?P<info>[^\s/?#\"'<>]*)@"),
             re.compile(_SCHEME + r"(?P<info>[^\s/?#@\"'<>]*:[^\s@\"'<>]*)@"))
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
                          re.DOTALL)
_AUTHORIZATION = re.compile(
    r"(?i)(?P<head>\b(?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*\[?[\"']?"
    r"(?:(?:basic|bearer|digest|negotiate|token|apikey|aws4-hmac-sha256)[ \t]+)?)"
    r"(?P<value>[^\s\"',;\]<>]+)")
_BEARER = re.compile(r"(?i)\b(?P<head>bearer\s+)(?P<value>[A-Za-z0-9._~+/=-]{8,})")
_BASIC = re.compile(r"(?i)\b(?P<head>basic[ \t]+)(?P<value>[A-Za-z0-9+/]{6,}={0,2})"
                    r"(?![A-Za-z0-9+/=])")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{2,}(?:\.[A-Za-z0-9_-]*){2}(?:(?:\.[A-Za-z0-9_-]*){2})?")
_VAULT = re.compile(r"\bhv[sbr]\.[A-Za-z0-9_-]{20,}")
_AWS_KEY_ID = re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")
_GITHUB = re.compile(r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{22,})")
TOKEN_SHAPES = (_JWT, _VAULT, _AWS_KEY_ID, _GITHUB)

# Assignments: a name ending in a secret word (secret_name() decides), a separator, a value.
_NAME = (r"[A-Za-z0-9_.-]*?(?:pass(?:word|wd|phrase)?|pwd|secret|token|apikey|credentials?"
         r"|auth|cookie|jwt|key)")
_VALUE = r"""(?P<value>"[^"\n]*"|'[^'\n]*'|[^\s"'`,;&|<>(){}\[\]]+)"""
_ASSIGNMENTS = (
    re.compile(rf"(?i)(?P<head>(?<![\w.-])-{{0,2}}(?P<name>{_NAME})[ \t]*=[ \t]*){_VALUE}"),
    re.compile(rf"(?i)(?P<head>(?P<q>[\"'])(?P<name>{_NAME})(?P=q)[ \t]*:[ \t]*){_VALUE}"),
    re.compile(rf"(?im)(?P<head>^[ \t]*(?:-[ \t]+)?(?P<name>{_NAME})[ \t]*:[ \t]*){_VALUE}"),
)
# A flag and the word after it, inside one element of a command line (a shell script).
_FLAG_WORD = re.compile(r"(?<!\S)(?P<head>--?(?P<name>[A-Za-z][\w.-]*)[ \t]+)"
                        r"(?P<value>[^\s\-][^\s;&|]*)")
_FLAG = re.compile(r"--?(?P<name>[A-Za-z][\w.-]*)(?:=(?P<value>.*))?", re.DOTALL)
_WORDS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")
_WORD_CHARS = "A-Za-z0-9_"


def secret_name(name: str) -> bool:
    """Whether a flag, variable or key of this name holds a secret (the module's rule)."""
    words = [word.lower() for word in _WORDS.findall(name)]
    if not words:
        return False
    return words[-1] in SECRET_WORDS or (words[-1] == "key" and len(words) > 1
                                         and words[-2] in KEY_QUALIFIERS)


def strip_url_credentials(text: str) -> str:
    """Every `scheme://user:password@host` in `text` as `scheme://<redacted>@host`."""
    for pattern in _USERINFO:
        text = pattern.sub(lambda m: m["scheme"] + (REDACTED if m["info"] != REDACTED
                                                    else m["info"]) + "@", text)
    return text


def url_secrets(text: str) -> list[str]:
    """The user information of every URL in `text` (to be learned), raw and decoded."""
    found: list[str] = []
    for pattern in _USERINFO:
        for match in pattern.finditer(text):
            info = match["info"]
            password = info.partition(":")[2]
            found.extend(v for v in (info, password, unquote(password)) if v)
    return found


class Redactor:
    """Redacts objects and text; remembers every value it hid, to hide it in text too."""

    def __init__(self) -> None:
        self.learned: set[str] = set()
        self._compiled: tuple[int, Callable[[str], str]] | None = None  # for len(learned)

    def learn(self, value: str) -> None:
        value = value.strip()
        if (len(value) >= MIN_LEARNED_LENGTH and value.lower() not in NOT_SECRET_VALUES
                and REDACTED not in value):
            self.learned.add(value)

    def learn_all(self, value: str) -> None:
        """Learns a hidden value and what it holds by shape (the password of a Basic
        credential, a token after its scheme, an assignment's value)."""
        self.learn(value)
        self.scrub(value)

    def text(self, text: str) -> str:
        """`text` without URL credentials, private keys, tokens, secret assignments or any
        learned value."""
        return self.replace_learned(self.scrub(text))

    def scrub(self, text: str) -> str:
        """`text` with every secret found by shape replaced (and learned); learned values
        are left to `replace_learned`."""
        for value in url_secrets(text):
            self.learn(value)
        text = strip_url_credentials(text)
        text = _PRIVATE_KEY.sub(self._hide_whole, text)
        text = _AUTHORIZATION.sub(self._authorization, text)
        text = _BEARER.sub(self._bearer, text)
        text = _BASIC.sub(self._basic, text)
        for shape in TOKEN_SHAPES:
            text = shape.sub(self._hide_whole, text)
        for assignment in _ASSIGNMENTS:
            text = assignment.sub(self._assignment, text)
        return text

    def replace_learned(self, text: str) -> str:
        return self._replacer()(text)

    def _replacer(self) -> Callable[[str], str]:
        if self._compiled is None or self._compiled[0] != len(self.learned):  # only grows
            self._compiled = (len(self.learned), _replacer(self._forms()))
        return self._compiled[1]

    def _forms(self) -> set[str]:
        forms = set(self.learned)
        for value in self.learned:
            for encode in (base64.b64encode, base64.urlsafe_b64encode):
                encoded = encode(value.encode()).decode()
                forms.update({encoded, encoded.rstrip("=")})
        return {form for form in forms if len(form) >= MIN_LEARNED_LENGTH}

    def _hide_whole(self, match: re.Match[str]) -> str:
        self.learn(match[0])
        return REDACTED

    def _hide_value(self, match: re.Match[str]) -> str:
        value = match["value"]
        if REDACTED in value or value.lower() in NOT_SECRET_VALUES:
            return match[0]
        self.learn(value)
        return match["head"] + REDACTED

    def _authorization(self, match: re.Match[str]) -> str:
        self._learn_basic(match["value"])
        return self._hide_value(match)

    def _bearer(self, match: re.Match[str]) -> str:
        value = match["value"]
        if value.isalpha() and value[1:].islower():  # a word ("Bearer authentication")
            return match[0]
        return self._hide_value(match)

    def _basic(self, match: re.Match[str]) -> str:
        if not self._learn_basic(match["value"]):  # not user:password ("Basic authentication")
            return match[0]
        return self._hide_value(match)

    def _learn_basic(self, value: str) -> bool:
        """Learns `user:password` and the password if `value` is their base64."""
        decoded = _decoded(value + "=" * (-len(value) % 4))
        if ":" not in decoded:
            return False
        self.learn(decoded)
        self.learn(decoded.partition(":")[2])
        return True

    def _assignment(self, match: re.Match[str]) -> str:
        value = match["value"]
        if not secret_name(match["name"]) or not re.search("[A-Za-z0-9]", value):
            return match[0]
        if value[0] in "\"'" and len(value) >= 2:  # quoted: hide what is between the quotes
            inner = value[1:-1]
            if REDACTED in inner or inner.lower() in NOT_SECRET_VALUES:
                return match[0]
            self.learn(inner)
            return f"{match['head']}{value[0]}{REDACTED}{value[-1]}"
        return self._hide_value(match)

    def obj(self, obj: dict[str, Any]) -> dict[str, Any]:
        """A copy of a Kubernetes object (or list of objects) fit for a bundle (the rules
        above)."""
        if obj.get("kind") == "Secret":
            return self.secret(obj)
        clean = copy.deepcopy({key: value for key, value in obj.items() if key != "items"})
        meta = clean.get("metadata")
        if isinstance(meta, dict):
            meta.pop("managedFields", None)
            annotations = meta.get("annotations")
            if isinstance(annotations, dict):
                annotations.pop(LAST_APPLIED, None)
        result: dict[str, Any] = self._walk(clean)
        if "items" in obj:  # a list: its items carry no kind, as kubectl shows them
            kind = str(obj.get("kind", "")).removesuffix("List")
            result["items"] = [self.obj({"apiVersion": obj.get("apiVersion"), "kind": kind,
                                         **item}) for item in obj["items"] or []]
        return result

    def secret(self, secret: dict[str, Any]) -> dict[str, Any]:
        """A Secret as name, type and key names; its values are learned, never kept."""
        meta = secret.get("metadata") or {}
        data, string_data = secret.get("data") or {}, secret.get("stringData") or {}
        for key, encoded in data.items():
            if secret.get("type") == SERVICE_ACCOUNT_TOKEN and key == "namespace":
                continue  # the Secret's own namespace, not a secret
            self.learn(str(encoded))
            self.learn_all(_decoded(str(encoded)))
        for value in string_data.values():
            self.learn_all(str(value))
        summary_meta = {key: meta[key] for key in ("name", "namespace", "labels", "ownerReferences",
                                                     "creationTimestamp") if key in meta}
        annotations = {key: self._secret_annotation(key, value) for key, value in
                       (meta.get("annotations") or {}).items() if key != LAST_APPLIED}
        if annotations:
            summary_meta["annotations"] = annotations
        return dict(self._walk({"apiVersion": "v1", "kind": "Secret", "metadata": summary_meta,
                                "type": secret.get("type", "Opaque"),
                                "keys": sorted({*data, *string_data})}))

    def _secret_annotation(self, key: str, value: Any) -> Any:
        if key in KEPT_SECRET_ANNOTATIONS:
            return value
        self.learn_all(str(value))
        return REDACTED

    def replace_learned_in(self, value: Any) -> Any:
        """`value` (an object already redacted) with every learned value replaced in its
        strings: before it is dumped as YAML, which may fold or escape a string."""
        if isinstance(value, dict):
            return {k: self.replace_learned_in(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.replace_learned_in(item) for item in value]
        if isinstance(value, str):
            return self.replace_learned(value)
        return value

    def _walk(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self._walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return self._list(value, key)
        if isinstance(value, str):
            return self.scrub(value)
        return value

    def _list(self, items: list[Any], key: str) -> list[Any]:
        if key in ENV_LIST_KEYS:
            return [self._named_value(item, KEPT_ENV_NAMES) for item in items]
        if key in HEADER_LIST_KEYS:
            return [self._named_value(item, frozenset()) for item in items]
        if key in ARGUMENT_LIST_KEYS:
            return self._arguments(items)
        return [self._walk(item) for item in items]

    def _named_value(self, entry: Any, kept: frozenset[str]) -> Any:
        """An env entry or an HTTP header: its `value` replaced unless its name is kept."""
        if not isinstance(entry, dict) or "value" not in entry or entry.get("name") in kept:
            return self._walk(entry)
        self.learn_all(str(entry["value"]))
        return {**self._walk({k: v for k, v in entry.items() if k != "value"}),
                "value": REDACTED}

    def _arguments(self, arguments: Iterable[Any]) -> list[Any]:
        """A command line with the values of secret-looking flags replaced, in both forms."""
        shown: list[Any] = []
        value_follows = False
        for argument in arguments:
            if not isinstance(argument, str):
                shown.append(self._walk(argument))
                value_follows = False
                continue
            if value_follows and not argument.startswith("-"):
                self.learn_all(argument)
                shown.append(REDACTED)
                value_follows = False
                continue
            flag = _FLAG.fullmatch(argument)
            value_follows = bool(flag and flag["value"] is None and secret_name(flag["name"]))
            shown.append(self.scrub(_FLAG_WORD.sub(self._flag_word, argument)))
        return shown

    def _flag_word(self, match: re.Match[str]) -> str:
        if not secret_name(match["name"]):
            return match[0]
        return self._hide_value(match)


def _replacer(forms: set[str]) -> Callable[[str], str]:
    """A function replacing every form in a text: long ones anywhere, short ones as whole
    tokens; longest first. Only the forms a text holds make its pattern (a substring test is
    far quicker than a regular expression of every learned value)."""
    anywhere = sorted((f for f in forms if len(f) >= MIN_ANYWHERE_LENGTH), key=len, reverse=True)
    tokens = sorted((f for f in forms if len(f) < MIN_ANYWHERE_LENGTH), key=len, reverse=True)

    def replace(text: str) -> str:
        if found := [form for form in anywhere if form in text]:
            text = re.sub("|".join(map(re.escape, found)), REDACTED, text)
        if found := [form for form in tokens if form in text]:
            text = re.sub(f"(?<![{_WORD_CHARS}])(?:{'|'.join(map(re.escape, found))})"
                          f"(?![{_WORD_CHARS}])", REDACTED, text)
        return text
    return replace


def _decoded(encoded: str) -> str:
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""
