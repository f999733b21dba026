"""manager/offline/redact.py: what a support bundle may show; and manager/offline/gather.py: what
it collects in the operator's namespace, its must-gather `version` file and the log window it
asks the log API for."""

from __future__ import annotations

import asyncio
import base64
import json
import re
from datetime import UTC, datetime
from typing import cast

import pytest
import yaml

from manager.client.kube import ApiError, Kube
from manager.names import OPERATOR_DEPLOYMENT
from manager.offline.gather import LOG_TAIL_LINES, Bundle, gather
from manager.offline.logwindow import LogWindow
from manager.offline.redact import REDACTED, SERVICE_ACCOUNT_TOKEN, Redactor, strip_url_credentials
from manager.olm import identity

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
                                  "annotations": {"keep": REDACTED}},
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


# By position: command lines, HTTP headers, Secret annotations.

def pod_with(container_: dict[str, object]) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", **container_}]}}


def test_secret_looking_flags_lose_their_values_in_both_forms() -> None:
    redactor = Redactor()
    shown = redactor.obj(pod_with({
        "command": ["/app", "--password", "p4ss", "--db-password", SENTINEL],
        "args": ["--namespace=ns", "--loglevel=debug", f"--token={SENTINEL}1", "--api-key",
                 f"{SENTINEL}2", "--metrics-secure", "--metrics-key-file=/tls/tls.key",
                 "--client-secret", "--secret-name=webhook-tls", "--enable-secrets-caching=true",
                 f"sh -c 'exec app --auth-token {SENTINEL}3 --secret-name x'",
                 f"--set=db.password={SENTINEL}4"]}))["spec"]["containers"][0]
    assert shown["command"] == ["/app", "--password", REDACTED, "--db-password", REDACTED]
    assert shown["args"] == [
        "--namespace=ns", "--loglevel=debug", f"--token={REDACTED}", "--api-key", REDACTED,
        "--metrics-secure", "--metrics-key-file=/tls/tls.key",
        "--client-secret", "--secret-name=webhook-tls",  # a switch: the next is a flag
        "--enable-secrets-caching=true", f"sh -c 'exec app --auth-token {REDACTED} "
        "--secret-name x'", f"--set=db.password={REDACTED}"]
    # Learned: gone from any text too, the short one as a whole token.
    assert redactor.text(f"{SENTINEL}1 {SENTINEL}2 {SENTINEL}3 {SENTINEL}4 p4ss") == " ".join(
        [REDACTED] * 5)


def test_override_args_are_a_command_line_too() -> None:
    esc = Redactor().obj({"kind": "ExternalSecretsConfig", "spec": {"controllerConfig": {
        "componentConfigs": [{"componentName": "Webhook", "overrideArgs": [
            "--vault-token", SENTINEL, "--loglevel=debug"]}]}}})
    assert esc["spec"]["controllerConfig"]["componentConfigs"][0]["overrideArgs"] == [
        "--vault-token", REDACTED, "--loglevel=debug"]


def test_every_http_header_value_is_hidden() -> None:
    redactor = Redactor()
    basic = base64.b64encode(f"probe:{SENTINEL}".encode()).decode()
    probe = {"httpGet": {"path": "/healthz", "port": 8080, "httpHeaders": [
        {"name": "Authorization", "value": f"Basic {basic}"},
        {"name": "X-Custom", "value": f"{SENTINEL}x"}]}}
    shown = redactor.obj(pod_with({"readinessProbe": probe, "lifecycle": {
        "postStart": {"httpGet": {"port": 1, "httpHeaders": [{"name": "A", "value": "b"}]}}}}))
    container_ = shown["spec"]["containers"][0]
    assert container_["readinessProbe"]["httpGet"] == {
        "path": "/healthz", "port": 8080, "httpHeaders": [
            {"name": "Authorization", "value": REDACTED}, {"name": "X-Custom", "value": REDACTED}]}
    assert container_["lifecycle"]["postStart"]["httpGet"]["httpHeaders"] == [
        {"name": "A", "value": REDACTED}]
    assert redactor.text(f"{basic} {SENTINEL} {SENTINEL}x") == " ".join([REDACTED] * 3)


def test_secret_annotation_values_are_hidden_and_learned() -> None:
    redactor = Redactor()
    shown = redactor.obj({"apiVersion": "v1", "kind": "Secret", "type": SERVICE_ACCOUNT_TOKEN,
                          "metadata": {"name": "s", "namespace": "operators", "annotations": {
                              "example.com/note": f"{SENTINEL}a",
                              "kubernetes.io/service-account.name": "scraper"}},
                          "data": {"namespace": base64.b64encode(b"operators").decode(),
                                   "token": B64}})
    assert shown["metadata"]["annotations"] == {"example.com/note": REDACTED,
                                                "kubernetes.io/service-account.name": "scraper"}
    # The note is hidden in text too; the token Secret's own namespace is no secret.
    assert redactor.text(f"{SENTINEL}a in operators, scraper") == (
        f"{REDACTED} in operators, scraper")


# Short learned values.

def test_short_learned_values_are_replaced_as_whole_tokens_only() -> None:
    redactor = Redactor()
    for value in ("p4ss", "k3y9z", "abc", "true", "False"):
        redactor.learn(value)
    assert redactor.learned == {"p4ss", "k3y9z"}
    log = "pw=p4ss, (k3y9z) p4ssage user_p4ss xp4ss k3y9z. abc true False"
    assert redactor.text(log) == (f"pw={REDACTED}, ({REDACTED}) p4ssage user_p4ss xp4ss "
                                  f"{REDACTED}. abc true False")


# By shape, in text and in objects.

JWT_HEADER = "eyJhbGciOiJIUzI1NiJ9"
SHAPES = {
    "vault service token": f"hvs.CAESI{SENTINEL}xyzXYZ",
    "vault batch token": f"hvb.AAAAAQ{SENTINEL}xyzXYZ",
    "vault recovery token": f"hvr.{SENTINEL}abcdefgh",
    "AWS access key id": "AKIAIOSFODNN7EXAMPLE",
    "AWS session key id": "ASIAY34FZKBOKMUTVV7A",
    "GitHub classic token": "ghp_" + "a1B2c3D4e5" * 4,
    "GitHub fine-grained token": "github_pat_11ABCDEFG0" + "a1B2c3D4e5_" * 5,
    "JWT with another payload": f"{JWT_HEADER}.ewogICJzdWIiOiAiMSIKfQ.c2lnbmF0dXJl",
    "unsigned JWT": f"{JWT_HEADER}.eyJzdWIiOiIxIn0.",
    "encrypted JWT": "eyJhbGciOiJkaXIiLCJlbmMiOiJBMjU2R0NNIn0..aXZpdg.Y2lwaGVy.dGFn",
}


@pytest.mark.parametrize("token", SHAPES.values(), ids=SHAPES.keys())
def test_token_shapes_are_hidden_in_text_and_objects_and_learned(token: str) -> None:
    redactor = Redactor()
    assert redactor.text(f"got {token} from the store") == f"got {REDACTED} from the store"
    shown = Redactor().obj({"kind": "Event", "message": f"login with {token}: ok"})
    assert shown["message"] == f"login with {REDACTED}: ok"
    assert token in redactor.learned


ASSIGNMENTS = {  # text -> what stays
    f"level=info password={SENTINEL} next=1": f"level=info password={REDACTED} next=1",
    f'msg="login" client_secret="{SENTINEL}" ok': f'msg="login" client_secret="{REDACTED}" ok',
    f'{{"level":"info","apiKey":"{SENTINEL}","n":1}}': f'{{"level":"info","apiKey":"{REDACTED}"'
                                                      ',"n":1}',
    f"token: {SENTINEL}": f"token: {REDACTED}",
    f"  - aws_secret_access_key: {SENTINEL}": f"  - aws_secret_access_key: {REDACTED}",
    f"GET /v1/x?access_token={SENTINEL}&page=2": f"GET /v1/x?access_token={REDACTED}&page=2",
    f"X-Vault-Token: {SENTINEL}": f"X-Vault-Token: {REDACTED}",
    f"Authorization: Negotiate {SENTINEL}": f"Authorization: Negotiate {REDACTED}",
    f'"authorization":"{SENTINEL}"': f'"authorization":"{REDACTED}"',
    "Authorization: Basic " + base64.b64encode(f"u:{SENTINEL}".encode()).decode():
        f"Authorization: Basic {REDACTED}",
    "proxy sent basic " + base64.b64encode(f"u:{SENTINEL}".encode()).decode() + " ok":
        f"proxy sent basic {REDACTED} ok",
}


@pytest.mark.parametrize(("log", "expected"), ASSIGNMENTS.items())
def test_secret_assignments_and_credentials_are_hidden_and_learned(log: str, expected: str,
                                                                   ) -> None:
    redactor = Redactor()
    assert redactor.text(log) == expected
    assert redactor.text(f"later: {SENTINEL}") == f"later: {REDACTED}"


def test_a_quoted_value_is_hidden_whole() -> None:
    redactor = Redactor()
    assert redactor.text(f"password='{SENTINEL} and more' ok") == f"password='{REDACTED}' ok"
    assert redactor.learned == {f"{SENTINEL} and more"}


@pytest.mark.parametrize("prose", [
    "failed to get token: context deadline exceeded",
    "Basic authentication required; Bearer authentication failed",
    "  automountServiceAccountToken: true",
    "  secretName: bitwarden-tls",
    "--enable-secrets-caching=true --secret-name=webhook --token-file=/var/run/token",
    "--metrics-key-file=/var/run/secrets/metrics-tls/tls.key",
    "keyring=default monkey=1",
])
def test_what_only_looks_like_a_secret_stays(prose: str) -> None:
    redactor = Redactor()
    assert redactor.text(prose) == prose
    assert redactor.learned == set()


def test_a_value_found_by_shape_in_one_file_is_hidden_in_every_file() -> None:
    bundle = Bundle()
    bundle.add_object("pods.yaml", "pods", {"kind": "Event", "message": f"saw {SENTINEL}"})
    bundle.add_text("a.log", "a log", f"user said {SENTINEL}\n")
    bundle.add_text("b.log", "b log", f"password={SENTINEL}\n")
    files = bundle.files()
    assert all(SENTINEL.encode() not in content for content in files.values()), files
    assert files["a.log"] == f"user said {REDACTED}\n".encode()


# What the bundle collects in the operator's namespace.

def labeled(kind: str, namespace: str, name: str, labels: dict[str, str] | None = None,
            owner: str = "", **extra: object) -> dict[str, object]:
    owners = [{"kind": "Deployment", "name": owner, "uid": f"uid-{owner}"}] if owner else []
    return {"apiVersion": "apps/v1" if kind in ("Deployment", "ReplicaSet") else "v1",
            "kind": kind, "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}",
                                       "labels": labels or {}, "ownerReferences": owners},
            **extra}


class FakeKube:
    """Just enough of manager.client.kube.Kube for `gather` to read namespaced core and apps
    objects, with label and field selectors, and logs."""

    PATH = re.compile(r"/(?:api/v1|apis/[a-z.]+/v[0-9]+)(?:/namespaces/(?P<ns>[^/]+))?/"
                      r"(?P<plural>[a-z]+)(?:/(?P<name>[^/]+))?")

    def __init__(self, *objects: dict[str, object]) -> None:
        self.objects = objects
        self.read_secrets: list[str] = []
        self.log_queries: list[dict[str, str]] = []

    def _find(self, path: str, query: dict[str, str]) -> dict[str, object]:
        found = self.PATH.fullmatch(path)
        if path == "/version":
            return {"gitVersion": "v1.31.0"}
        if found is None:
            raise ApiError(404, "NotFound", f"{path} not served")
        plural, namespace, name = found["plural"], found["ns"], found["name"]
        items = [o for o in self.objects if f"{o['kind']}s".lower() == plural
                 and namespace in (None, meta(o)["namespace"])]
        terms = [t.split("=", 1) for key in ("labelSelector", "fieldSelector")
                 for t in (query.get(key) or "").split(",") if t]
        items = [o for o in items if all(lookup(o, key) == value for key, value in terms)]
        if name is None:
            return {"kind": "List", "items": items}
        if plural == "secrets":
            self.read_secrets.append(name)
        [item] = [o for o in items if meta(o)["name"] == name] or [None]
        if item is None:
            raise ApiError(404, "NotFound", f"{name} not found")
        return item

    async def request(self, _method: str, path: str, *,
                      query: dict[str, str] | None = None, **_: object) -> dict[str, object]:
        return self._find(path, query or {})

    async def get(self, path: str, **_: object) -> dict[str, object] | None:
        try:
            return self._find(path, {})
        except ApiError:
            return None

    async def list(self, path: str, *, label_selector: str | None = None,
                   field_selector: str | None = None, **_: object) -> dict[str, object]:
        return self._find(path, {"labelSelector": label_selector or "",
                                 "fieldSelector": field_selector or ""})

    async def text(self, path: str, *, query: dict[str, str] | None = None, **_: object) -> str:
        self.log_queries.append(query or {})
        return f"log of {path.split('/')[-2]}\n"


def meta(obj: dict[str, object]) -> dict[str, object]:
    found = obj["metadata"]
    assert isinstance(found, dict)
    return found


def lookup(obj: dict[str, object], key: str) -> object:
    labels = meta(obj)["labels"]
    assert isinstance(labels, dict)
    if key in labels:
        return labels[key]
    value: object = obj
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


OPERATOR = {"app": "external-secrets-operator"}
OTHER = {"app": "other-operator"}


def shared_namespace(namespace: str) -> tuple[dict[str, object], ...]:
    """The operator and another operator in `namespace`, an operand in external-secrets."""
    pod_spec = {"containers": [{"name": "manager", "env": [{"name": "X", "valueFrom": {
        "secretKeyRef": {"name": "operator-extra", "key": "k"}}}]}]}
    return (
        labeled("Deployment", namespace, OPERATOR_DEPLOYMENT, OPERATOR, spec={
            "selector": {"matchLabels": OPERATOR}, "template": {"spec": pod_spec}}),
        labeled("ReplicaSet", namespace, "eso-rs", OPERATOR, owner=OPERATOR_DEPLOYMENT),
        labeled("ReplicaSet", namespace, "other-rs-same-labels", OPERATOR, owner="other"),
        labeled("Pod", namespace, "eso-pod", OPERATOR, spec=pod_spec),
        labeled("Secret", namespace, "operator-extra", data={"k": B64}),
        labeled("Event", namespace, "e1", involvedObject={"kind": "Pod", "name": "eso-pod"},
                message="Started"),
        labeled("Deployment", namespace, "other-operator", OTHER,
                spec={"selector": {"matchLabels": OTHER}}),
        labeled("ReplicaSet", namespace, "other-rs", OTHER),
        labeled("Pod", namespace, "other-pod", OTHER, spec={"containers": [{"name": "x"}]}),
        labeled("Secret", namespace, "other-secret", data={"k": B64}),
        labeled("Event", namespace, "e2", involvedObject={"kind": "Pod", "name": "other-pod"},
                message="Started other"),
        labeled("OperatorCondition", namespace, "external-secrets-operator.v0.2.0"),
        labeled("OperatorCondition", namespace, "other-operator.v1.0.0"),
        labeled("Pod", "external-secrets", "operand-pod", {"app": "es"},
                spec={"containers": [{"name": "es"}]}),
        labeled("Secret", "external-secrets", "operand-secret", data={"k": B64}))


def gathered(kube: FakeKube, operator_namespace: str) -> str:
    files = asyncio.run(gather(cast(Kube, kube), operator_namespace))
    return "\n".join(f"--- {path}\n{content.decode()}" for path, content in files.items())


def test_the_operator_namespace_holds_only_the_operators_own_objects() -> None:
    kube = FakeKube(*shared_namespace("openshift-operators"))
    bundle = gathered(kube, "openshift-operators")
    for own in (OPERATOR_DEPLOYMENT, "eso-rs", "eso-pod", "operator-extra",
                "external-secrets-operator.v0.2.0",
                "logs/eso-pod/manager.log", "Started", "operand-pod", "operand-secret"):
        assert own in bundle
    for other in ("other-operator", "other-rs", "other-pod", "other-secret", "other"):
        assert other not in bundle
    assert "other-secret" not in kube.read_secrets  # read by name: never even read


def test_one_namespace_for_both_is_collected_whole() -> None:
    kube = FakeKube(*shared_namespace("external-secrets"))
    bundle = gathered(kube, "external-secrets")
    for name in ("other-operator", "other-pod", "other-secret", "operand-pod", "eso-pod"):
        assert name in bundle


def test_the_version_file_names_the_product_and_its_version() -> None:
    """The must-gather convention: product on the first line, version on the second
    (major.minor.micro[-qualifier]); listed in the manifest like every other file."""
    files = asyncio.run(gather(cast(Kube, FakeKube(*shared_namespace("openshift-operators"))),
                               "openshift-operators"))
    product, version = files["version"].decode().splitlines()
    assert product == identity.PACKAGE == "external-secrets-operator"
    assert version == identity.OPERATOR_VERSION
    assert re.fullmatch(r"\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?", version), version
    assert files["version"].endswith(b"\n")
    manifest = yaml.safe_load(files["manifest.yaml"])
    assert "version" in {part["path"] for part in manifest["parts"]}


@pytest.mark.parametrize(("window", "parameter", "said"), [
    (LogWindow(), {}, "every line the log API keeps"),
    (LogWindow(since_seconds=7200), {"sinceSeconds": "7200"}, "the last 7200 seconds"),
    (LogWindow(since_time=datetime(2025, 6, 1, 10, tzinfo=UTC)),
     {"sinceTime": "2025-06-01T10:00:00Z"}, "since 2025-06-01T10:00:00Z"),
])
def test_every_log_read_asks_for_the_window(window: LogWindow, parameter: dict[str, str],
                                            said: str) -> None:
    kube = FakeKube(*shared_namespace("openshift-operators"))
    files = asyncio.run(gather(cast(Kube, kube), "openshift-operators", window))
    assert len(kube.log_queries) == 2  # the operator's pod and the operand's
    for query in kube.log_queries:
        assert query == {"container": query["container"], "tailLines": str(LOG_TAIL_LINES),
                         "limitBytes": query["limitBytes"], **parameter}
    assert said in yaml.safe_load(files["manifest.yaml"])["logs"]
