"""The operator's ConsoleQuickStart (manager/olm/quickstart.py): well-formed by the CRD's own
schema (openshift/api, pinned), what its tasks ask the user to create is coherent, and it is
not in the bundle (OLM would fail the install where the console's API is not served)."""

from __future__ import annotations

import re
from typing import Any

import yaml

from manager.names import API_VERSION, ESC_KIND, ESC_PLURAL, GROUP, SINGLETON_NAME
from manager.olm import bundle, quickstart
from manager.paths import REPO_ROOT
from manager.sidetasks.console_quickstart import desired
from tests.console_crds import quickstart_schema

TYPES = {"object": dict, "string": str, "integer": int, "array": list, "boolean": bool}


def violations(value: Any, schema: dict[str, Any], where: str = "") -> list[str]:
    """What in `value` the structural schema refuses: type, required, unknown fields (which
    the API server would drop), string lengths, minimum, minItems; recursively."""
    found = []
    kind = schema.get("type")
    if kind and not isinstance(value, TYPES[kind]):
        return [f"{where or '.'}: not {kind}"]
    if isinstance(value, dict) and "properties" in schema:
        found += [f"{where}.{key}: required" for key in schema.get("required", [])
                  if key not in value]
        for key, item in value.items():
            if key not in schema["properties"]:
                found.append(f"{where}.{key}: unknown field")
            else:
                found += violations(item, schema["properties"][key], f"{where}.{key}")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            found.append(f"{where}: fewer than {schema['minItems']} items")
        for index, item in enumerate(value):
            found += violations(item, schema.get("items", {}), f"{where}[{index}]")
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            found.append(f"{where}: shorter than {schema['minLength']}")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(f"{where}: longer than {schema['maxLength']} ({len(value)})")
    if isinstance(value, int) and "minimum" in schema and value < schema["minimum"]:
        found.append(f"{where}: below {schema['minimum']}")
    return found


def test_the_quickstart_is_what_the_crd_accepts() -> None:
    schema = quickstart_schema()
    obj = desired("00000000-0000-0000-0000-000000000000")
    assert violations(obj, schema) == []
    assert obj["apiVersion"] == quickstart.QUICKSTART_API
    assert obj["kind"] == quickstart.QUICKSTART_KIND


def test_the_check_catches_what_the_crd_refuses() -> None:
    """The schema check can fail: a required field missing, a summary too long, a field the
    API server would drop."""
    schema = quickstart_schema()
    obj = quickstart.quickstart()
    del obj["spec"]["introduction"]
    obj["spec"]["tasks"][0]["summary"]["failed"] = "x" * 129
    obj["spec"]["tasks"][1]["hint"] = "unknown"
    assert sorted(violations(obj, schema)) == [
        ".spec.introduction: required",
        ".spec.tasks[0].summary.failed: longer than 128 (129)",
        ".spec.tasks[1].hint: unknown field",
    ]


def yaml_blocks(markdown: str) -> list[dict[str, Any]]:
    """Every object of the fenced YAML blocks, as a user would paste them."""
    blocks = re.findall(r"```yaml\n(.*?)\n```\{\{copy\}\}", markdown, re.DOTALL)
    return [doc for block in blocks for doc in yaml.safe_load_all(block) if doc]


def test_the_tour_creates_an_esc_a_fake_store_and_an_external_secret_that_reads_it() -> None:
    tasks = quickstart.quickstart()["spec"]["tasks"]
    [esc] = yaml_blocks(tasks[0]["description"])
    assert (esc["apiVersion"], esc["kind"], esc["metadata"]["name"]) == (
        API_VERSION, ESC_KIND, SINGLETON_NAME)
    namespace, store = yaml_blocks(tasks[1]["description"])
    assert namespace["kind"] == "Namespace"
    assert store["kind"] == "SecretStore"
    assert store["metadata"]["namespace"] == namespace["metadata"]["name"]
    values = {item["key"]: item["value"] for item in store["spec"]["provider"]["fake"]["data"]}
    [external] = yaml_blocks(tasks[2]["description"])
    assert external["kind"] == "ExternalSecret"
    assert external["metadata"]["namespace"] == namespace["metadata"]["name"]
    assert external["spec"]["secretStoreRef"] == {"kind": "SecretStore",
                                                  "name": store["metadata"]["name"]}
    [read] = external["spec"]["data"]
    expected = values[read["remoteRef"]["key"]]  # a key the store holds
    # The last task's check prints exactly that value, from the Secret the ExternalSecret
    # names, under the key it writes.
    target = external["spec"]["target"]["name"]
    assert f"get secret {target} -o jsonpath='{{.data.{read['secretKey']}}}'" in \
        tasks[2]["description"]
    assert expected in tasks[2]["review"]["instructions"]


def test_only_users_who_can_do_it_see_it() -> None:
    reviews = quickstart.quickstart()["spec"]["accessReviewResources"]
    assert {"group": GROUP, "resource": ESC_PLURAL, "verb": "create"} in reviews


def test_it_is_not_in_the_bundle() -> None:
    """OLM fails the whole install where a bundle object's API is not served: off OpenShift,
    and on OpenShift without the Console capability. The operator applies it at run time.
    (bundle/manifests is what the generator writes: `make verify` compares them.)"""
    manifests = REPO_ROOT / bundle.BUNDLE_MANIFESTS
    kinds = {doc.get("kind") for path in sorted(manifests.glob("*.yaml"))
             for doc in yaml.safe_load_all(path.read_text()) if doc}
    assert "ClusterServiceVersion" in kinds
    assert not any(str(kind).startswith("Console") for kind in kinds), kinds


def test_the_operator_may_apply_it_and_nothing_more() -> None:
    """Its RBAC rule: the one object by name (server-side apply creates with a PATCH, which
    the API server authorises as `create` of that name)."""
    documents = [doc for doc in yaml.safe_load_all(
        (REPO_ROOT / "manifests" / "operator" / "rbac.yaml").read_text()) if doc]
    rules = [rule for doc in documents if doc["kind"] == "ClusterRole"
             for rule in doc["rules"] if "console.openshift.io" in rule.get("apiGroups", [])]
    assert rules == [{"apiGroups": ["console.openshift.io"], "resources": ["consolequickstarts"],
                      "resourceNames": [quickstart.NAME], "verbs": ["get", "create", "patch"]}]
