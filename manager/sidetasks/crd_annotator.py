"""The CRD annotator: cert-manager's CA injector annotation on the operand's CRDs.

With `spec.appConfig.certManagerConfig.addInjectorAnnotations: "true"`, every CRD of the
groups external-secrets.io and generators.external-secrets.io present in the cluster carries
`cert-manager.io/inject-ca-from: <operand namespace>/external-secrets-webhook`. The annotation
is server-side applied with our field manager and nothing else of the CRD is touched; when
the setting goes back to "false" the annotation is released the same way, which removes it
unless someone else also set it. The CRDs are found by their label
`external-secrets.io/component=controller` and read as metadata only (no schemas).
"""

from __future__ import annotations

import logging

from manager.apply.convergence import applied_by
from manager.apply.results import Action, ObjectRef, ObjectResult
from manager.client.kube import PARTIAL_METADATA_LIST, JsonObject, Kube
from manager.names import (
    CRD_API_VERSION,
    CRD_COLLECTION,
    CRD_KIND,
    FIELD_MANAGER,
    OPERAND_CRD_LABEL,
    WEBHOOK_CERTIFICATE,
    is_operand_crd,
)
from manager.render.context import INJECT_CA_FROM
from manager.reporting.esm_status import AnnotatorReport

logger = logging.getLogger(__name__)


def _owns_annotation(crd: JsonObject, field_manager: str) -> bool:
    fields = applied_by(crd, field_manager) or {}
    annotations = fields.get("f:metadata", {}).get("f:annotations", {})
    return f"f:{INJECT_CA_FROM}" in annotations


class CrdAnnotator:
    def __init__(self, kube: Kube, field_manager: str = FIELD_MANAGER):
        self._kube = kube
        self._field_manager = field_manager

    async def reconcile(self, enabled: bool, namespace: str) -> AnnotatorReport:
        listing = await self._kube.list(CRD_COLLECTION, label_selector=OPERAND_CRD_LABEL,
                                        accept=PARTIAL_METADATA_LIST)
        crds = [item for item in listing.get("items") or []
                if is_operand_crd(item["metadata"]["name"])]
        value = f"{namespace}/{WEBHOOK_CERTIFICATE}"
        results = []
        for crd in crds:
            result = await self._converge(crd, value if enabled else None)
            if result is not None:
                results.append(result)
        listed = tuple((crd["metadata"]["name"], str(crd["metadata"].get("resourceVersion")))
                       for crd in crds)
        return AnnotatorReport(enabled, len(crds), tuple(results), listed)

    async def _converge(self, crd: JsonObject, value: str | None) -> ObjectResult | None:
        metadata = crd["metadata"]
        owned = _owns_annotation(crd, self._field_manager)
        current = (metadata.get("annotations") or {}).get(INJECT_CA_FROM)
        if value is not None and owned and current == value:
            return None
        if value is None and not owned:
            return None
        body: JsonObject = {"apiVersion": CRD_API_VERSION, "kind": CRD_KIND,
                            "metadata": {"name": metadata["name"]}}
        if value is not None:
            body["metadata"]["annotations"] = {INJECT_CA_FROM: value}
        await self._kube.apply(f"{CRD_COLLECTION}/{metadata['name']}", body,
                               field_manager=self._field_manager)
        verb = "annotated" if value is not None else "released annotation"
        logger.info("action=%s kind=%s name=%s annotation=%s", verb.replace(" ", "-"), CRD_KIND,
                    metadata["name"], INJECT_CA_FROM)
        return ObjectResult(ObjectRef(CRD_API_VERSION, CRD_KIND, "", metadata["name"]),
                            Action.UPDATED)
