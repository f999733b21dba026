"""OLM packaging: the operator's own manifests and the bundle generated from them.

`python -m manager bundle` writes manifests/operator/ (Namespace, ServiceAccount,
Deployment) and bundle/ (ClusterServiceVersion, CRDs, metadata) from three inputs:
manager/versions.py (images and versions), manifests/operator/rbac.yaml (permissions) and
the CRDs (ours from manifests/crds/, the operand's from hack/fetch-crds.sh).
"""
