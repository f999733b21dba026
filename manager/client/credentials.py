"""How the operator reaches and authenticates to the API server, without a client library.

`load_credentials(kubeconfig)` reads, in this order: the file given, `$KUBECONFIG` (files
separated by ":", merged first-wins as kubectl does), `~/.kube/config`, and finally the
in-cluster service account. It supports what clusters hand out in practice:

- kubeconfig contexts, clusters and users; paths relative to the kubeconfig file;
- server CA (file or inline data, or `insecure-skip-tls-verify`), TLS server name, proxy URL;
- bearer tokens (inline or `tokenFile`), client certificates (files or inline data);
- exec plugins (`client.authentication.k8s.io`, as cloud kubeconfigs use), cached until the
  credential's expiration;
- the in-cluster ServiceAccount token, which the kubelet rotates (bound tokens are replaced
  about hourly): the file is read again whenever it changes.

Every request asks `authorization()` for its header; after a 401 the caller calls
`invalidate()` and retries once, so a rotated or revoked credential is fetched again instead
of failing until restart. Private keys from inline data only pass through a private
temporary file while the TLS context loads them.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
EXEC_TIMEOUT_SECONDS = 60.0
EXPIRY_MARGIN_SECONDS = 10.0


class CredentialsError(Exception):
    """No usable configuration; the message says what is wrong and how to fix it."""


@dataclass(frozen=True)
class ClientCertificate:
    certificate: bytes  # PEM
    key: bytes  # PEM


@dataclass
class ExecPlugin:
    """A `users[].user.exec` entry: a command that prints an ExecCredential."""

    command: str
    args: list[str]
    env: dict[str, str]
    api_version: str
    cluster_info: dict[str, Any] | None
    _cached: dict[str, Any] | None = None
    _expires: float = 0.0

    async def credential(self) -> dict[str, Any]:
        """The plugin's `status` (token or client certificate), run again once expired."""
        if self._cached is not None and time.time() < self._expires:
            return self._cached
        spec: dict[str, Any] = {"interactive": False}
        if self.cluster_info is not None:
            spec["cluster"] = self.cluster_info
        info = {"apiVersion": self.api_version, "kind": "ExecCredential", "spec": spec}
        environment = {**os.environ, **self.env, "KUBERNETES_EXEC_INFO": json.dumps(info)}
        try:
            process = await asyncio.create_subprocess_exec(
                self.command, *self.args, env=environment, stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
            async with asyncio.timeout(EXEC_TIMEOUT_SECONDS):  # not wait_for: gh-86296
                out, err = await process.communicate()
        except (OSError, TimeoutError) as error:
            raise CredentialsError(f"exec credential plugin {self.command!r} failed to run: "
                                   f"{error}") from None
        if process.returncode != 0:
            raise CredentialsError(f"exec credential plugin {self.command!r} exited with "
                                   f"{process.returncode}: {err.decode(errors='replace')[:300]}")
        status = (json.loads(out) if out.strip() else {}).get("status") or {}
        if not status.get("token") and not status.get("clientCertificateData"):
            raise CredentialsError(f"exec credential plugin {self.command!r} returned neither a "
                                   "token nor a client certificate")
        self._cached = status
        self._expires = _expiry(status.get("expirationTimestamp"))
        return status

    def invalidate(self) -> None:
        self._cached = None


def _expiry(timestamp: str | None) -> float:
    if not timestamp:
        return float("inf")
    moment = datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()
    return moment - EXPIRY_MARGIN_SECONDS


@dataclass
class TokenFile:
    """A token kept in a file that is replaced while we run (in-cluster, `tokenFile`)."""

    path: Path
    _token: str = ""
    _seen: tuple[int, int] = (0, 0)

    def token(self, *, reread: bool = False) -> str:
        stat = self.path.stat()
        if reread or (stat.st_mtime_ns, stat.st_size) != self._seen:
            self._token = self.path.read_text().strip()
            self._seen = (stat.st_mtime_ns, stat.st_size)
        return self._token


@dataclass
class Credentials:
    """Where the API server is and how to prove who we are to it."""

    server: str
    ca_file: Path | None = None
    ca_data: bytes | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy: str | None = None
    token: str | None = None
    token_file: TokenFile | None = None
    certificate: ClientCertificate | None = None
    exec_plugin: ExecPlugin | None = None
    source: str = ""
    """Where this came from, for messages: a kubeconfig path and context, or in-cluster."""
    _context: ssl.SSLContext | None = field(default=None, repr=False)
    _exec_certificate: bytes | None = field(default=None, repr=False)

    async def authorization(self) -> str | None:
        """The Authorization header value for the next request, if tokens are used."""
        if self.exec_plugin is not None:
            token = (await self.exec_plugin.credential()).get("token")
            return f"Bearer {token}" if token else None
        if self.token_file is not None:
            return f"Bearer {self.token_file.token()}"
        return f"Bearer {self.token}" if self.token else None

    async def ssl_context(self) -> ssl.SSLContext:
        """The TLS context: our CA, and a client certificate when one is used (an exec
        plugin may hand out a new one, so the context follows it)."""
        certificate = self.certificate
        if self.exec_plugin is not None:
            status = await self.exec_plugin.credential()
            if status.get("clientCertificateData"):
                pem = status["clientCertificateData"].encode()
                if self._context is None or pem != self._exec_certificate:
                    self._context, self._exec_certificate = None, pem
                certificate = ClientCertificate(pem, status["clientKeyData"].encode())
        if self._context is None:
            self._context = self._build_context(certificate)
        return self._context

    def _build_context(self, certificate: ClientCertificate | None) -> ssl.SSLContext:
        context = ssl.create_default_context(
            cafile=str(self.ca_file) if self.ca_file else None,
            cadata=self.ca_data.decode() if self.ca_data else None)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if certificate is not None:
            _load_certificate(context, certificate)
        return context

    def invalidate(self) -> None:
        """After a 401: fetch the credential again on the next request."""
        if self.exec_plugin is not None:
            self.exec_plugin.invalidate()
        if self.token_file is not None:
            self.token_file.token(reread=True)

    @property
    def expires(self) -> float | None:
        """When a rotating credential should be fetched again (kopf's login asks)."""
        if self.exec_plugin is not None and self.exec_plugin._cached is not None:
            return self.exec_plugin._expires
        return None


def _load_certificate(context: ssl.SSLContext, certificate: ClientCertificate) -> None:
    """`load_cert_chain` reads only files: a private directory for the moment it reads."""
    with tempfile.TemporaryDirectory(prefix="eso-operator-tls-") as directory:
        cert, key = Path(directory) / "tls.crt", Path(directory) / "tls.key"
        cert.write_bytes(certificate.certificate)
        key.touch(mode=0o600)
        key.write_bytes(certificate.key)
        context.load_cert_chain(cert, key)


# --- loading ----------------------------------------------------------------------------------


def load_credentials(kubeconfig: str | os.PathLike[str] | None = None,
                     environ: Mapping[str, str] | None = None) -> Credentials:
    """From `kubeconfig`, else $KUBECONFIG, else ~/.kube/config, else in-cluster."""
    environ = os.environ if environ is None else environ
    if kubeconfig:
        return from_kubeconfig([Path(kubeconfig)])
    if environ.get("KUBECONFIG"):
        return from_kubeconfig([Path(p) for p in environ["KUBECONFIG"].split(":") if p])
    default = Path.home() / ".kube" / "config"
    if default.exists():
        return from_kubeconfig([default])
    if environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster(environ)
    raise CredentialsError(
        "no Kubernetes configuration: pass --kubeconfig, set KUBECONFIG, create "
        "~/.kube/config, or run in a pod (in-cluster service account)")


def in_cluster(environ: Mapping[str, str], directory: Path = SERVICE_ACCOUNT_DIR,
               ) -> Credentials:
    host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
    if not host or not port:
        raise CredentialsError("in-cluster configuration needs KUBERNETES_SERVICE_HOST and "
                               "KUBERNETES_SERVICE_PORT (set by the kubelet in every pod)")
    token = directory / "token"
    if not token.exists():
        raise CredentialsError(f"in-cluster configuration: no service account token at {token} "
                               "(automountServiceAccountToken must not be false)")
    host = f"[{host}]" if ":" in host else host
    return Credentials(f"https://{host}:{port}", ca_file=directory / "ca.crt",
                       token_file=TokenFile(token), source="in-cluster service account")


def _read_kubeconfig(paths: list[Path]) -> tuple[dict[str, Any], dict[str, Path]]:
    """Merged kubeconfig (first definition of a name wins, as kubectl merges) and the
    directory each cluster or user entry came from (its relative paths start there)."""
    merged: dict[str, Any] = {"clusters": {}, "users": {}, "contexts": {}}
    origin: dict[str, Path] = {}
    for path in paths:
        if not path.exists():
            continue
        try:
            document = yaml.safe_load(path.read_text()) or {}
        except (OSError, yaml.YAMLError) as error:
            raise CredentialsError(f"cannot read kubeconfig {path}: {error}") from None
        if not isinstance(document, dict):
            raise CredentialsError(f"kubeconfig {path} is not a YAML mapping")
        if merged.get("current-context") is None:
            merged["current-context"] = document.get("current-context")
        for section, key in (("clusters", "cluster"), ("users", "user"),
                             ("contexts", "context")):
            for entry in document.get(section) or []:
                name = entry.get("name")
                if name is not None and name not in merged[section]:
                    merged[section][name] = entry.get(key) or {}
                    origin[f"{section}/{name}"] = path.parent
    if not origin:
        found = [str(path) for path in paths if path.exists()]
        if found:
            raise CredentialsError(f"kubeconfig {', '.join(found)} defines no cluster, user or "
                                   "context")
        raise CredentialsError(f"kubeconfig not found: {', '.join(map(str, paths))}")
    return merged, origin


def from_kubeconfig(paths: list[Path], context: str | None = None) -> Credentials:
    merged, origin = _read_kubeconfig(paths)
    name = context or merged.get("current-context")
    where = ":".join(map(str, paths))
    if not name or name not in merged["contexts"]:
        raise CredentialsError(f"kubeconfig {where}: no current context (set one with "
                               "`kubectl config use-context`)")
    selected = merged["contexts"][name]
    cluster_name, user_name = selected.get("cluster"), selected.get("user")
    if cluster_name not in merged["clusters"]:
        raise CredentialsError(f"kubeconfig {where}: context {name!r} names cluster "
                               f"{cluster_name!r}, which is not defined")
    cluster = merged["clusters"][cluster_name]
    if not cluster.get("server"):
        raise CredentialsError(f"kubeconfig {where}: cluster {cluster_name!r} has no server")
    base = origin[f"clusters/{cluster_name}"]
    credentials = Credentials(
        str(cluster["server"]).rstrip("/"),
        ca_file=_path(base, cluster.get("certificate-authority")),
        ca_data=_data(cluster.get("certificate-authority-data")),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name"), proxy=cluster.get("proxy-url"),
        source=f"kubeconfig {where}, context {name}")
    user = merged["users"].get(user_name) or {}
    _apply_user(credentials, user, origin.get(f"users/{user_name}", base), cluster)
    return credentials


def _apply_user(credentials: Credentials, user: dict[str, Any], base: Path,
                cluster: dict[str, Any]) -> None:
    if "auth-provider" in user:
        raise CredentialsError(f"{credentials.source}: the legacy auth-provider "
                               f"{user['auth-provider'].get('name')!r} is not supported; use "
                               "an exec credential plugin (kubectl's replacement for it)")
    if user.get("token"):
        credentials.token = str(user["token"])
    elif user.get("tokenFile"):
        credentials.token_file = TokenFile(_path(base, user["tokenFile"]) or Path())
    cert = _data(user.get("client-certificate-data")) or _file(base, user.get("client-certificate"))
    key = _data(user.get("client-key-data")) or _file(base, user.get("client-key"))
    if cert and key:
        credentials.certificate = ClientCertificate(cert, key)
    plugin = user.get("exec")
    if plugin:
        info = None
        if plugin.get("provideClusterInfo"):
            info = {"server": cluster.get("server"),
                    "certificate-authority-data": cluster.get("certificate-authority-data"),
                    "insecure-skip-tls-verify": bool(cluster.get("insecure-skip-tls-verify"))}
        command = str(plugin.get("command", ""))
        if "/" in command and not command.startswith("/"):  # relative to the kubeconfig
            command = str(base / command)
        credentials.exec_plugin = ExecPlugin(
            command, [str(a) for a in plugin.get("args") or []],
            {str(e["name"]): str(e["value"]) for e in plugin.get("env") or []},
            str(plugin.get("apiVersion") or "client.authentication.k8s.io/v1"), info)


def _path(base: Path, value: str | None) -> Path | None:
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _file(base: Path, value: str | None) -> bytes | None:
    path = _path(base, value)
    return path.read_bytes() if path else None


def _data(value: str | None) -> bytes | None:
    return base64.b64decode(value) if value else None
