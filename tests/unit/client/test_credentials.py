"""Reading kubeconfigs and in-cluster credentials (manager.client.credentials), file by file."""

from __future__ import annotations

import base64
import json
import os
import ssl
import stat
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.client.credentials import (
    CredentialsError,
    in_cluster,
    load_credentials,
)


def write_kubeconfig(path: Path, *, user: dict[str, Any], cluster: dict[str, Any] | None = None,
                     context: str = "ctx", current: str | None = "ctx") -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config",
        "clusters": [{"name": "c", "cluster": cluster or {"server": "https://example.test:6443"}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
        **({"current-context": current} if current else {})}))
    return path


async def test_a_bearer_token_and_inline_ca(tmp_path: Path) -> None:
    ca = base64.b64encode(b"not a real CA").decode()
    path = write_kubeconfig(tmp_path / "config", user={"token": "abc"},
                            cluster={"server": "https://example.test:6443/",
                                     "certificate-authority-data": ca})
    credentials = load_credentials(path)
    assert credentials.server == "https://example.test:6443"
    assert credentials.ca_data == b"not a real CA"
    assert await credentials.authorization() == "Bearer abc"
    assert "context ctx" in credentials.source


def test_relative_paths_start_at_the_kubeconfig(tmp_path: Path) -> None:
    (tmp_path / "pki").mkdir()
    (tmp_path / "pki" / "client.crt").write_bytes(b"CERT")
    (tmp_path / "pki" / "client.key").write_bytes(b"KEY")
    path = write_kubeconfig(tmp_path / "config",
                            user={"client-certificate": "pki/client.crt",
                                  "client-key": "pki/client.key"},
                            cluster={"server": "https://x:1", "certificate-authority": "pki/ca"})
    credentials = load_credentials(path)
    assert credentials.ca_file == tmp_path / "pki" / "ca"
    assert credentials.certificate is not None
    assert credentials.certificate.certificate == b"CERT"
    assert credentials.certificate.key == b"KEY"


def test_kubeconfig_files_merge_first_wins(tmp_path: Path) -> None:
    first = write_kubeconfig(tmp_path / "a", user={"token": "first"}, current=None)
    second = write_kubeconfig(tmp_path / "b", user={"token": "second"}, current="ctx")
    credentials = load_credentials(environ={"KUBECONFIG": f"{first}:{second}"})
    assert credentials.token == "first"  # the user "u" of the first file, the context of b


@pytest.mark.parametrize(("change", "message"), [
    ({"current": None}, "no current context"),
    ({"context": "other"}, "no current context"),
])
def test_unusable_kubeconfigs_say_what_to_fix(tmp_path: Path, change: dict[str, Any],
                                              message: str) -> None:
    path = write_kubeconfig(tmp_path / "config", user={"token": "t"}, **change)
    with pytest.raises(CredentialsError, match=message):
        load_credentials(path)


def test_a_missing_kubeconfig_is_named(tmp_path: Path) -> None:
    with pytest.raises(CredentialsError, match="kubeconfig not found"):
        load_credentials(tmp_path / "nope")


def test_legacy_auth_providers_are_refused_with_the_replacement(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", user={"auth-provider": {"name": "gcp"}})
    with pytest.raises(CredentialsError, match="exec credential plugin"):
        load_credentials(path)


def test_without_any_configuration_the_error_lists_the_ways(tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch,
                                                          ) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(CredentialsError, match="pass --kubeconfig, set KUBECONFIG"):
        load_credentials(environ={})


async def test_a_rotated_in_cluster_token_is_used_at_once(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("first\n")
    (tmp_path / "ca.crt").write_text("")
    credentials = in_cluster({"KUBERNETES_SERVICE_HOST": "fd00::1",
                              "KUBERNETES_SERVICE_PORT": "443"}, tmp_path)
    assert credentials.server == "https://[fd00::1]:443"
    assert await credentials.authorization() == "Bearer first"
    (tmp_path / "token").write_text("second-and-longer\n")  # the kubelet replaces the file
    assert await credentials.authorization() == "Bearer second-and-longer"


async def test_an_exec_plugin_runs_once_until_its_credential_expires(tmp_path: Path) -> None:
    counter = tmp_path / "runs"
    plugin = tmp_path / "plugin.sh"
    plugin.write_text(
        "#!/bin/sh\n"
        f"echo run >> {counter}\n"
        'n=$(wc -l < "' + str(counter) + '")\n'
        'echo "{\\"apiVersion\\": \\"client.authentication.k8s.io/v1\\", '
        '\\"kind\\": \\"ExecCredential\\", \\"status\\": {\\"token\\": \\"t$n\\", '
        '\\"expirationTimestamp\\": \\"2999-01-01T00:00:00Z\\"}}"\n'
        'echo "$KUBERNETES_EXEC_INFO" > ' + str(tmp_path / "info") + "\n")
    plugin.chmod(plugin.stat().st_mode | stat.S_IEXEC)
    path = write_kubeconfig(tmp_path / "config", user={"exec": {
        "apiVersion": "client.authentication.k8s.io/v1", "command": "./plugin.sh",
        "provideClusterInfo": True, "env": [{"name": "EXTRA", "value": "1"}]}})
    credentials = load_credentials(path)
    assert await credentials.authorization() == "Bearer t1"
    assert await credentials.authorization() == "Bearer t1"  # cached: not expired
    info = json.loads((tmp_path / "info").read_text())
    assert info["spec"]["cluster"]["server"] == "https://example.test:6443"
    assert info["spec"]["interactive"] is False
    credentials.invalidate()  # a 401: the plugin runs again
    assert await credentials.authorization() == "Bearer t2"


async def test_a_failing_exec_plugin_is_a_clear_error(tmp_path: Path) -> None:
    path = write_kubeconfig(tmp_path / "config", user={"exec": {"command": "false"}})
    with pytest.raises(CredentialsError, match="exited with 1"):
        await load_credentials(path).authorization()


def test_an_inline_client_key_does_not_stay_on_disk(tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The key passes through a private temporary directory that is gone afterwards (the TLS
    load itself fails here: the data is not a real key)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    data = base64.b64encode(b"not a key").decode()
    path = write_kubeconfig(tmp_path / "config", user={"client-certificate-data": data,
                                                       "client-key-data": data})
    credentials = load_credentials(path)
    with pytest.raises(ssl.SSLError):
        credentials._build_context(credentials.certificate)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith("eso-operator-tls-")]
    assert os.listdir(tmp_path) == ["config"]
