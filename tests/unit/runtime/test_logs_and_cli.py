"""The operator's log lines and its command line as an administrator meets them: bounded
lines without secrets, a one-line error with the fix for missing or bad credentials, and a
`run --help` that lists every variable the operator reads."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from manager import cli
from manager.client.credentials import CredentialsError, load_credentials
from manager.config import OperatorEnvironment
from manager.logs import BoundedFormatter, brief, fields, without_credentials
from manager.runtime.operator import OperatorOptions, startup_settings


def _format(message: str, limit: int = 50) -> str:
    record = logging.LogRecord("manager.test", logging.WARNING, __file__, 1, message, None, None)
    return BoundedFormatter("%(levelname)s %(message)s", limit).format(record)


def test_long_log_messages_are_cut_and_say_where_the_rest_is() -> None:
    line = _format("x" * 500)
    assert line.startswith("WARNING " + "x" * 50 + "... (450 more characters")
    assert "ExternalSecretsConfig status" in line
    assert len(line) < 200
    assert _format("short") == "WARNING short"
    assert brief("y" * 300).endswith("...")
    assert len(brief("y" * 300)) == 163


def test_proxy_credentials_never_reach_the_log() -> None:
    assert without_credentials("http://user:s3cret@proxy:3128") == "http://***@proxy:3128"
    assert without_credentials("http://proxy:3128") == "http://proxy:3128"
    environment = OperatorEnvironment.from_environ({
        "HTTPS_PROXY": "http://admin:s3cret@proxy.example:3128", "NO_PROXY": ".cluster.local"})
    identity, settings = startup_settings(OperatorOptions(), environment, "https://api:6443")
    text = fields({**identity, **settings})
    assert "s3cret" not in text
    assert "HTTPS_PROXY=http://***@proxy.example:3128" in text
    assert "apiServer=https://api:6443" in text
    assert "eventsNamespace=default" in text


@pytest.mark.parametrize(("content", "problem"), [
    (None, "kubeconfig not found"),
    ("just text\n", "is not a YAML mapping"),
    ("apiVersion: v1\nkind: Config\n", "defines no cluster, user or context"),
])
def test_a_missing_or_bad_kubeconfig_is_one_line_with_the_fix(
        tmp_path: Path, content: str | None, problem: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    with pytest.raises(CredentialsError, match=problem):
        load_credentials(str(path))
    monkeypatch.setenv("KUBECONFIG", str(path))
    assert cli.main(["uninstall", "--operand"]) == 2
    err = capsys.readouterr().err
    assert problem in err
    assert err.count("\n") == 1
    assert "--kubeconfig" in err
    assert "Traceback" not in err


def test_no_kubeconfig_outside_a_pod_is_one_line_with_the_fix(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(CredentialsError, match=r"^no Kubernetes configuration: .*--kubeconfig"):
        load_credentials(None)


@pytest.mark.parametrize("command", [["run"], ["uninstall", "--operand"],
                                     ["plan", "-f", "samples/esc-default.yaml"]])
def test_commands_that_need_a_cluster_say_so_in_one_line(
        command: list[str], monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert cli.main(command) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: kubeconfig not found: /nonexistent/kubeconfig")
    assert "--kubeconfig" in err
    assert err.count("\n") == 1
    assert "Traceback" not in err


def test_render_needs_no_cluster(monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    assert cli.main(["render", "-f", "samples/esc-default.yaml"]) == 0
    assert "kind: Deployment" in capsys.readouterr().out


def test_run_help_lists_its_flags_and_every_variable_it_reads(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["run", "--help"])
    text = capsys.readouterr().out
    for flag in ("--kubeconfig", "--liveness", "--resync-seconds", "--verbose"):
        assert flag in text
    source = "\n".join(Path(module).read_text() for module in (
        "manager/config/types.py", "manager/client/kube.py", "manager/client/credentials.py",
        "manager/reporting/events.py", "manager/runtime/operator.py",
        "manager/runtime/reconciler.py", "manager/sidetasks/esm_default.py"))
    read = set(re.findall(r"""environ(?:\.get)?\(?\[?["']([A-Z_]+)["']""", source))
    read |= set(re.findall(r"""image\("([A-Z_]+)\"""", source))
    assert read >= {"RELATED_IMAGE_EXTERNAL_SECRETS", "POD_NAMESPACE", "HTTP_PROXY"}
    for variable in read:
        assert variable in text, variable
