"""SecretStores and ClusterSecretStores whose provider the next operand release no longer has.

The facts (issue 36): this operator ships external-secrets v1.3.2; its next release (0.3.0)
ships v2.9.0, which no longer has two of v1.3.2's providers, `spec.provider.alibaba` (Alibaba
Cloud) and `spec.provider.device42` (Device42). Source, both release trees: v1.3.2's
`apis/externalsecrets/v1/secretstore_types.go` (SecretStoreProvider) has both fields and
`pkg/register/alibaba.go` and `device42.go` register them; v2.9.0's v1 types, its v1 CRD
schemas (`config/crds/bases/external-secrets.io_{secretstores,clustersecretstores}.yaml`) and
`pkg/register/` have neither. Both releases keep the fields in their v1beta1 types, but
neither release's CRDs serve v1beta1 (`served: false`), so no store can name them there, and
an object once stored as v1beta1 reads back through v1 (the CRDs convert by `None`: the same
fields). tests/unit/steps/test_removed_providers.py checks this against both release trees.

So after the upgrade such a store stops working, silently: the v2.9.0 CRD prunes the field,
and the controller has no such provider. The upgrade gate holds OLM back while one exists
(manager/sidetasks/upgrade_gate.py) and the status names them (reporting/outcomes.py). The
check applies only while the shipped operand is the release these facts are about
(`applies`); for another one it watches and reads nothing, and the operator's RBAC
(manifests/operator/rbac.yaml) holds no right to list or watch stores: release 0.2.0's had
one, this release's has none (tests/resilience/test_privilege.py: every right is used).

The stores are the users': read, never written. Their provider is in `spec`, so a metadata
read cannot tell it; the watches (`watches`) read whole stores, count only a change of the
provider's name (`WatchSpec.spec_keys`), and keep in the cache each store's names and the
keys of its `spec.provider`, no values. A pass reads the cache; only while a kind's watch
has not listed yet (the first pass, a watch restarting) it lists that kind itself, once, and
only if discovery says it is served. An idle operator sends nothing for it.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from manager.apply import Discovery
from manager.apply.cache import ObjectCache
from manager.client.kube import JsonObject, Kube
from manager.client.watch_spec import WatchSpec
from manager.steps.preflight import crd_watch
from manager.versions import EXTERNAL_SECRETS_VERSION

logger = logging.getLogger(__name__)

CHECKED_OPERAND_VERSION = "v1.3.2"
"""The operand release whose stores the facts below are about (the one this release ships)."""
NEXT_OPERAND_VERSION = "v2.9.0"
NEXT_OPERATOR_RELEASE = "0.3.0"
REMOVED_PROVIDERS = {"alibaba": "Alibaba Cloud", "device42": "Device42"}
"""Key under `spec.provider` -> the provider's name, for each provider of
CHECKED_OPERAND_VERSION that NEXT_OPERAND_VERSION no longer has."""

STORE_API = "external-secrets.io/v1"
STORE_KINDS = {"SecretStore": "secretstores.external-secrets.io",
               "ClusterSecretStore": "clustersecretstores.external-secrets.io"}
PROVIDER_FIELD = "provider"
LISTED = 5  # stores named in a message; the rest are counted


@dataclass(frozen=True, order=True)
class StoreOnRemovedProvider:
    """A store whose `spec.provider` names a provider the next operand release lacks."""

    kind: str
    namespace: str  # "" for a ClusterSecretStore
    name: str
    provider: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} ({self.provider})"


def applies(operand_version: str = EXTERNAL_SECRETS_VERSION) -> bool:
    """Whether the facts are about the operand this release ships."""
    return operand_version == CHECKED_OPERAND_VERSION


def on_removed_providers(kind: str, stores: Iterable[JsonObject],
                         ) -> list[StoreOnRemovedProvider]:
    """The stores of `kind` (as listed, or as the cache keeps them) that name a removed
    provider, one entry per such provider (the CRD allows one provider per store)."""
    found = []
    for store in stores:
        provider = (store.get("spec") or {}).get(PROVIDER_FIELD)
        if not isinstance(provider, dict):
            continue
        metadata = store.get("metadata") or {}
        found += [StoreOnRemovedProvider(kind, str(metadata.get("namespace") or ""),
                                         str(metadata.get("name") or ""), key)
                  for key in sorted(provider) if key in REMOVED_PROVIDERS]
    return found


def listed(stores: Sequence[StoreOnRemovedProvider], limit: int = LISTED) -> str:
    """"SecretStore ns/a (alibaba), ClusterSecretStore b (device42) and 3 more"."""
    shown = ", ".join(str(store) for store in stores[:limit])
    more = len(stores) - limit
    return f"{shown} and {more} more" if more > 0 else shown


def stores_phrase(count: int) -> str:
    """"1 store uses a provider" / "2 stores use providers"."""
    return "1 store uses a provider" if count == 1 else f"{count} stores use providers"


def problem(stores: Sequence[StoreOnRemovedProvider]) -> str:
    """What is wrong, the stores named (at most LISTED), and what to do: the gate's message
    and the status warning say the same."""
    return (f"{stores_phrase(len(stores))} that external-secrets "
            f"{NEXT_OPERAND_VERSION}, the operand of the next release ({NEXT_OPERATOR_RELEASE}), "
            f"no longer has: {listed(stores)}; such a store stops working after that upgrade: "
            "move it to a supported provider or delete it")


class RemovedProviders:
    """Finds the stores on removed providers, from the watch cache where it can."""

    def __init__(self, kube: Kube, discovery: Discovery, cache: ObjectCache,
                 operand_version: str = EXTERNAL_SECRETS_VERSION):
        self._kube = kube
        self._discovery = discovery
        self._cache = cache
        self.active = applies(operand_version)
        self._said: list[StoreOnRemovedProvider] = []  # what the log last said

    def watches(self) -> frozenset[WatchSpec]:
        """Each store kind (only its provider's name counts; cached) and its CRD (the kind
        coming or going; while it is absent, that watch vouches so and nobody asks)."""
        if not self.active:
            return frozenset()
        return frozenset({WatchSpec(STORE_API, kind, cached=True, spec_keys=PROVIDER_FIELD)
                          for kind in STORE_KINDS}
                         | {crd_watch(crd) for crd in STORE_KINDS.values()})

    async def stores(self) -> list[StoreOnRemovedProvider]:
        """Every such store, sorted; an ApiError of a listing is raised."""
        if not self.active:
            return []
        found: list[StoreOnRemovedProvider] = []
        for kind in STORE_KINDS:
            found += on_removed_providers(kind, await self._stores_of(kind))
        found.sort()
        if found != self._said:  # once per change, not once per pass
            self._said = found
            logger.log(logging.WARNING if found else logging.INFO,
                       "action=removed-providers stores=%d message=%r", len(found),
                       problem(found) if found else "no store uses a removed provider")
        return found

    async def _stores_of(self, kind: str) -> list[JsonObject]:
        cached = self._cache.objects((STORE_API.rpartition("/")[0], kind))
        if cached is not None:
            return cached
        resource = await self._discovery.resolve(STORE_API, kind)
        if resource is None:  # not served: no such store can exist
            return []
        listing = await self._kube.list(resource.collection_path())
        return list(listing.get("items") or [])
