"""What the upgrade test compares: the operand's objects before and after, and what each
release renders for the same specs.

`Snapshot` holds, for every object with the operator's managed-by label (every kind the
renderer can produce, in the operand namespace and cluster-wide), its uid and
resourceVersion, and for every Deployment its generation and pod template. `judge()` turns
two snapshots and two renderings into problems (the test fails on any) and notes (what
the test checked, printed for the record).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from devcluster.images import release_venv
from manager.apply import Discovery
from manager.client.kube import Kube
from manager.render.context import LOADED_CONTENT_ANNOTATION
from manager.render.state import renderable_kinds

MANAGED = "app.kubernetes.io/managed-by=external-secrets-operator"
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")
Key = tuple[str, str, str]  # kind, namespace, name


def template_hash(template: dict[str, Any]) -> str:
    canonical = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class DeploymentState:
    uid: str
    generation: int
    spec: dict[str, Any]

    @property
    def template_hash(self) -> str:
        return template_hash(self.spec["template"])


@dataclass(frozen=True)
class Snapshot:
    objects: dict[Key, tuple[str, str]]  # key -> (uid, resourceVersion)
    deployments: dict[str, DeploymentState] = field(default_factory=dict)

    def versions(self) -> dict[Key, str]:
        return {key: version for key, (_, version) in self.objects.items()}


async def take_snapshot(kube: Kube, namespace: str) -> Snapshot:
    discovery = Discovery(kube)
    objects: dict[Key, tuple[str, str]] = {}
    deployments: dict[str, DeploymentState] = {}
    for api_version, kind in renderable_kinds():
        resource = await discovery.resolve(api_version, kind)
        if resource is None:
            continue
        listing = await kube.list(resource.collection_path(namespace), label_selector=MANAGED)
        for item in listing.get("items") or []:
            metadata = item["metadata"]
            if kind == "Namespace" and metadata["name"] != namespace:
                continue
            key = (kind, metadata.get("namespace", ""), metadata["name"])
            objects[key] = (metadata["uid"], metadata["resourceVersion"])
            if kind == "Deployment":
                deployments[metadata["name"]] = DeploymentState(
                    metadata["uid"], metadata["generation"], item["spec"])
    return Snapshot(objects, deployments)


# --- what a release renders -----------------------------------------------------------------


def release_environment(source: Path) -> dict[str, str]:
    """The operator's environment as the release's own Deployment sets it (images and
    versions), plus the proxy variables of this process (the same for both releases)."""
    deployment = yaml.safe_load((source / "manifests" / "operator" / "deployment.yaml")
                                .read_text())
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    environment = {name: os.environ[name] for name in PROXY_VARIABLES if name in os.environ}
    environment.update({entry["name"]: str(entry["value"]) for entry in container.get("env") or []
                        if "value" in entry})
    return environment


@dataclass(frozen=True)
class Rendering:
    keys: frozenset[Key]
    deployment_specs: dict[str, dict[str, Any]]


# Run with the release's own package first on sys.path: its merge and templates, through the
# functions every release keeps (effective_config, render_operand; older releases may lack the
# `render` command).
_RENDER_PROGRAM = """
import json, sys
from manager.api.models import ExternalSecretsConfigSpec, ExternalSecretsManagerSpec
from manager.config import OperatorEnvironment, effective_config
from manager.render import render_operand
esc, esm, environment = (json.loads(argument) for argument in sys.argv[1:4])
config = effective_config(ExternalSecretsConfigSpec.model_validate(esc),
                          ExternalSecretsManagerSpec.model_validate(esm),
                          OperatorEnvironment.from_environ(environment))
print(json.dumps(list(render_operand(config).objects())))
"""


def render_release(source: Path, esc_spec: dict[str, Any], esm_spec: dict[str, Any],
                   environment: dict[str, str]) -> Rendering:
    """The objects the release in `source` renders for these specs and environment."""
    python = str(release_venv(source) / "bin" / "python")
    command = [python, "-c", _RENDER_PROGRAM, json.dumps(esc_spec), json.dumps(esm_spec),
               json.dumps(environment)]
    result = subprocess.run(command, cwd=source, capture_output=True, text=True, check=False,
                            env={**os.environ, "PYTHONPATH": str(source)}, timeout=120)
    assert result.returncode == 0, f"rendering with {source} failed: {result.stderr}"
    documents = json.loads(result.stdout)
    keys = frozenset((d["kind"], d["metadata"].get("namespace", ""), d["metadata"]["name"])
                     for d in documents)
    specs = {d["metadata"]["name"]: d["spec"] for d in documents if d["kind"] == "Deployment"}
    return Rendering(keys, specs)


# --- the verdict ------------------------------------------------------------------------------


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """Paths (JSON-pointer-like) where two documents differ."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new)):
            found += differences(old.get(key), new.get(key), f"{path}/{key}")
        return found
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        found = []
        for index, (a, b) in enumerate(zip(old, new, strict=True)):
            found += differences(a, b, f"{path}/{index}")
        return found
    return [] if old == new else [path or "/"]


@dataclass(frozen=True)
class Renderings:
    """What the previous release (`release`) and the current code render for the same specs."""

    release: str
    previous: Rendering
    current: Rendering


@dataclass
class Verdict:
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def judge(before: Snapshot, after: Snapshot, renderings: Renderings) -> Verdict:
    verdict = Verdict()
    _judge_objects(before, after, renderings, verdict)
    for name, old in sorted(before.deployments.items()):
        new = after.deployments.get(name)
        if new is not None:
            verdict_for = _judge_deployment(name, old, new, renderings)
            (verdict.problems if verdict_for[0] else verdict.notes).append(verdict_for[1])
    return verdict


def _judge_objects(before: Snapshot, after: Snapshot, renderings: Renderings,
                   verdict: Verdict) -> None:
    kept = 0
    for key, (uid, _) in sorted(before.objects.items()):
        found = after.objects.get(key)
        where = f"{key[0]} {key[1] + '/' if key[1] else ''}{key[2]}"
        if found is None:
            if key in renderings.current.keys:
                verdict.problems.append(f"{where} was deleted by the upgrade")
            else:
                verdict.notes.append(f"{where} removed: the current code no longer renders it "
                                     f"(it did in {renderings.release})")
        elif found[0] != uid:
            verdict.problems.append(f"{where} was re-created (uid {uid} -> {found[0]})")
        else:
            kept += 1
    verdict.notes.append(f"{kept} of {len(before.objects)} objects kept their uid")
    for key in sorted(set(after.objects) - set(before.objects)):
        verdict.notes.append(f"{key[0]} {key[1]}/{key[2]} added by the current code")


def _judge_deployment(name: str, old: DeploymentState, new: DeploymentState,
                      renderings: Renderings) -> tuple[bool, str]:
    """(is it a problem, what was found) for one Deployment."""
    release = renderings.release
    rendered_old = renderings.previous.deployment_specs.get(name) or {}
    rendered_new = renderings.current.deployment_specs.get(name) or {}
    if old.template_hash == new.template_hash:
        if old.generation == new.generation:
            return False, (f"Deployment {name}: not rolled (generation {old.generation}, "
                           f"pod template {old.template_hash})")
        changed = differences(rendered_old, rendered_new)
        if changed:
            return False, (f"Deployment {name}: generation {old.generation} -> "
                           f"{new.generation} without a roll: the spec outside the pod "
                           f"template changed between {release} and now ({changed})")
        return True, (f"Deployment {name}: generation {old.generation} -> {new.generation} "
                      f"although both releases render the same spec "
                      f"({differences(old.spec, new.spec)})")
    rendered = differences(rendered_old.get("template"), rendered_new.get("template"))
    if rendered:
        return False, (f"Deployment {name}: rolled (pod template {old.template_hash} -> "
                       f"{new.template_hash}), expected: the pod template the current code "
                       f"renders differs from {release}'s at {rendered}")
    live = differences(old.spec["template"], new.spec["template"])
    if _only_gained_loaded_content(old.spec["template"], new.spec["template"]):
        return False, (f"Deployment {name}: rolled once, to take {LOADED_CONTENT_ANNOTATION} "
                       f"(the digest of what its process loads once: a cluster fact that "
                       f"`render` cannot see), which {release} did not set")
    return True, (f"Deployment {name}: rolled (pod template changed at {live}), although "
                  "both releases render the same pod template")


def _only_gained_loaded_content(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """The only change is the loaded-content digest, which the old template did not have."""
    old_annotations = (old.get("metadata") or {}).get("annotations") or {}
    new_annotations = dict((new.get("metadata") or {}).get("annotations") or {})
    if LOADED_CONTENT_ANNOTATION in old_annotations or not new_annotations.pop(
            LOADED_CONTENT_ANNOTATION, None):
        return False
    metadata = {**(new.get("metadata") or {}), "annotations": new_annotations}
    if not new_annotations:
        del metadata["annotations"]
    stripped = {**new, "metadata": metadata} if metadata or "metadata" in old else {
        key: value for key, value in new.items() if key != "metadata"}
    return not differences(old, stripped)
