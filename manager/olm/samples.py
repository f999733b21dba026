"""alm-examples: the objects the OpenShift console offers as starting points.

The two singletons come first, named `cluster` as their CRDs require. The stores use the
`fake` provider, so the SecretStore/ExternalSecret/PushSecret samples work without any
cloud account; the names tie them together (the ExternalSecret reads from the SecretStore).
Every other operand kind has one sample too, with placeholder endpoints and the names of
the Secrets that would hold credentials.
"""

from __future__ import annotations

from typing import Any

from manager.names import API_VERSION, ESC_KIND, ESM_KIND, SINGLETON_NAME

_ES_V1 = "external-secrets.io/v1"
_ES_V1ALPHA1 = "external-secrets.io/v1alpha1"
_GENERATORS = "generators.external-secrets.io/v1alpha1"
_SAMPLE_NAMESPACE = "default"


def _singleton(kind: str) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind,
            "metadata": {"name": SINGLETON_NAME}, "spec": {}}


def _fake_provider() -> dict[str, Any]:
    return {"fake": {"data": [{"key": "/sample/greeting", "value": "hello"}]}}


def _external_secret_spec(store_kind: str) -> dict[str, Any]:
    return {
        "refreshInterval": "1h",
        "secretStoreRef": {"kind": store_kind, "name": "sample-store"},
        "target": {"name": "sample-secret"},
        "data": [{"secretKey": "greeting", "remoteRef": {"key": "/sample/greeting"}}],
    }


def alm_examples() -> list[dict[str, Any]]:
    namespaced = {"namespace": _SAMPLE_NAMESPACE}
    return [
        _singleton(ESC_KIND),
        _singleton(ESM_KIND),
        {"apiVersion": _ES_V1, "kind": "SecretStore",
         "metadata": {"name": "sample-store", **namespaced},
         "spec": {"provider": _fake_provider()}},
        {"apiVersion": _ES_V1, "kind": "ClusterSecretStore",
         "metadata": {"name": "sample-store"},
         "spec": {"provider": _fake_provider()}},
        {"apiVersion": _ES_V1, "kind": "ExternalSecret",
         "metadata": {"name": "sample-secret", **namespaced},
         "spec": _external_secret_spec("SecretStore")},
        {"apiVersion": _ES_V1, "kind": "ClusterExternalSecret",
         "metadata": {"name": "sample-secret"},
         "spec": {"namespaceSelectors": [{"matchLabels": {"sample.example.com/secrets": "true"}}],
                  "refreshTime": "1h",
                  "externalSecretSpec": _external_secret_spec("ClusterSecretStore")}},
        {"apiVersion": _ES_V1ALPHA1, "kind": "PushSecret",
         "metadata": {"name": "sample-push", **namespaced},
         "spec": {"refreshInterval": "1h",
                  "secretStoreRefs": [{"kind": "SecretStore", "name": "sample-store"}],
                  "selector": {"secret": {"name": "sample-secret"}},
                  "data": [{"match": {"secretKey": "greeting",
                                      "remoteRef": {"remoteKey": "/sample/pushed"}}}]}},
        {"apiVersion": _ES_V1ALPHA1, "kind": "ClusterPushSecret",
         "metadata": {"name": "sample-push"},
         "spec": {"namespaceSelectors": [{"matchLabels": {"sample.example.com/secrets": "true"}}],
                  "refreshTime": "1h",
                  "pushSecretSpec": {
                      "secretStoreRefs": [{"kind": "ClusterSecretStore", "name": "sample-store"}],
                      "selector": {"secret": {"name": "sample-secret"}},
                      "data": [{"match": {"secretKey": "greeting",
                                          "remoteRef": {"remoteKey": "/sample/pushed"}}}]}}},
        *(_generator(kind, spec) for kind, spec in _generator_specs().items()),
        {"apiVersion": _GENERATORS, "kind": "ClusterGenerator",
         "metadata": {"name": "sample-password"},
         "spec": {"kind": "Password", "generator": {"passwordSpec": _password_spec()}}},
    ]


def _generator(kind: str, spec: dict[str, Any]) -> dict[str, Any]:
    name = f"sample-{kind.lower()}"
    return {"apiVersion": _GENERATORS, "kind": kind,
            "metadata": {"name": name, "namespace": _SAMPLE_NAMESPACE}, "spec": spec}


def _password_spec() -> dict[str, Any]:
    return {"length": 32, "digits": 5, "symbols": 5, "noUpper": False, "allowRepeat": True}


def _secret_key(name: str, key: str) -> dict[str, str]:
    return {"name": name, "key": key}


def _generator_specs() -> dict[str, dict[str, Any]]:
    """One namespaced generator of each kind; credentials are named, never included."""
    service_account = {"name": "sample-workload"}
    return {
        "Password": _password_spec(),
        "UUID": {},
        "SSHKey": {"keyType": "ed25519", "comment": "sample"},
        "MFA": {"secret": _secret_key("sample-totp-seed", "seed")},
        "ACRAccessToken": {"registry": "example.azurecr.io", "auth": {"managedIdentity": {}}},
        "CloudsmithAccessToken": {"orgSlug": "example", "serviceSlug": "sample",
                                  "serviceAccountRef": service_account},
        "ECRAuthorizationToken": {"region": "us-east-1"},
        "GCRAccessToken": {"projectID": "sample-project", "auth": {"secretRef": {
            "secretAccessKeySecretRef": _secret_key("sample-gcp-credentials", "key.json")}}},
        "GithubAccessToken": {"appID": "12345", "installID": "67890", "auth": {"privateKey": {
            "secretRef": _secret_key("sample-github-app", "private-key")}}},
        "GitlabDeployToken": {"projectID": "sample-group/sample-project", "name": "sample",
                              "scopes": ["read_registry"], "auth": {"token": {
                                  "secretRef": _secret_key("sample-gitlab", "token")}}},
        "BeyondtrustWorkloadCredentialsDynamicSecret": {"provider": {
            "auth": {"apikey": {"token": _secret_key("sample-beyondtrust", "api-key")}},
            "server": {"apiUrl": "https://beyondtrust.example.com/api",
                       "siteId": "00000000-0000-4000-8000-000000000000"},
            "folderPath": "sample/aws-temporary"}},
        "Grafana": {"url": "https://grafana.example.com",
                    "auth": {"token": _secret_key("sample-grafana", "token")},
                    "serviceAccount": {"name": "sample", "role": "Viewer"}},
        "QuayAccessToken": {"url": "quay.io", "robotAccount": "example+sample",
                            "serviceAccountRef": service_account},
        "STSSessionToken": {"region": "us-east-1"},
        "VaultDynamicSecret": {"path": "/database/creds/sample", "method": "GET",
                               "provider": {"server": "https://vault.example.com:8200"}},
        "Webhook": {"url": "https://generator.example.com/value", "method": "GET",
                    "result": {"jsonPath": "$.value"}},
        # Written by the controller, not by people; the console hides it (internal object).
        "GeneratorState": {"resource": {}, "state": {}},
    }
