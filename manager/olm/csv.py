"""The ClusterServiceVersion: how OLM installs, describes and upgrades the operator."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Sequence
from typing import Any

from manager.olm import descriptors, identity, samples
from manager.olm.crds import Crd
from manager.olm.descriptors import OwnedKind
from manager.olm.icon import ICON_SVG
from manager.olm.identity import RelatedImages
from manager.olm.rbac import OperatorPermissions

_ARCHITECTURES = ("amd64", "arm64", "ppc64le", "s390x")

# OpenShift's feature annotations (what the console's filters show). `disconnected` is
# decided per bundle (_disconnected).
_FEATURES = {
    "fips-compliant": "false",
    "proxy-aware": "true",     # OLM's proxy reaches the operand containers that call out
    # The operand webhook and the operator's /metrics follow the cluster's TLS security profile;
    # bitwarden-sdk-server (v0.5.2 has no TLS settings) cannot (docs/operations.md).
    "tls-profiles": "true",
    "token-auth-aws": "false",
    "token-auth-azure": "false",
    "token-auth-gcp": "false",
    "cnf": "false",
    "cni": "false",
    "csi": "false",
}

_DESCRIPTION = """\
The External Secrets Operator installs and runs [external-secrets](https://external-secrets.io),
which keeps Kubernetes Secrets in sync with external secret managers (AWS Secrets Manager,
HashiCorp Vault, Google Secret Manager, Azure Key Vault, Bitwarden and many more).

## Getting started

Create the singleton `ExternalSecretsConfig` named `cluster`:

```yaml
apiVersion: operator.openshift.io/v1alpha1
kind: ExternalSecretsConfig
metadata:
  name: cluster
spec: {}
```

The operator then deploys the external-secrets controller, its webhook and the certificate
controller (or cert-manager certificates, with `spec.appConfig.certManagerConfig`) into the
`external-secrets` namespace, and optionally bitwarden-sdk-server. The `ExternalSecretsManager`
named `cluster`, created by the operator, holds defaults for everything it deploys (labels,
proxy, log level, scheduling, resources) and shows the status of its controllers.

## Uninstalling

Deleting the `ExternalSecretsConfig` stops management and leaves the operand running.
`python -m manager uninstall --operand` lists, and when confirmed deletes, every object the
operator created.
"""

_UNINSTALL_MESSAGE = (
    "The external-secrets operand keeps running after the operator is removed. To remove it, "
    "delete the ExternalSecretsConfig and then the objects labelled "
    "app.kubernetes.io/managed-by=external-secrets-operator (or run "
    "`python -m manager uninstall --operand`)."
)


def owned_entry(crd: Crd, kind: OwnedKind) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": crd.name,
        "version": crd.version("storage")["name"],
        "kind": crd.kind,
        "displayName": kind.display_name,
        "description": kind.description,
    }
    if kind.resources:
        entry["resources"] = [{"kind": k, "version": v} for k, v in kind.resources]
    if kind.spec:
        entry["specDescriptors"] = [d.to_csv() for d in kind.spec]
    if kind.status:
        entry["statusDescriptors"] = [d.to_csv() for d in kind.status]
    return entry


def owned_kinds(own: Sequence[Crd], operand: Sequence[Crd]) -> list[tuple[Crd, OwnedKind]]:
    ours = {"ExternalSecretsConfig": descriptors.EXTERNAL_SECRETS_CONFIG,
            "ExternalSecretsManager": descriptors.EXTERNAL_SECRETS_MANAGER}
    pairs = []
    for crd in own:
        if crd.kind not in ours:
            raise ValueError(f"no CSV description for our CRD {crd.name}")
        pairs.append((crd, ours[crd.kind]))
    for crd in operand:
        pairs.append((crd, descriptors.operand_kind(
            crd.kind, crd.schema.get("description", ""), crd.group)))
    return pairs


def _disconnected(image: str, related_images: RelatedImages) -> str:
    """`features.operators.openshift.io/disconnected`: "true" when every image the bundle
    installs or deploys (the operator image, relatedImages, the same as the Deployment's
    RELATED_IMAGE_* variables) is named by digest, so it can be mirrored and pulled from a
    mirror as it is: hack/publish-images.sh builds such bundles, hack/mirror-images.sh
    mirrors them, tests/olm/test_mirror.py installs one from a mirror alone. "false" for
    tags (the committed bundle's pinned defaults)."""
    references = [image, *(reference for _, reference in related_images)]
    return "true" if all(_DIGEST.search(reference) for reference in references) else "false"


_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")


def _annotations(image: str, related_images: RelatedImages) -> dict[str, str]:
    annotations = {
        "alm-examples": json.dumps(samples.alm_examples(), indent=2),
        "capabilities": "Basic Install",
        "categories": "Security",
        "containerImage": image,
        "description": "Installs and manages external-secrets, which syncs Kubernetes Secrets "
        "with external secret managers.",
        "olm.skipRange": identity.SKIP_RANGE,
        "operatorframework.io/suggested-namespace": identity.NAMESPACE,
        # The console offers to label a new openshift-* install namespace for platform
        # monitoring; for any other namespace that label is the administrator's choice
        # (docs/operations.md, "Which Prometheus").
        "operatorframework.io/cluster-monitoring": "true",
        # `oc adm must-gather --all-images` runs /usr/bin/gather of this image: the operator
        # image itself carries it (Dockerfile, hack/gather), so the gather always matches the
        # installed release, and a mirrored bundle names the mirrored image here too.
        "operators.openshift.io/must-gather-image": image,
        # Bookkeeping objects of the operand's controller: hidden from the console.
        "operators.operatorframework.io/internal-objects": json.dumps(
            ["generatorstates.generators.external-secrets.io"]),
        "operators.operatorframework.io/builder": "external-secrets-operator-bundle",
        "console.openshift.io/disable-operand-delete": "true",
        "operator.openshift.io/uninstall-message": _UNINSTALL_MESSAGE,
    }
    features = {"disconnected": _disconnected(image, related_images), **_FEATURES}
    annotations.update({f"features.operators.openshift.io/{name}": value
                        for name, value in features.items()})
    return annotations


def _install(deployment: dict[str, Any], permissions: OperatorPermissions) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if permissions.cluster_rules:
        spec["clusterPermissions"] = [{"serviceAccountName": identity.SERVICE_ACCOUNT,
                                       "rules": permissions.cluster_rules}]
    if permissions.namespace_rules:
        spec["permissions"] = [{"serviceAccountName": identity.SERVICE_ACCOUNT,
                                "rules": permissions.namespace_rules}]
    spec["deployments"] = [{"name": deployment["metadata"]["name"],
                            "label": deployment["metadata"]["labels"],
                            "spec": deployment["spec"]}]
    return {"strategy": "deployment", "spec": spec}


def cluster_service_version(*, deployment: dict[str, Any], permissions: OperatorPermissions,
                            owned: Sequence[tuple[Crd, OwnedKind]], image: str,
                            related_images: RelatedImages = identity.RELATED_IMAGES,
                            ) -> dict[str, Any]:
    """The CSV; `related_images` are the operand images, the same as the Deployment's
    RELATED_IMAGE_* variables (`deployment`), and the operator `image` is listed after them."""
    labels = {f"operatorframework.io/arch.{arch}": "supported" for arch in _ARCHITECTURES}
    labels["operatorframework.io/os.linux"] = "supported"
    return {
        "apiVersion": "operators.coreos.com/v1alpha1",
        "kind": "ClusterServiceVersion",
        "metadata": {"name": identity.CSV_NAME, "annotations": _annotations(image, related_images),
                     "labels": labels},
        "spec": {
            "displayName": "External Secrets Operator",
            "description": _DESCRIPTION,
            "version": identity.OPERATOR_VERSION,
            "maturity": "alpha",
            "minKubeVersion": identity.MIN_KUBE_VERSION,
            "keywords": ["security", "secrets", "external-secrets", "external-secrets-operator"],
            "provider": {"name": "external-secrets-operator project"},
            "maintainers": [{"name": "external-secrets-operator maintainers",
                             "email": "maintainers@external-secrets-operator.invalid"}],
            "links": [{"name": "external-secrets documentation",
                       "url": "https://external-secrets.io"}],
            "icon": [{"base64data": base64.b64encode(ICON_SVG.encode()).decode(),
                      "mediatype": "image/svg+xml"}],
            "installModes": [
                {"type": mode, "supported": mode == "AllNamespaces"}
                for mode in ("OwnNamespace", "SingleNamespace", "MultiNamespace", "AllNamespaces")
            ],
            "install": _install(deployment, permissions),
            "customresourcedefinitions": {
                "owned": [owned_entry(crd, kind) for crd, kind in owned],
            },
            "relatedImages": [
                *({"name": name, "image": ref} for name, ref in related_images),
                {"name": identity.PACKAGE, "image": image},
            ],
        },
    }
