"""The operator's ConsoleQuickStart: a guided tour in OpenShift's console (the "?" menu,
Quick Starts) from an installed operator to a first synced Secret.

Three tasks: create ExternalSecretsConfig/cluster and wait for Ready; create a namespace and
a SecretStore of the `fake` provider (values kept in the store's own spec, so no secret
manager or credential is needed); create an ExternalSecret and read the Secret it wrote. Each
task says how to check it and what to look at when the check fails, in this operator's terms
(status.failure, `oc explain`, the conditions).

Not in the bundle, although OLM accepts the kind there: OLM fails the whole install when a
bundle object's API is not served, and console.openshift.io is not served off OpenShift nor on
OpenShift clusters installed without the Console capability (its CRDs belong to that
capability; OLM does not honour the capability annotation on a bundle's objects). The
operator applies it at run time where the API is served (manager/sidetasks/console_quickstart.py).

What the console requires (console.openshift.io/v1, openshift/api's ConsoleQuickStart CRD):
`displayName`, `durationMinutes` (at least 1), `description` (at most 256 characters),
`introduction` and `tasks` (at least one, each with a `title` and a `description`; a
`review` with `instructions` and `failedTaskHelp`, a `summary` with `success` and `failed`,
at most 128 characters). Texts are markdown; a fenced block followed by `{{copy}}` gets a
copy button. `accessReviewResources` hides the tour from users who could not do it.
tests/unit/olm/test_quickstart.py checks the object against that CRD's schema;
tests/integration/test_console_quickstart.py creates it through the API server.
"""

from __future__ import annotations

import base64
from typing import Any, Final

from manager.names import API_VERSION, ESC_KIND, ESC_PLURAL, GROUP, SINGLETON_NAME
from manager.olm import identity
from manager.olm.icon import ICON_SVG

QUICKSTART_API: Final = "console.openshift.io/v1"
QUICKSTART_KIND: Final = "ConsoleQuickStart"
NAME: Final = f"{identity.PACKAGE}-first-secret"
CRD: Final = "consolequickstarts.console.openshift.io"
TRY_NAMESPACE: Final = "eso-quickstart"
"""The namespace the tour creates for its SecretStore, ExternalSecret and Secret."""


def _yaml_block(text: str) -> str:
    """A fenced YAML block the console gives a copy button."""
    return f"```yaml\n{text.strip()}\n```{{{{copy}}}}"


def _shell_block(text: str) -> str:
    return f"```\n{text.strip()}\n```{{{{copy}}}}"


_ESC = f"""
apiVersion: {API_VERSION}
kind: {ESC_KIND}
metadata:
  name: {SINGLETON_NAME}
spec: {{}}
"""

_APPLY_AND_WAIT = f"""
oc apply -f - <<'EOF'
{_ESC.strip()}
EOF
oc wait {ESC_PLURAL}/{SINGLETON_NAME} --for=condition=Ready --timeout=5m
"""

_STORE = f"""
apiVersion: v1
kind: Namespace
metadata:
  name: {TRY_NAMESPACE}
---
apiVersion: external-secrets.io/v1
kind: SecretStore
metadata:
  name: tour-store
  namespace: {TRY_NAMESPACE}
spec:
  provider:
    fake:
      data:
        - key: /tour/greeting
          value: hello from the fake provider
"""

_EXTERNAL_SECRET = f"""
apiVersion: external-secrets.io/v1
kind: ExternalSecret
metadata:
  name: tour-secret
  namespace: {TRY_NAMESPACE}
spec:
  refreshInterval: 1m
  secretStoreRef:
    kind: SecretStore
    name: tour-store
  target:
    name: tour-secret
  data:
    - secretKey: greeting
      remoteRef:
        key: /tour/greeting
"""


def _install_task() -> dict[str, Any]:
    return {
        "title": "Install the external-secrets stack",
        "description": (
            "The operator installs nothing until an ExternalSecretsConfig named `cluster` "
            "exists. An empty spec takes the defaults: the operand in namespace "
            "`external-secrets`, its webhook certificate from the built-in cert-controller.\n\n"
            "1. Click the **+** (Import YAML) button in the masthead.\n"
            "2. Paste this object and click **Create**:\n\n"
            f"{_yaml_block(_ESC)}\n\n"
            "Or from a terminal:\n\n"
            f"{_shell_block(_APPLY_AND_WAIT)}"),
        "review": {
            "instructions": (
                "Run `oc get esc cluster`. Does the READY column say **True**?"),
            "failedTaskHelp": (
                "`oc describe esc cluster` shows the Degraded condition and `status.failure`, "
                "which name the object or setting at fault and what to change; Progressing "
                "with a reason means it is still waiting (images pulled, pods starting). "
                "`oc explain esc.spec` lists every setting."),
        },
        "summary": {
            "success": "The controller, its webhook and the cert-controller run in "
                       "namespace `external-secrets`.",
            "failed": "The ExternalSecretsConfig is not Ready: see its status.",
        },
    }


def _store_task() -> dict[str, Any]:
    return {
        "title": "Create a SecretStore",
        "description": (
            "A SecretStore tells the operand where secrets come from and how to log in. The "
            "`fake` provider keeps its values in its own spec, so this one needs no secret "
            f"manager and no credential. Create the namespace `{TRY_NAMESPACE}` and the "
            "store in it:\n\n"
            f"{_yaml_block(_STORE)}"),
        "review": {
            "instructions": (
                f"Run `oc -n {TRY_NAMESPACE} get secretstore tour-store`. Does STATUS say "
                "**Valid** and READY **True**?"),
            "failedTaskHelp": (
                "If the API server refused the store, the external-secrets webhook is not "
                "answering yet: go back to the first task. Otherwise `oc -n "
                f"{TRY_NAMESPACE} describe secretstore tour-store` shows the controller's "
                "events."),
        },
        "summary": {
            "success": "The store is ready to serve its one value.",
            "failed": "The SecretStore is not Ready.",
        },
    }


def _external_secret_task() -> dict[str, Any]:
    read = (f"oc -n {TRY_NAMESPACE} get secret tour-secret "
            "-o jsonpath='{.data.greeting}' | base64 -d")
    return {
        "title": "Sync a first secret",
        "description": (
            "An ExternalSecret names a store, the values to read from it and the Kubernetes "
            "Secret to write them into; the controller keeps that Secret up to date (here "
            "every minute). Create it:\n\n"
            f"{_yaml_block(_EXTERNAL_SECRET)}\n\n"
            "Then read the Secret the controller wrote:\n\n"
            f"{_shell_block(read)}"),
        "review": {
            "instructions": (
                f"Does `oc -n {TRY_NAMESPACE} get externalsecret tour-secret` say "
                "**SecretSynced**, and does the command print **hello from the fake "
                "provider**?"),
            "failedTaskHelp": (
                f"`oc -n {TRY_NAMESPACE} describe externalsecret tour-secret`: its events "
                "carry the provider's error (a key the store does not hold, a store that is "
                "not Ready)."),
        },
        "summary": {
            "success": "The Secret `tour-secret` holds the value, and is refreshed every "
                       "minute.",
            "failed": "The ExternalSecret did not sync: see its events.",
        },
    }


def quickstart() -> dict[str, Any]:
    """The ConsoleQuickStart, with the operator's icon (the CSV's)."""
    return {
        "apiVersion": QUICKSTART_API,
        "kind": QUICKSTART_KIND,
        "metadata": {"name": NAME},
        "spec": {
            "displayName": "Sync a first secret with the External Secrets Operator",
            "durationMinutes": 10,
            "icon": "data:image/svg+xml;base64," + base64.b64encode(ICON_SVG.encode()).decode(),
            "tags": ["external-secrets", "secrets"],
            "description": (
                "Install the external-secrets stack, create a SecretStore and sync a first "
                "Kubernetes Secret from it, with the fake provider: no secret manager or "
                "credential needed."),
            "introduction": (
                "The External Secrets Operator installs and runs "
                "[external-secrets](https://external-secrets.io), which copies secrets from "
                "a secret manager (Vault, AWS Secrets Manager, Azure Key Vault, ...) into "
                "Kubernetes Secrets and keeps them up to date.\n\n"
                "In this tour you will:\n"
                "- install the stack with an ExternalSecretsConfig,\n"
                "- create a SecretStore of the `fake` provider, which holds its values "
                "itself,\n"
                "- create an ExternalSecret and read the Secret it produces."),
            "prerequisites": [
                "The External Secrets Operator is installed (Operators > Installed "
                "Operators shows it Succeeded).",
                "You may create cluster-scoped resources (cluster-admin).",
            ],
            "tasks": [_install_task(), _store_task(), _external_secret_task()],
            "conclusion": (
                "The stack runs and syncs. Next, replace the `fake` provider with your "
                "secret manager's (one SecretStore per namespace, or a ClusterSecretStore "
                "for all), and see the ExternalSecretsConfig's settings with "
                "`oc explain esc.spec`. To remove what the tour made: "
                f"`oc delete namespace {TRY_NAMESPACE}`."),
            "accessReviewResources": [
                {"group": GROUP, "resource": ESC_PLURAL, "verb": "create"},
                {"group": "", "resource": "namespaces", "verb": "create"},
            ],
        },
    }
