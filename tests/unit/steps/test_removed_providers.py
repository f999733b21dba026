"""Stores on a provider the next operand release no longer has
(manager/steps/removed_providers.py): the facts, checked against both release trees, and the
pure part. Reading the stores (from the watch cache, a listing only before it) is tested
against the real API server, run by release 0.2.0, in tests/upgrade/test_removed_providers.py."""

from __future__ import annotations

from typing import Any

import yaml

from manager.apply.cache import ObjectCache
from manager.apply.discovery import Discovery
from manager.client.kube import JsonObject, Kube
from manager.steps import removed_providers
from manager.steps.removed_providers import (
    CHECKED_OPERAND_VERSION,
    NEXT_OPERAND_VERSION,
    REMOVED_PROVIDERS,
    STORE_KINDS,
    RemovedProviders,
    StoreOnRemovedProvider,
    applies,
    listed,
    on_removed_providers,
    problem,
)
from manager.versions import EXTERNAL_SECRETS_VERSION
from tests.upstream_tree import UpstreamTree

CRD_FILES = {"SecretStore": "external-secrets.io_secretstores.yaml",
             "ClusterSecretStore": "external-secrets.io_clustersecretstores.yaml"}


class Tree(UpstreamTree):
    """A release tree with its two store CRDs parsed."""

    def __init__(self, version: str):
        super().__init__(version)
        self.crds = {kind: yaml.safe_load(self.read(f"config/crds/bases/{name}"))
                     for kind, name in CRD_FILES.items()}

    def providers(self, kind: str, version: str) -> tuple[bool, set[str]]:
        """Whether the CRD of `kind` serves `version`, and the keys of its spec.provider."""
        [entry] = [v for v in self.crds[kind]["spec"]["versions"] if v["name"] == version]
        spec = entry["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
        return bool(entry["served"]), set(spec["provider"]["properties"])

    def registers(self, provider: str) -> bool:
        return self.has(f"pkg/register/{provider}.go")


def test_the_removed_providers_are_what_the_two_release_trees_say() -> None:
    checked, following = Tree(CHECKED_OPERAND_VERSION), Tree(NEXT_OPERAND_VERSION)
    for kind in STORE_KINDS:
        served_before, before = checked.providers(kind, "v1")
        served_after, after = following.providers(kind, "v1")
        assert served_before, kind
        assert served_after, kind
        assert before - after == set(REMOVED_PROVIDERS), (kind, before - after)
        # v1beta1 still has them, in both releases, but neither serves it: no store can name
        # them there.
        for tree in (checked, following):
            served, old = tree.providers(kind, "v1beta1")
            assert not served, (kind, tree.prefix)
            assert set(REMOVED_PROVIDERS) <= old, (kind, tree.prefix)
    for provider in REMOVED_PROVIDERS:
        assert checked.registers(provider), provider
        assert not following.registers(provider), provider


def store(kind: str, name: str, provider: Any, namespace: str | None = None) -> JsonObject:
    metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
    return {"apiVersion": "external-secrets.io/v1", "kind": kind, "metadata": metadata,
            "spec": {"provider": provider}}


def test_only_stores_on_a_removed_provider_are_found() -> None:
    stores = [store("SecretStore", "a", {"alibaba": {"regionID": "r"}}, "apps"),
              store("SecretStore", "f", {"fake": {"data": []}}, "apps"),
              store("SecretStore", "d", {"device42": {}}, "team"),  # as the cache keeps it
              store("SecretStore", "broken", "not an object", "apps"),
              {"metadata": {"name": "empty", "namespace": "apps"}}]
    assert on_removed_providers("SecretStore", stores) == [
        StoreOnRemovedProvider("SecretStore", "apps", "a", "alibaba"),
        StoreOnRemovedProvider("SecretStore", "team", "d", "device42")]
    [cluster] = on_removed_providers(
        "ClusterSecretStore", [store("ClusterSecretStore", "c", {"device42": {"host": "h"}})])
    assert str(cluster) == "ClusterSecretStore c (device42)"


def test_the_message_names_the_stores_caps_them_and_says_what_to_do() -> None:
    many = [StoreOnRemovedProvider("SecretStore", "ns", f"s{i}", "alibaba") for i in range(8)]
    assert listed(many[:2]) == "SecretStore ns/s0 (alibaba), SecretStore ns/s1 (alibaba)"
    assert listed(many).endswith("SecretStore ns/s4 (alibaba) and 3 more")
    assert "ns/s5" not in listed(many)
    text = problem(many[:1])
    assert text.startswith("1 store uses a provider that external-secrets v2.9.0, the operand "
                           "of the next release (0.3.0), no longer has: SecretStore ns/s0 ")
    assert text.endswith("move it to a supported provider or delete it")
    assert problem(many).startswith("8 stores use providers that")


def test_the_check_applies_only_to_the_operand_the_facts_are_about() -> None:
    assert applies(CHECKED_OPERAND_VERSION)
    assert not applies(NEXT_OPERAND_VERSION)
    kube = Kube.__new__(Kube)  # never called: nothing is read or watched
    idle = RemovedProviders(kube, Discovery(kube), ObjectCache(),
                            operand_version=NEXT_OPERAND_VERSION)
    assert idle.watches() == frozenset()
    checking = RemovedProviders(kube, Discovery(kube), ObjectCache(),
                                operand_version=CHECKED_OPERAND_VERSION)
    kinds = {(spec.kind, spec.field_selector) for spec in checking.watches()}
    assert kinds == {("SecretStore", None), ("ClusterSecretStore", None),
                     ("CustomResourceDefinition", "metadata.name=secretstores.external-secrets.io"),
                     ("CustomResourceDefinition",
                      "metadata.name=clustersecretstores.external-secrets.io")}
    assert all(spec.cached and spec.spec_keys == "provider" for spec in checking.watches()
               if spec.kind in STORE_KINDS)


async def test_inactive_it_reads_nothing() -> None:
    kube = Kube.__new__(Kube)  # no session: any request would fail
    idle = RemovedProviders(kube, Discovery(kube), ObjectCache(),
                            operand_version=NEXT_OPERAND_VERSION)
    assert await idle.stores() == []


def test_the_shipped_operand_is_checked_or_the_facts_are_revisited() -> None:
    """When the pinned operand moves on, this module goes quiet: fine for v2.9.0 (its stores
    cannot name the removed providers), but a newer pin may remove others."""
    assert EXTERNAL_SECRETS_VERSION in (CHECKED_OPERAND_VERSION, NEXT_OPERAND_VERSION), (
        f"external-secrets {EXTERNAL_SECRETS_VERSION}: revisit {removed_providers.__name__}")
