"""A support bundle: what a support engineer needs to see, and no secret value.

    files = await gather(kube)   # path in the bundle -> bytes, every one redacted

It reads (never writes: the plan's writes are server-side dry runs) the ExternalSecretsConfig
and ExternalSecretsManager; in the operand's namespace every Deployment, ReplicaSet, Pod,
Event and Secret (names, types and key names) and every container log (current and
previous); in the operator's namespace only the operator's own: its Deployment
(`OPERATOR_DEPLOYMENT`), the ReplicaSets and Pods its selector picks, their logs, the Secrets
it names (`OPERATOR_SECRETS` and those its pod template refers to) and the Events about these
objects and its leader-election Lease. That namespace may be shared with other operators
(OLM installs into `openshift-operators` by default): theirs stay out of the bundle. When
both namespaces are one, it is collected as the operand's. Besides: the plan (rendered against
live), the operand's webhook configurations (caBundle as certificate fingerprints), the stored
versions of the operand's CRDs, the operator's OLM OperatorCondition and its metrics. Every
part that cannot be read is listed in `manifest.yaml` with the reason (RBAC, API not served,
not found) instead of failing the bundle. manager/offline/redact.py decides what each part may show;
the text of every file (the manifest too) goes through it last, when every value to hide has
been learned.

The must-gather convention besides: a `version` file (the product on its first line, its
version on the second), and logs limited to the window `oc adm must-gather --since` or
`--since-time` asks for (manager/offline/logwindow.py).
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from collections.abc import Awaitable
from dataclasses import dataclass, field
from typing import Any

import yaml

from manager import __version__
from manager.client.kube import ApiError, JsonObject, Kube
from manager.names import (
    API_VERSION,
    DEFAULT_OPERAND_NAMESPACE,
    ESC_KIND,
    ESC_PLURAL,
    ESM_KIND,
    ESM_PLURAL,
    LEASE_NAME,
    MANAGED_BY_LABEL,
    OPERATOR_DEPLOYMENT,
    OPERATOR_NAME,
    OPERATOR_NAMESPACE,
    SINGLETON_NAME,
)
from manager.offline.logwindow import LogWindow
from manager.offline.plan import PlanRefusedError, make_plan, print_plan
from manager.offline.redact import Redactor
from manager.olm.identity import APP_LABEL, METRICS_SCRAPER_TOKEN, METRICS_TLS_SECRET
from manager.steps.uninstall import operand_namespace_of

LOG_TAIL_LINES = 20000
LOG_LIMIT_BYTES = 32 * 1024 * 1024
EVENTS_NAMESPACE = "default"  # where the operator reports on the two cluster-scoped objects
OPERAND_CRD_GROUPS = ("external-secrets.io", "generators.external-secrets.io")
OWN_CRDS = (f"{ESC_PLURAL}.operator.openshift.io", f"{ESM_PLURAL}.operator.openshift.io")
OPERATOR_CONDITIONS = "/apis/operators.coreos.com/v2/namespaces/{namespace}/operatorconditions"
NAMESPACED_KINDS = (  # (file, collection path) per namespace
    ("deployments", "/apis/apps/v1/namespaces/{namespace}/deployments"),
    ("replicasets", "/apis/apps/v1/namespaces/{namespace}/replicasets"),
    ("pods", "/api/v1/namespaces/{namespace}/pods"),
    ("events", "/api/v1/namespaces/{namespace}/events"),
    ("secrets", "/api/v1/namespaces/{namespace}/secrets"),
)
# The operator's own Secrets in its namespace, besides those its pod template refers to: the
# metrics serving certificate (OpenShift's service CA) and the metrics scraper's token.
OPERATOR_SECRETS = (METRICS_TLS_SECRET, METRICS_SCRAPER_TOKEN)
# Its pods when its Deployment cannot be read: the selector of manifests/operator/deployment.yaml.
OPERATOR_SELECTOR: JsonObject = {"matchLabels": {"app": APP_LABEL}}
# The must-gather `version` file: product, then version (major.minor.micro[-qualifier]), so
# tools can tell which gather wrote a bundle. Written as is: it holds nothing to redact.
VERSION_FILE = "version"
VERSION_TEXT = f"{OPERATOR_NAME}\n{__version__}\n"
_PEM = re.compile(r"-----BEGIN CERTIFICATE-----(.*?)-----END CERTIFICATE-----", re.DOTALL)


def why(error: ApiError) -> str:
    """The reason a part is missing, as the manifest says it."""
    if error.status == 403:
        return f"forbidden (RBAC): {error.message}"
    if error.status == 404:
        return f"not served or not found: {error.message}"
    if error.status == 0:
        return f"not reachable: {error.message}"
    return f"{error.status} {error.reason}: {error.message}"


@dataclass
class Bundle:
    """The files of a bundle, and the manifest of what is in it and what is not."""

    redactor: Redactor = field(default_factory=Redactor)
    log_window: LogWindow = field(default_factory=LogWindow)
    parts: dict[str, str] = field(default_factory=lambda: {
        VERSION_FILE: "the product and the version of the gather that wrote the bundle"})
    missing: list[dict[str, str]] = field(default_factory=list)
    _objects: dict[str, JsonObject] = field(default_factory=dict)
    _texts: dict[str, str] = field(default_factory=dict)

    def add_object(self, path: str, what: str, obj: JsonObject) -> None:
        self._objects[path] = self.redactor.obj(obj)  # learns what to hide in text
        self.parts[path] = what

    def add_text(self, path: str, what: str, text: str) -> None:
        self._texts[path] = text
        self.parts[path] = what

    def miss(self, part: str, reason: str) -> None:
        self.missing.append({"part": part, "reason": reason})

    def files(self) -> dict[str, bytes]:
        """Every file, scrubbed once everything has been learned, and the manifest."""
        # First learn what every file reveals by shape (a token in one log, a `key: value`
        # line of an object's YAML), then replace it in all of them.
        for text in [*self._texts.values(), *(yaml.safe_dump(obj, sort_keys=False)
                                             for obj in self._objects.values())]:
            self.redactor.scrub(text)
        rendered = {path: yaml.safe_dump(self.redactor.replace_learned_in(obj), sort_keys=False)
                    for path, obj in self._objects.items()}
        rendered.update(self._texts)
        rendered["manifest.yaml"] = yaml.safe_dump(self.manifest(), sort_keys=False)
        return {**{path: self.redactor.text(text).encode() for path, text in rendered.items()},
                VERSION_FILE: VERSION_TEXT.encode()}

    def manifest(self) -> JsonObject:
        return {"generator": f"{OPERATOR_NAME} {__version__} (python -m manager gather)",
                "redaction": "Secrets by name, type and key names only, annotation values "
                             "hidden; no managedFields or last-applied annotations; env values "
                             "only of the operator's own variables; every HTTP header value "
                             "hidden; values of secret-looking flags hidden in args and command "
                             "(--flag=value and --flag value); URLs without user information; "
                             "private keys, JWTs, Bearer and Basic credentials, Vault, AWS "
                             "access key and GitHub tokens and values assigned to "
                             "secret-looking names hidden in objects and text; every hidden "
                             "value replaced in all text too, raw and base64, whole tokens "
                             "only for 4 or 5 characters, 1 to 3 characters not searched for; "
                             "in the operator's namespace only the operator's own objects "
                             "(docs/operations.md, Support bundle)",
                "logs": f"{self.log_window.describe()}, at most the last {LOG_TAIL_LINES} "
                        "lines of each container",
                "parts": [{"path": path, "holds": what} for path, what in sorted(
                    self.parts.items())],
                "missing": self.missing}


@dataclass
class Gatherer:
    kube: Kube
    operator_namespace: str | None = None
    log_window: LogWindow = field(default_factory=LogWindow)
    bundle: Bundle = field(default_factory=Bundle)

    def __post_init__(self) -> None:
        self.bundle.log_window = self.log_window

    async def run(self) -> Bundle:
        version = await self.kube.request("GET", "/version")  # unreachable: no bundle at all
        self.bundle.add_object("cluster/version.yaml", "the API server's version", version)
        esc = await self._singleton(ESC_PLURAL, ESC_KIND)
        await self._singleton(ESM_PLURAL, ESM_KIND)
        operator_ns = self.operator_namespace or await self._find_operator_namespace()
        operand_ns = operand_namespace_of(esc) if esc else DEFAULT_OPERAND_NAMESPACE
        if operator_ns != operand_ns:  # one namespace: collected whole, as the operand's
            await self._operator_namespace(operator_ns)
        await self._namespace(operand_ns)
        await self._events_of_singletons()
        await self._webhooks()
        await self._crds()
        await self._operator_conditions(operator_ns)
        await self._metrics(operator_ns)
        await self._plan(esc, operator_ns)
        return self.bundle

    async def _read(self, part: str, reading: Awaitable[Any]) -> Any:
        """The result of `reading`, or None with the reason in the manifest."""
        try:
            return await reading
        except ApiError as error:
            self.bundle.miss(part, why(error))
            return None

    async def _singleton(self, plural: str, kind: str) -> JsonObject | None:
        path = f"cluster/{plural}/{SINGLETON_NAME}.yaml"
        obj: JsonObject | None = await self._read(path, self.kube.request(
            "GET", f"/apis/{API_VERSION}/{plural}/{SINGLETON_NAME}"))
        if obj is not None:
            self.bundle.add_object(path, f"{kind}/{SINGLETON_NAME}", obj)
        return obj

    async def _find_operator_namespace(self) -> str:
        """Where the operator's Deployment runs (OLM may install it in any namespace)."""
        found = await self._read("operator namespace (search)", self.kube.list(
            "/apis/apps/v1/deployments", field_selector=f"metadata.name={OPERATOR_DEPLOYMENT}"))
        items = (found or {}).get("items") or []
        return str(items[0]["metadata"]["namespace"]) if items else OPERATOR_NAMESPACE

    async def _namespace(self, namespace: str) -> None:
        pods: list[JsonObject] = []
        for name, collection in NAMESPACED_KINDS:
            path = f"namespaces/{namespace}/{name}.yaml"
            listing = await self._read(path, self.kube.request(
                "GET", collection.format(namespace=namespace)))
            if listing is not None:
                self.bundle.add_object(path, f"{name} in {namespace}", listing)
                pods = listing.get("items") or [] if name == "pods" else pods
        for pod in pods:
            await self._logs(pod)

    async def _operator_namespace(self, namespace: str) -> None:
        """The operator's own objects in its namespace, which other operators may share:
        its Deployment, the ReplicaSets and Pods of its selector, its Secrets, the Events
        about these and its Lease, and its pods' logs; nothing else of the namespace."""
        apps, core = f"/apis/apps/v1/namespaces/{namespace}", f"/api/v1/namespaces/{namespace}"
        base = f"namespaces/{namespace}"
        deployment: JsonObject | None = await self._read(f"{base}/deployments.yaml", self.kube.get(
            f"{apps}/deployments/{OPERATOR_DEPLOYMENT}"))
        selector = OPERATOR_SELECTOR
        if deployment is not None:
            selector = (deployment.get("spec") or {}).get("selector") or OPERATOR_SELECTOR
            self._add_list(f"{base}/deployments.yaml", f"the operator's Deployment in {namespace}",
                           "apps/v1", "DeploymentList", [deployment])
        elif not any(m["part"] == f"{base}/deployments.yaml" for m in self.bundle.missing):
            self.bundle.miss(f"{base}/deployments.yaml", f"not found: no Deployment "
                                                         f"{OPERATOR_DEPLOYMENT} in {namespace}")
        labels = label_selector(selector)
        replicasets = await self._read(f"{base}/replicasets.yaml", self.kube.list(
            f"{apps}/replicasets", label_selector=labels))
        if replicasets is not None:
            uid = ((deployment or {}).get("metadata") or {}).get("uid")
            owned = [rs for rs in replicasets.get("items") or [] if uid is None or any(
                ref.get("uid") == uid for ref in rs["metadata"].get("ownerReferences") or [])]
            self._add_list(f"{base}/replicasets.yaml", f"the operator's ReplicaSets in "
                           f"{namespace} (selector {labels})", "apps/v1", "ReplicaSetList", owned)
        else:
            owned = []
        pods = await self._read(f"{base}/pods.yaml", self.kube.list(
            f"{core}/pods", label_selector=labels))
        pod_items = (pods or {}).get("items") or []
        if pods is not None:
            self._add_list(f"{base}/pods.yaml", f"the operator's Pods in {namespace} (selector "
                                                f"{labels})", "v1", "PodList", pod_items)
        secrets = await self._operator_secrets(namespace, deployment)
        own = {("Deployment", OPERATOR_DEPLOYMENT), ("Lease", LEASE_NAME),
               *(("ReplicaSet", rs["metadata"]["name"]) for rs in owned),
               *(("Pod", pod["metadata"]["name"]) for pod in pod_items),
               *(("Secret", name) for name in secrets)}
        events = await self._read(f"{base}/events.yaml", self.kube.list(f"{core}/events"))
        if events is not None:
            about = [event for event in events.get("items") or []
                     if (str((event.get("involvedObject") or {}).get("kind")),
                         str((event.get("involvedObject") or {}).get("name"))) in own]
            self._add_list(f"{base}/events.yaml", f"Events about the operator's objects in "
                                                  f"{namespace}", "v1", "EventList", about)
        for pod in pod_items:
            await self._logs(pod)

    async def _operator_secrets(self, namespace: str, deployment: JsonObject | None,
                                ) -> list[str]:
        """The operator's Secrets (`OPERATOR_SECRETS` and those its pod template refers
        to) that exist, added to the bundle; each read by name, no other Secret is read."""
        path = f"namespaces/{namespace}/secrets.yaml"
        names = sorted({*OPERATOR_SECRETS, *referenced_secrets(
            ((deployment or {}).get("spec") or {}).get("template") or {})})
        found: list[JsonObject] = []
        for name in names:
            secret = await self._read(f"{path} ({name})", self.kube.get(
                f"/api/v1/namespaces/{namespace}/secrets/{name}"))
            if secret is not None:
                found.append(secret)
        self._add_list(path, f"the operator's Secrets in {namespace} (names, types and key "
                             f"names; looked for: {', '.join(names)})", "v1", "SecretList", found)
        return [secret["metadata"]["name"] for secret in found]

    def _add_list(self, path: str, what: str, api_version: str, kind: str,
                  items: list[JsonObject]) -> None:
        self.bundle.add_object(path, what, {"apiVersion": api_version, "kind": kind,
                                            "metadata": {}, "items": items})

    async def _logs(self, pod: JsonObject) -> None:
        meta, spec, status = pod["metadata"], pod.get("spec") or {}, pod.get("status") or {}
        statuses = {s["name"]: s for key in ("initContainerStatuses", "containerStatuses")
                    for s in status.get(key) or []}
        containers = [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]
        for container in containers:
            name = container["name"]
            state = statuses.get(name) or {}
            base = f"namespaces/{meta['namespace']}/logs/{meta['name']}/{name}"
            previous = bool((state.get("lastState") or {}).get("terminated"))
            waiting = (state.get("state") or {}).get("waiting")
            if waiting is not None and not previous:  # never ran: no log to ask for
                self.bundle.miss(f"{base}.log", f"the container has not run yet (waiting: "
                                                f"{waiting.get('reason', 'unknown')})")
                continue
            await self._log(meta, name, f"{base}.log", "current", previous=False)
            if previous or state.get("restartCount"):
                await self._log(meta, name, f"{base}.previous.log", "previous", previous=True)

    async def _log(self, meta: JsonObject, container: str, path: str, which: str, *,
                   previous: bool) -> None:
        query = {"container": container, "tailLines": str(LOG_TAIL_LINES),
                 "limitBytes": str(LOG_LIMIT_BYTES), **self.log_window.query()}
        if previous:
            query["previous"] = "true"
        text = await self._read(path, self.kube.text(
            f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/log", query=query))
        if text is not None:
            self.bundle.add_text(path, f"{which} log of {meta['namespace']}/{meta['name']} "
                                       f"container {container}", text)

    async def _events_of_singletons(self) -> None:
        for kind in (ESC_KIND, ESM_KIND):
            path = f"cluster/events-{kind}.yaml"
            listing = await self._read(path, self.kube.list(
                f"/api/v1/namespaces/{EVENTS_NAMESPACE}/events",
                field_selector=f"involvedObject.kind={kind}"))
            if listing is not None:
                self.bundle.add_object(path, f"Events about the {kind} (in namespace "
                                             f"{EVENTS_NAMESPACE})", listing)

    async def _webhooks(self) -> None:
        path = "cluster/validatingwebhookconfigurations.yaml"
        listing = await self._read(path, self.kube.list(
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            label_selector=f"{MANAGED_BY_LABEL}={OPERATOR_NAME}"))
        if listing is None:
            return
        for item in listing.get("items") or []:
            for webhook in item.get("webhooks") or []:
                client = webhook.get("clientConfig") or {}
                if "caBundle" in client:
                    client["caBundle"] = ca_fingerprints(client["caBundle"])
        self.bundle.add_object(path, "the operand's ValidatingWebhookConfigurations (caBundle "
                                     "as the SHA-256 fingerprints of its certificates)", listing)

    async def _crds(self) -> None:
        path = "cluster/crd-stored-versions.yaml"
        listing = await self._read(path, self.kube.request(
            "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"))
        if listing is None:
            return
        rows = [{"name": crd["metadata"]["name"],
                 "storedVersions": (crd.get("status") or {}).get("storedVersions") or [],
                 "served": [v["name"] for v in crd["spec"]["versions"] if v.get("served")],
                 "storage": next((v["name"] for v in crd["spec"]["versions"]
                                  if v.get("storage")), None)}
                for crd in listing.get("items") or []
                if crd["spec"]["group"] in OPERAND_CRD_GROUPS or crd["metadata"]["name"]
                in OWN_CRDS]
        self.bundle.add_object(path, "stored, served and storage versions of the operand's "
                                     "and the operator's CRDs",
                               {"kind": "StoredVersions", "crds": sorted(
                                   rows, key=lambda row: row["name"])})

    async def _operator_conditions(self, namespace: str) -> None:
        path = f"namespaces/{namespace}/operatorconditions.yaml"
        listing = await self._read(path, self.kube.request(
            "GET", OPERATOR_CONDITIONS.format(namespace=namespace)))
        if listing is not None:  # one per CSV of the namespace: ours are named after the package
            listing["items"] = [item for item in listing.get("items") or [] if str(
                item["metadata"]["name"]).startswith(f"{OPERATOR_NAME}.")]
            self.bundle.add_object(path, "OLM's OperatorCondition of the operator's CSV",
                                   listing)

    async def _metrics(self, namespace: str) -> None:
        """The operator's metrics, through the API server's pod proxy; optional: a port
        served over TLS with authentication may refuse, which the manifest then says."""
        pods = await self._read("metrics", self.kube.list(
            f"/api/v1/namespaces/{namespace}/pods", label_selector=f"app={OPERATOR_NAME}"))
        running = [p for p in (pods or {}).get("items") or []
                   if (p.get("status") or {}).get("phase") == "Running"]
        if pods is not None and not running:
            self.bundle.miss("metrics", f"no running operator pod in {namespace}")
        for pod in running:
            for container in pod["spec"].get("containers") or []:
                for port in container.get("ports") or []:
                    if "metrics" in port.get("name", ""):
                        await self._scrape(pod, port, _serves_securely(container))

    async def _scrape(self, pod: JsonObject, port: JsonObject, secure: bool) -> None:
        name, number = pod["metadata"]["name"], port["containerPort"]
        path = f"namespaces/{pod['metadata']['namespace']}/metrics/{name}-{number}.txt"
        if secure:  # the proxy strips the caller's credentials: /metrics would answer 401
            self.bundle.miss(path, SECURE_METRICS)
            return
        text = await self._read(path, self.kube.text(
            f"/api/v1/namespaces/{pod['metadata']['namespace']}/pods/"
            f"{name}:{number}/proxy/metrics", timeout=10))
        if text is not None:
            self.bundle.add_text(path, f"the operator's metrics (pod {name}, port {number})", text)

    async def _plan(self, esc: JsonObject | None, operator_namespace: str) -> None:
        path = "plan.txt"
        if esc is None:
            self.bundle.miss(path, "no ExternalSecretsConfig: nothing to plan")
            return
        document: JsonObject = {key: esc[key] for key in ("apiVersion", "kind", "spec")
                                if key in esc}
        out = io.StringIO()
        try:
            print_plan(await make_plan(self.kube, {**document, "metadata": {
                "name": SINGLETON_NAME}}, operator_namespace=operator_namespace), out)
        except PlanRefusedError as refusal:
            print(f"refused: {refusal}", file=out)
        except ApiError as error:
            self.bundle.miss(path, why(error))
            return
        self.bundle.add_text(path, "the plan: the live ExternalSecretsConfig rendered against "
                                   "the live objects (server-side dry runs)", out.getvalue())


def label_selector(selector: JsonObject) -> str:
    """A LabelSelector (matchLabels, matchExpressions) as the `labelSelector` query says it."""
    terms = [f"{key}={value}" for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression["key"], expression["operator"]
        values = ",".join(expression.get("values") or [])
        terms.append({"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})",
                      "Exists": key, "DoesNotExist": f"!{key}"}[operator])
    return ",".join(terms)


def referenced_secrets(template: JsonObject) -> set[str]:
    """The names of the Secrets a pod template refers to: volumes (projected too), env and
    envFrom of every container, image pull secrets."""
    spec = template.get("spec") or {}
    names = {ref.get("name") for ref in spec.get("imagePullSecrets") or []}
    for volume in spec.get("volumes") or []:
        names.add((volume.get("secret") or {}).get("secretName"))
        names.update((source.get("secret") or {}).get("name") for source in
                     (volume.get("projected") or {}).get("sources") or [])
    for container in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
        names.update(((entry.get("valueFrom") or {}).get("secretKeyRef") or {}).get("name")
                     for entry in container.get("env") or [])
        names.update((entry.get("secretRef") or {}).get("name")
                     for entry in container.get("envFrom") or [])
    return {str(name) for name in names if name}


def ca_fingerprints(ca_bundle: str) -> list[str]:
    """`sha256:<hex>` of each certificate in a base64 PEM bundle, never the PEM itself."""
    try:
        pem = base64.b64decode(ca_bundle).decode()
    except ValueError:
        return ["(not base64 PEM)"]
    return [f"sha256:{hashlib.sha256(base64.b64decode(body)).hexdigest()}"
            for body in _PEM.findall(pem)]


async def gather(kube: Kube, operator_namespace: str | None = None,
                 log_window: LogWindow | None = None) -> dict[str, bytes]:
    return (await Gatherer(kube, operator_namespace, log_window or LogWindow()).run()).files()


SECURE_METRICS = ("served over HTTPS to allowed bearer tokens only, and the API server's pod "
                  "proxy does not pass one on: scrape it by hand (docs/operations.md, "
                  "\"Who may read them\")")


def _serves_securely(container: JsonObject) -> bool:
    """Whether the operator serves /metrics over TLS with token checks (`--metrics-secure`,
    the Deployment's setting; `make run` and local clusters turn it off)."""
    args = [str(arg) for arg in (container.get("args") or []) + (container.get("command") or [])]
    return any(arg in ("--metrics-secure", "--metrics-secure=true") for arg in args)
