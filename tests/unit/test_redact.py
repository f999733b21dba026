"""manager/redact.py: what a support bundle may show."""

from __future__ import annotations

import base64
import json

import pytest

from manager.redact import REDACTED, Redactor, strip_url_credentials

SENTINEL = "s3ntinel-Value-42"
B64 = base64.b64encode(SENTINEL.encode()).decode()


def dump(obj: object) -> str:
    return json.dumps(obj)


@pytest.mark.parametrize(("url", "expected"), [
    ("http://user:pw@proxy:3128", f"http://{REDACTED}@proxy:3128"),
    ("https://user@proxy.example", f"https://{REDACTED}@proxy.example"),
    ("http://u:p@ss@proxy:3128/x", f"http://{REDACTED}@proxy:3128/x"),  # "@" in the password
    ("http://u:pa/ss@proxy:3128", f"http://{REDACTED}@proxy:3128"),  # "/" in the password
    ("dial http://proxy:3128 failed", "dial http://proxy:3128 failed"),
    ("mail me@example.com http://a.b/c@d", "mail me@example.com http://a.b/c@d"),
    ('proxy="socks5://a:b@h:1080" next', f'proxy="socks5://{REDACTED}@h:1080" next'),
])
def test_url_credentials_are_removed(url: str, expected: str) -> None:
    assert strip_url_credentials(url) == expected


def test_a_secret_keeps_name_type_and_key_names_only() -> None:
    redactor = Redactor()
    secret = {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
              "metadata": {"name": "tls", "namespace": "ns", "managedFields": [{"x": B64}],
                           "annotations": {"kubectl.kubernetes.io/last-applied-configuration":
                                           dump({"data": {"tls.key": B64}}), "keep": "me"}},
              "data": {"tls.key": B64, "tls.crt": B64}, "stringData": {"extra": SENTINEL}}
    shown = redactor.obj(secret)
    assert shown == {"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                     "metadata": {"name": "tls", "namespace": "ns",
                                  "annotations": {"keep": "me"}},
                     "keys": ["extra", "tls.crt", "tls.key"]}
    assert {SENTINEL, B64} <= redactor.learned


def test_secret_lists_are_summarised_item_by_item() -> None:
    shown = Redactor().obj({"apiVersion": "v1", "kind": "SecretList", "metadata": {},
                            "items": [{"metadata": {"name": "a"}, "data": {"k": B64}}]})
    assert shown["items"] == [{"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "a"},
                               "type": "Opaque", "keys": ["k"]}]


def container() -> dict[str, object]:
    return {"name": "c", "args": [f"--proxy=http://me:{SENTINEL}@proxy:3128"], "env": [
        {"name": "HTTPS_PROXY", "value": f"http://me:{SENTINEL}@proxy:3128"},
        {"name": "RELATED_IMAGE_EXTERNAL_SECRETS", "value": "ghcr.io/x/y:v1"},
        {"name": "SOMETHING_HARMLESS", "value": SENTINEL},
        {"name": "FROM_SECRET", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
    ]}


def test_env_values_only_for_the_operators_own_variables() -> None:
    redactor = Redactor()
    pod = redactor.obj({"kind": "Pod", "metadata": {"name": "p", "managedFields": [{}]},
                        "spec": {"containers": [container()]}})
    env = {e["name"]: e for e in pod["spec"]["containers"][0]["env"]}
    assert env["HTTPS_PROXY"]["value"] == f"http://{REDACTED}@proxy:3128"
    assert env["RELATED_IMAGE_EXTERNAL_SECRETS"]["value"] == "ghcr.io/x/y:v1"
    assert env["SOMETHING_HARMLESS"]["value"] == REDACTED
    assert env["FROM_SECRET"] == {"name": "FROM_SECRET",
                                  "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
    assert "managedFields" not in pod["metadata"]
    assert SENTINEL not in dump(pod)


def test_override_env_and_proxy_of_an_esc() -> None:
    redactor = Redactor()
    esc = redactor.obj({"kind": "ExternalSecretsConfig", "metadata": {"name": "cluster"},
                        "spec": {"appConfig": {"proxy": {
                            "httpsProxy": f"http://u:{SENTINEL}@proxy:3128"}},
                                 "controllerConfig": {"componentConfigs": [
                                     {"componentName": "Webhook", "overrideEnv": [
                                         {"name": "GOMAXPROCS", "value": SENTINEL}]}]}}})
    assert SENTINEL not in dump(esc)
    assert esc["spec"]["controllerConfig"]["componentConfigs"][0]["overrideEnv"] == [
        {"name": "GOMAXPROCS", "value": REDACTED}]


def test_text_loses_every_learned_value_and_its_base64_form() -> None:
    redactor = Redactor()
    redactor.obj({"kind": "Secret", "metadata": {"name": "s"}, "data": {"k": B64}})
    redactor.learn("abc")  # too short to be replaced everywhere
    log = (f"read {SENTINEL} and {B64} and {B64.rstrip('=')}; abc stays\n"
           "Authorization: Bearer abcdefghijklmnop\n"
           "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----\n"
           "token eyJhbGciOi.eyJzdWIiOi.c2lnbmF0dXJl\n")
    clean = redactor.text(log)
    for hidden in (SENTINEL, B64.rstrip("="), "abcdefghijklmnop", "MIIE", "eyJzdWIiOi"):
        assert hidden not in clean
    assert "abc stays" in clean
    assert clean.count(REDACTED) == 6


def test_a_password_seen_in_one_url_is_hidden_in_any_text() -> None:
    redactor = Redactor()
    redactor.obj({"kind": "ConfigMap", "data": {"p": f"https://u:{SENTINEL}%21@h"}})
    assert redactor.text(f"password was {SENTINEL}! ok") == f"password was {REDACTED} ok"
