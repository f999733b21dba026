"""The ExternalSecretsManager the operator creates when there is none (the reference's
labels, an empty spec: every default applies)."""

from __future__ import annotations

import logging
import os

from manager import __version__
from manager.apply.cache import ObjectCache
from manager.client.kube import ApiError, JsonObject, Kube
from manager.names import (
    API_VERSION,
    ESM_KIND,
    ESM_PATH,
    FIELD_MANAGER,
    MANAGED_BY_LABEL,
    OPERATOR_NAME,
    SINGLETON_NAME,
)
from manager.steps.observe import read_singleton

logger = logging.getLogger(__name__)


def esm_default_object() -> JsonObject:
    version = os.environ.get("OPERATOR_IMAGE_VERSION") or __version__
    return {
        "apiVersion": API_VERSION,
        "kind": ESM_KIND,
        "metadata": {
            "name": SINGLETON_NAME,
            "labels": {
                "app.kubernetes.io/name": SINGLETON_NAME,
                "app.kubernetes.io/instance": SINGLETON_NAME,
                "app.kubernetes.io/version": version,
                MANAGED_BY_LABEL: OPERATOR_NAME,
                "app.kubernetes.io/part-of": OPERATOR_NAME,
            },
        },
        "spec": {},
    }


async def ensure_esm(kube: Kube, cache: ObjectCache) -> JsonObject:
    """The ESM, created with defaults if missing (another instance's create wins a race)."""
    esm = await read_singleton(kube, cache, ESM_KIND, ESM_PATH)
    if esm is not None:
        return esm
    collection = ESM_PATH.rpartition("/")[0]
    try:
        esm = await kube.create(collection, esm_default_object(), field_manager=FIELD_MANAGER)
        logger.info("action=create result=created kind=%s name=%s", ESM_KIND, SINGLETON_NAME)
        return esm
    except ApiError as error:
        if error.status != 409:
            raise
    return await kube.request("GET", ESM_PATH)
