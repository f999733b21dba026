"""What a support bundle (`python -m manager gather`) may show: the one place that decides.

A bundle is handed to people outside the cluster, so it must hold no secret value. The rules:

- **Secrets**: name, namespace, type and key names only; the values are learned (below) and
  never written.
- **Server bookkeeping that can carry data**: `metadata.managedFields` and the
  `kubectl.kubernetes.io/last-applied-configuration` annotation (a whole earlier object, a
  Secret's data included) are dropped from every object.
- **Environment variables** (`env` of containers, `overrideEnv` of the ExternalSecretsConfig):
  a `valueFrom` reference is kept (it names a Secret key, it holds no value); a literal
  `value` is kept only for the variables the operator itself sets or reads
  (`KEPT_ENV_NAMES`, URLs without credentials). Every other literal value is replaced: its
  name says nothing reliable about it (`overrideEnv` takes any name), and a support case
  rarely needs it.
- **URLs anywhere** (specs, arguments, messages, logs): `scheme://user:password@` loses its
  user information.
- **Text** (logs, Events, the plan, metrics): besides URL credentials, PEM private keys,
  bearer tokens and JWTs are replaced, and so is every value learned from the objects above
  (Secret values, replaced env values, URL passwords), also base64-encoded: an operand that
  prints a value it read from a Secret does not leak it. Values shorter than
  `MIN_LEARNED_LENGTH` are not learned (replacing "true" everywhere would ruin the logs).
"""

from __future__ import annotations

import base64
import binascii
import copy
import re
from typing import Any
from urllib.parse import unquote

from manager.render.context import PROXY_VARIABLES

REDACTED = "<redacted>"
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
MIN_LEARNED_LENGTH = 6

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
ENV_LIST_KEYS = frozenset({"env", "overrideEnv"})

_SCHEME = r"(?P<scheme>\b[A-Za-z][A-Za-z0-9+.-]*://)"
# The authority up to its last "@" (a password may hold "@"), then a password holding "/".
_USERINFO = (re.compile(_SCHEME + r"(?P<info>[^\s/?#\"'<>]*)@"),
             re.compile(_SCHEME + r"(?P<info>[^\s/?#@\"'<>]*:[^\s@\"'<>]*)@"))
_PRIVATE_KEY = re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----",
                          re.DOTALL)
_BEARER = re.compile(r"(?i)\b(bearer\s+)[A-Za-z0-9._~+/=-]{8,}")
_JWT = re.compile(r"\beyJ[A-Za-z0-9_-]{4,}\.eyJ[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*")


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

    def learn(self, value: str) -> None:
        if len(value) >= MIN_LEARNED_LENGTH:
            self.learned.add(value)

    def text(self, text: str) -> str:
        """`text` without URL credentials, private keys, tokens or any learned value."""
        for value in url_secrets(text):
            self.learn(value)
        text = strip_url_credentials(text)
        text = _PRIVATE_KEY.sub(REDACTED, text)
        text = _BEARER.sub(lambda m: m[1] + REDACTED, text)
        text = _JWT.sub(REDACTED, text)
        for value in sorted(self._forms(), key=len, reverse=True):  # longest first
            text = text.replace(value, REDACTED)
        return text

    def _forms(self) -> set[str]:
        forms = set(self.learned)
        for value in self.learned:
            encoded = base64.b64encode(value.encode()).decode()
            forms.update({encoded, encoded.rstrip("=")})
        return {form for form in forms if len(form) >= MIN_LEARNED_LENGTH}

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
        for encoded in data.values():
            self.learn(str(encoded))
            self.learn(_decoded(str(encoded)))
        for value in string_data.values():
            self.learn(str(value))
        summary_meta = {key: meta[key] for key in ("name", "namespace", "labels", "ownerReferences",
                                                     "creationTimestamp") if key in meta}
        annotations = {key: value for key, value in (meta.get("annotations") or {}).items()
                       if key != LAST_APPLIED}
        if annotations:
            summary_meta["annotations"] = annotations
        return dict(self._walk({"apiVersion": "v1", "kind": "Secret", "metadata": summary_meta,
                                "type": secret.get("type", "Opaque"),
                                "keys": sorted({*data, *string_data})}))

    def _walk(self, value: Any, key: str = "") -> Any:
        if isinstance(value, dict):
            return {k: self._walk(v, k) for k, v in value.items()}
        if isinstance(value, list):
            if key in ENV_LIST_KEYS:
                return [self._env(item) for item in value]
            return [self._walk(item) for item in value]
        if isinstance(value, str):
            for secret in url_secrets(value):
                self.learn(secret)
            return strip_url_credentials(value)
        return value

    def _env(self, entry: Any) -> Any:
        if not isinstance(entry, dict) or "value" not in entry:
            return self._walk(entry)
        if entry.get("name") in KEPT_ENV_NAMES:
            return self._walk(entry)
        self.learn(str(entry["value"]))
        return {**self._walk({k: v for k, v in entry.items() if k != "value"}),
                "value": REDACTED}


def _decoded(encoded: str) -> str:
    try:
        return base64.b64decode(encoded, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""
