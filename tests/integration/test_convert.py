"""`python -m manager convert` output is admitted by the real API server under this
operator's CRDs, field for field; Red Hat's GA shape as it is is not. And the migration's
takeover: a running operand this operator did not create keeps serving while it adopts it.

The GA objects are the unit tests' (tests/unit/offline/test_convert.py: every GA field).
The command runs as an administrator runs it (a process, the file on disk, stdout); its
objects are applied with server-side apply: the ExternalSecretsConfig for real (the session
has none at this point; it is deleted again afterwards), the ExternalSecretsManager as a dry
run, because later tests of a session share it. Either way the API server runs its whole
admission (schema, CEL rules) and answers the object as it would store it, which must hold
every field the command wrote (server-side apply refuses a field the CRDs do not declare).

Red Hat's operator is not available here: the takeover test stands in for its operand with
the objects this operator renders, created the way another controller creates them (see
`stand_in`), and says so in docs/upgrade.md.
"""

from __future__ import annotations

import asyncio
import base64
import copy
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from manager.api.models import ExternalSecretsConfig
from manager.apply.convergence import APPLIED_HASH_ANNOTATION, applied_by
from manager.client.kube import ApiError, Kube
from manager.config import OperatorEnvironment, effective_config
from manager.names import ESC_PATH, ESM_PATH
from manager.names import FIELD_MANAGER as OPERATOR_FIELD_MANAGER
from manager.offline.convert import GA_FINALIZER
from manager.paths import REPO_ROOT
from manager.render import render_operand
from tests.conftest import Cluster
from tests.integration.conftest import (
    MANAGED,
    USER_NAMESPACE,
    EscHandle,
    StartOperator,
    UserObjects,
    esc_events,
    wait_installed,
)
from tests.samplers import AdmissionSampler, SyncSampler, own_client, webhook_decides
from tests.unit.offline.test_convert import GA_ESC, GA_ESM
from tests.waiting import eventually

SAMPLED = f"/apis/external-secrets.io/v1/namespaces/{USER_NAMESPACE}/secretstores"

FIELD_MANAGER = "convert-test"
PATHS = {"ExternalSecretsConfig": ESC_PATH, "ExternalSecretsManager": ESM_PATH}
ESC_COLLECTION = ESC_PATH.rpartition("/")[0]
ESM_COLLECTION = ESM_PATH.rpartition("/")[0]


def missing(sent: Any, stored: Any, path: str = "") -> list[str]:
    """Where `stored` lacks or changed something of `sent` (defaults it added are fine)."""
    if isinstance(sent, dict):
        if not isinstance(stored, dict):
            return [path or "."]
        return [gap for key, value in sent.items()
                for gap in (missing(value, stored[key], f"{path}.{key}") if key in stored
                            else [f"{path}.{key}"])]
    if isinstance(sent, list):
        if not isinstance(stored, list) or len(stored) != len(sent):
            return [path]
        return [gap for i, (a, b) in enumerate(zip(sent, stored, strict=True))
                for gap in missing(a, b, f"{path}[{i}]")]
    return [] if sent == stored else [path]


def convert(tmp_path: Path, text: str, *args: str) -> tuple[int, list[dict[str, Any]], str]:
    source = tmp_path / "ga.yaml"
    source.write_text(text)
    done = subprocess.run([sys.executable, "-m", "manager", "convert", "-f", str(source), *args],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=120,
                          check=False)
    return done.returncode, list(yaml.safe_load_all(done.stdout)), done.stderr


async def apply(kube: Kube, obj: dict[str, Any], *, dry_run: bool) -> dict[str, Any]:
    return await kube.apply(PATHS[obj["kind"]], obj, field_manager=FIELD_MANAGER,
                            dry_run=dry_run)


async def test_converted_objects_are_admitted_with_every_field(
        kube: Kube, operator_crds: None, tmp_path: Path) -> None:
    code, objects, report = convert(tmp_path, GA_ESC + "---\n" + GA_ESM, "--adopt")
    assert code == 3, report  # the advancedOverrides args are not mapped
    esc, esm = objects
    assert await kube.get(ESC_PATH) is None, "an ExternalSecretsConfig was left by a test"
    try:
        stored = await apply(kube, esc, dry_run=False)
        assert missing(esc["spec"], stored["spec"]) == []
        assert missing(esc["metadata"], stored["metadata"]) == []
        again = await kube.get(ESC_PATH)
        assert again is not None
        assert missing(esc["spec"], again["spec"]) == []
    finally:
        await kube.delete(ESC_PATH)
    await eventually(lambda: _gone(kube, ESC_PATH))
    answered = await apply(kube, esm, dry_run=True)
    assert missing(esm["spec"], answered["spec"]) == []


async def _gone(kube: Kube, path: str) -> None:
    assert await kube.get(path) is None


async def test_the_ga_shape_itself_is_refused_or_loses_fields(
        kube: Kube, operator_crds: None) -> None:
    """Why the command exists: under these CRDs server-side apply refuses the GA ESC, a plain
    create (the API server's default field validation, Warn) stores it without its GA-only
    fields, and the GA ESM is refused for want of features[].enabled."""
    esc = _applicable(yaml.safe_load(GA_ESC))
    with pytest.raises(ApiError) as refused:
        await apply(kube, esc, dry_run=True)
    assert ".spec.plugins: field not declared in schema" in refused.value.message
    created = await kube.request("POST", ESC_COLLECTION, query={"dryRun": "All"}, body=esc)
    assert "plugins" not in created["spec"]
    assert "certProvider" not in created["spec"]["controllerConfig"]
    assert "trustedCABundle" not in created["spec"]["controllerConfig"]
    esm = _applicable(yaml.safe_load(GA_ESM))
    with pytest.raises(ApiError) as invalid:
        await kube.request("POST", ESM_COLLECTION, query={"dryRun": "All"}, body=esm)
    assert "spec.features[0].enabled: Required value" in invalid.value.message


def _applicable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what only a server sets (apply refuses some of it)."""
    keep = ("name", "labels", "annotations")
    obj["metadata"] = {key: value for key, value in obj["metadata"].items() if key in keep}
    obj.pop("status", None)
    return obj


# --- taking over a running operand ------------------------------------------------------------

NAMESPACE = "external-secrets"  # Red Hat's operand namespace (fixed there), this one's default
STAND_IN_MANAGER = "external-secrets-operator"  # a plain create/update, as controller-runtime's
STORE_PATH = f"/apis/external-secrets.io/v1/namespaces/{NAMESPACE}/secretstores/handover-store"
ES_PATH = f"/apis/external-secrets.io/v1/namespaces/{NAMESPACE}/externalsecrets/handover-es"
SYNCED = "handover-synced"

# A Red Hat ExternalSecretsConfig as an administrator keeps it: the defaults (cert-controller,
# no bitwarden) with a webhook setting and per-component history.
GA_SMALL = f"""
apiVersion: operator.openshift.io/v1alpha1
kind: ExternalSecretsConfig
metadata:
  name: cluster
  finalizers: [{GA_FINALIZER}]
spec:
  appConfig:
    logLevel: 1
    webhookConfig: {{certificateCheckInterval: 5m}}
  plugins:
    bitwardenSecretManagerProvider: {{mode: Disabled}}
  controllerConfig:
    componentConfigs:
    - componentName: ExternalSecretsCoreController
      deploymentConfigs: {{revisionHistoryLimit: 5}}
"""


def stand_in(esc: dict[str, Any]) -> list[dict[str, Any]]:
    """Red Hat's running operand, stood in for: the objects this operator renders for the
    same spec (the same names, labels and selectors as Red Hat's, whose static manifests come
    from the same chart), as another controller would have created them: no apply-hash, and
    pod templates that differ (the log level flag), so that the takeover rolls every
    Deployment, as taking over Red Hat's images and arguments does."""
    spec = ExternalSecretsConfig.model_validate(esc).spec
    config = effective_config(spec, None, OperatorEnvironment.from_environ(os.environ))
    objects = []
    for rendered in render_operand(config).objects():
        if rendered["kind"] == "Namespace":
            continue  # Red Hat's operator made it; here the session did
        obj = copy.deepcopy(rendered)
        (obj["metadata"].get("annotations") or {}).pop(APPLIED_HASH_ANNOTATION, None)
        if obj["kind"] == "Deployment":
            for container in obj["spec"]["template"]["spec"]["containers"]:
                container["args"] = [arg.replace("--loglevel=info", "--loglevel=debug")
                                     for arg in container.get("args") or []]
        objects.append(obj)
    return objects


def key_of(obj: dict[str, Any]) -> tuple[str, str, str]:
    return obj["kind"], obj["metadata"].get("namespace", ""), obj["metadata"]["name"]


def live_objects(cluster: Cluster, objects: list[dict[str, Any]],
                 ) -> dict[tuple[str, str, str], dict[str, Any]]:
    listed = cluster.kubectl("get", "-o", "json", "--show-managed-fields", "-f", "-",
                             input=yaml.safe_dump_all(objects)).stdout
    items = json.loads(listed).get("items") or [json.loads(listed)]
    return {key_of(item): item for item in items}


async def deployments_settled(kube: Kube, loglevel: str) -> None:
    """Every operand Deployment rolled out with `loglevel`, its old pods gone."""
    listed = await kube.list(f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments",
                             label_selector=MANAGED)
    assert len(listed["items"]) == 3, [d["metadata"]["name"] for d in listed["items"]]
    for deployment in listed["items"]:
        status = deployment.get("status") or {}
        name = deployment["metadata"]["name"]
        assert status.get("observedGeneration") == deployment["metadata"]["generation"], name
        assert status.get("replicas") == status.get("updatedReplicas") == status.get(
            "availableReplicas") == 1, f"{name}: {status}"
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert f"--loglevel={loglevel}" in args, f"{name}: {args}"


async def synced(kube: Kube, value: str) -> None:
    secret = await kube.get(f"/api/v1/namespaces/{NAMESPACE}/secrets/{SYNCED}")
    assert secret is not None, f"{SYNCED} not synced yet"
    assert base64.b64decode(secret["data"]["k"]).decode() == value


async def handover_store(kube: Kube, value: str) -> None:
    await kube.apply(STORE_PATH, {
        "apiVersion": "external-secrets.io/v1", "kind": "SecretStore",
        "metadata": {"name": "handover-store", "namespace": NAMESPACE},
        "spec": {"provider": {"fake": {"data": [{"key": "k", "value": value}]}}}},
        field_manager=FIELD_MANAGER)


@dataclass
class Handover:
    cluster: Cluster
    kube: Kube
    esc: EscHandle
    objects: list[dict[str, Any]]
    """The stand-in operand's objects, as created."""

    async def live(self) -> dict[tuple[str, str, str], dict[str, Any]]:
        """The objects as they are now (kubectl in a thread: the samplers share this loop)."""
        return await asyncio.to_thread(live_objects, self.cluster, self.objects)


@pytest.mark.timing  # its AdmissionSampler
async def test_the_operand_keeps_serving_while_this_operator_takes_over(
        *, cluster: Cluster, kube: Kube, esc: EscHandle, user_objects: UserObjects,
        start_operator: StartOperator, tmp_path: Path) -> None:
    code, (ours,), report = convert(tmp_path, GA_SMALL, "--adopt")
    assert code == 0, report
    handover = Handover(cluster, kube, esc, stand_in(ours))
    cluster.kubectl("create", f"--field-manager={STAND_IN_MANAGER}", "-f", "-",
                    input=yaml.safe_dump_all(handover.objects))
    await eventually(lambda: deployments_settled(kube, "debug"), 120,
                     what="the stand-in operand to run")
    await eventually(lambda: webhook_decides(kube, SAMPLED), 60,
                     what="the stand-in webhook to decide")
    await handover_store(kube, "before")
    await kube.apply(ES_PATH, {
        "apiVersion": "external-secrets.io/v1", "kind": "ExternalSecret",
        "metadata": {"name": "handover-es", "namespace": NAMESPACE},
        "spec": {"refreshInterval": "1s",
                 "secretStoreRef": {"name": "handover-store", "kind": "SecretStore"},
                 "target": {"name": SYNCED}, "data": [{"secretKey": "k",
                                                      "remoteRef": {"key": "k"}}]}},
        field_manager=FIELD_MANAGER)
    await eventually(lambda: synced(kube, "before"), 60, what="the stand-in to sync")
    try:
        await take_over(handover, start_operator, ours)
    finally:
        await kube.delete(ES_PATH)  # while a controller still runs to release its finalizer
        await eventually(lambda: _gone(kube, ES_PATH), 30)
        await kube.delete(STORE_PATH)


async def take_over(handover: Handover, start_operator: StartOperator,
                    ours: dict[str, Any]) -> None:
    kube = handover.kube
    before = await handover.live()
    sync = SyncSampler(kube, NAMESPACE, SYNCED, "k")
    client = own_client(kube)
    try:
        async with AdmissionSampler(client, USER_NAMESPACE, concurrency=2) as sampler:
            await sync.start()
            operator = await start_operator()
            await operator.wait_idle()  # no ESC yet: the operand is not touched
            assert versions(await handover.live()) == versions(before)
            started = time.monotonic()
            await kube.apply(ESC_PATH, ours, field_manager=FIELD_MANAGER)
            await wait_installed(handover.esc, NAMESPACE, timeout=120)
            await eventually(lambda: deployments_settled(kube, "info"), 120,
                             what="the takeover's rollouts")
            took = time.monotonic() - started
            await handover_store(kube, "after")
            await eventually(lambda: synced(kube, "after"), 60,
                             what="this operator's operand to sync")
        await sync.stop(expect_value="after")
    finally:
        await client.close()
    print(f"takeover of a running operand ({len(handover.objects)} objects): every Deployment "
          f"rolled {took:.1f} s after the ESC was applied; "
          f"{sampler.figures}; synced Secret: {sync.summary()}")  # with -s
    sampler.figures.assert_refused_only_by_keepalive_races()
    assert sync.harm == []
    after = await handover.live()
    assert uids(after) == uids(before), "an object was re-created"
    adopted = [e for e in await esc_events(kube, (await handover.esc.get())["metadata"]["uid"])
               if e["reason"] == "Adopted"]
    assert len(adopted) == len(handover.objects), [e["note"] for e in adopted]
    assert [key for key, obj in after.items()
            if applied_by(obj, OPERATOR_FIELD_MANAGER) is None] == []


def versions(objects: dict[tuple[str, str, str], dict[str, Any]]) -> dict[Any, str]:
    return {key: obj["metadata"]["resourceVersion"] for key, obj in objects.items()}


def uids(objects: dict[tuple[str, str, str], dict[str, Any]]) -> dict[Any, str]:
    return {key: obj["metadata"]["uid"] for key, obj in objects.items()}
