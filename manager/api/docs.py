"""docs/api.md, generated from the models so the reference cannot drift from the CRDs.

Field tables and the rule catalogue come from walking the models with the same
`SchemaBuilder` that generates the CRDs; the prose sections below are the parts a model
cannot say (examples, transitions, deviations from the seed).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from manager.api import core_schemas, crd, models
from manager.api.docstrings import field_description
from manager.api.markers import Rule, Schema
from manager.names import API_VERSION, ESC_KIND, ESM_KIND, SINGLETON_NAME

DOCS_PATH = Path("docs") / "api.md"

# Examples shown in the reference. tests check that the models parse them and that the
# API server accepts them.
EXAMPLES: Mapping[str, dict[str, Any]] = {
    "ExternalSecretsConfig (defaults only)": {
        "apiVersion": API_VERSION, "kind": ESC_KIND,
        "metadata": {"name": SINGLETON_NAME},
        "spec": {},
    },
    "ExternalSecretsConfig (cert-manager, bitwarden, scheduling)": {
        "apiVersion": API_VERSION, "kind": ESC_KIND,
        "metadata": {"name": SINGLETON_NAME},
        "spec": {
            "controllerConfig": {
                "namespace": "external-secrets",
                "labels": {"example.com/team": "platform"},
            },
            "appConfig": {
                "logLevel": 2,
                "operatingNamespace": "team-a",
                "certManagerConfig": {
                    "enabled": "true",
                    "addInjectorAnnotations": "true",
                    "issuerRef": {"name": "cluster-ca", "kind": "ClusterIssuer",
                                  "group": "cert-manager.io"},
                    "certificateDuration": "2160h",
                    "certificateRenewBefore": "360h",
                },
                "bitwardenSecretManagerProvider": {"enabled": "true"},
                "webhookConfig": {"certificateCheckInterval": "10m"},
                "resources": {"requests": {"cpu": "10m", "memory": "96Mi"},
                              "limits": {"memory": "512Mi"}},
                "nodeSelector": {"node-role.kubernetes.io/infra": ""},
                "tolerations": [{"key": "node-role.kubernetes.io/infra",
                                 "operator": "Exists", "effect": "NoSchedule"}],
                "proxy": {"httpsProxy": "http://proxy.example.com:3128",
                          "noProxy": ".cluster.local,.svc"},
            },
        },
    },
    "ExternalSecretsConfig (controller egress narrowed to one Vault server)": {
        "apiVersion": API_VERSION, "kind": ESC_KIND,
        "metadata": {"name": SINGLETON_NAME},
        "spec": {
            "controllerConfig": {
                "networkPolicies": [{
                    "name": "allow-vault",
                    "componentName": "ExternalSecretsCoreController",
                    "egress": [{"to": [{"ipBlock": {"cidr": "10.0.5.17/32"}}],
                                "ports": [{"protocol": "TCP", "port": 8200}]}],
                }],
            },
        },
    },
    "ExternalSecretsConfig (high availability and per-component settings)": {
        "apiVersion": API_VERSION, "kind": ESC_KIND,
        "metadata": {"name": SINGLETON_NAME},
        "spec": {
            "controllerConfig": {
                "annotations": {"example.com/owner": "platform-team"},
                "componentConfigs": [
                    {"componentName": "ExternalSecretsCoreController",
                     "deploymentConfigs": {"replicas": 3, "revisionHistoryLimit": 5,
                                           "podDisruptionBudget": {"maxUnavailable": 1}},
                     "overrideEnv": [{"name": "GODEBUG", "value": "http2client=0"}],
                     "tuning": {"concurrent": 5, "clientQPS": 100, "clientBurst": 200,
                                "enableSecretsCaching": "false",
                                "enableConfigMapsCaching": "false",
                                "enableManagedSecretsCaching": "true",
                                "storeRequeueInterval": "10m"}},
                    {"componentName": "Webhook",
                     "deploymentConfigs": {"replicas": 3, "revisionHistoryLimit": 10,
                                           "podDisruptionBudget": {"minAvailable": 2}},
                     "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}},
                     "nodeSelector": {"example.com/pool": "edge"},
                     "tolerations": [{"key": "example.com/edge", "operator": "Exists",
                                      "effect": "NoSchedule"}],
                     "affinity": {"podAntiAffinity": {
                         "preferredDuringSchedulingIgnoredDuringExecution": [{
                             "weight": 100, "podAffinityTerm": {
                                 "topologyKey": "kubernetes.io/hostname",
                                 "labelSelector": {"matchLabels": {
                                     "app.kubernetes.io/name": "external-secrets-webhook"}}}}]}},
                     "topologySpreadConstraints": [{
                         "maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
                         "whenUnsatisfiable": "ScheduleAnyway",
                         "labelSelector": {"matchLabels": {
                             "app.kubernetes.io/name": "external-secrets-webhook"}}}],
                     "priorityClassName": "system-cluster-critical"},
                    {"componentName": "CertController",
                     "deploymentConfigs": {"manageReplicas": "false",
                                           "revisionHistoryLimit": 10}},
                ],
            },
            "appConfig": {
                "webhookConfig": {"failurePolicy": "Ignore", "timeoutSeconds": 10},
                "trustedCABundle": {"configMapName": "private-ca", "key": "ca-bundle.crt"},
            },
        },
    },
    "ExternalSecretsManager (global defaults)": {
        "apiVersion": API_VERSION, "kind": ESM_KIND,
        "metadata": {"name": SINGLETON_NAME},
        "spec": {
            "globalConfig": {
                "labels": {"example.com/cost-center": "1234"},
                "logLevel": 2,
                "proxy": {"httpProxy": "http://proxy.example.com:3128"},
            },
        },
    },
}


@dataclass(frozen=True)
class FieldRow:
    path: str
    type: str
    default: str
    validation: str
    description: str


@dataclass(frozen=True)
class RuleRow:
    path: str
    rule: Rule


class _Walker:
    """Walks a root model's fields depth-first, yielding table rows and rules."""

    def __init__(self, builder: crd.SchemaBuilder) -> None:
        self._builder = builder
        self.rules: list[RuleRow] = []

    def fields(self, model: type[BaseModel], prefix: str) -> Iterator[FieldRow]:
        self.rules.extend(RuleRow(prefix or "(root)", r) for r in _class_rules(model))
        for attr, info in model.model_fields.items():
            name = info.alias or attr
            if not prefix and name in ("apiVersion", "kind", "metadata"):
                continue
            path = f"{prefix}.{name}" if prefix else name
            description = field_description(model, attr)
            schema = self._builder.field(info, description)
            marker = crd.field_marker(info.metadata)
            self.rules.extend(RuleRow(path, r) for r in marker.rules)
            yield FieldRow(path, _type_name(info.annotation, marker), _default(info.default),
                           _validation(schema, info.is_required() or marker.required),
                           " ".join((description or "").split()))
            nested = _nested_model(info.annotation)
            if nested is not None and marker.core_type is None:
                item = "[]" if get_origin(crd.strip_optional(info.annotation)) is list else ""
                yield from self.fields(nested, f"{path}{item}")
            self._value_rules(info.annotation, path)

    def _value_rules(self, annotation: Any, path: str) -> None:
        """Rules on map values (e.g. label values) hang off `Annotated` value types."""
        inner = crd.strip_optional(annotation)
        if get_origin(inner) is dict:
            value = get_args(inner)[1]
            for meta in get_args(value)[1:]:
                if isinstance(meta, Schema):
                    self.rules.extend(RuleRow(f"{path}[*]", r) for r in meta.rules)


def _class_rules(model: type[BaseModel]) -> tuple[Rule, ...]:
    found: tuple[Rule, ...] = model.__dict__.get("__cel_rules__", ())
    return found


def _nested_model(annotation: Any) -> type[BaseModel] | None:
    inner = crd.strip_optional(annotation)
    if get_origin(inner) is list:
        inner = get_args(inner)[0]
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return inner
    return None


def _type_name(annotation: Any, marker: Schema) -> str:
    inner = crd.strip_optional(annotation)
    origin = get_origin(inner)
    if marker.core_type is not None:
        core = f"core/v1 {marker.core_type}"
        return f"[]{core}" if origin is list else core
    if origin is list:
        return f"[]{_type_name(get_args(inner)[0], Schema())}"
    if origin is dict:
        return "map[string]string"
    if origin is Literal:
        return "string enum"
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        return f"object ({inner.__name__})"
    return {str: "string", int: "integer"}.get(inner, str(inner))


def _default(value: Any) -> str:
    if value is None or value is PydanticUndefined:
        return ""
    return f"`{value}`" if isinstance(value, int) else f'`"{value}"`'


_BOUND_WORDS = (
    ("minLength", "min length"), ("maxLength", "max length"),
    ("minimum", "minimum"), ("maximum", "maximum"),
    ("minItems", "min items"), ("maxItems", "max items"),
    ("minProperties", "min entries"), ("maxProperties", "max entries"),
)


def _validation(schema: Mapping[str, Any], required: bool) -> str:
    parts = ["required"] if required else []
    parts += [f"{word} {schema[key]}" for key, word in _BOUND_WORDS if key in schema]
    if "enum" in schema:
        parts.append("one of " + ", ".join(f'`"{v}"`' for v in schema["enum"]))
    values = schema.get("additionalProperties")
    if isinstance(values, Mapping) and "maxLength" in values:
        parts.append(f"values: max length {values['maxLength']}")
    if "x-kubernetes-list-type" in schema:
        keys = schema.get("x-kubernetes-list-map-keys")
        parts.append(f"list: {schema['x-kubernetes-list-type']}"
                     + (f" keyed by `{'`, `'.join(keys)}`" if keys else ""))
    if "x-kubernetes-map-type" in schema:
        parts.append(f"map: {schema['x-kubernetes-map-type']}")
    if "x-kubernetes-validations" in schema:
        count = len(schema["x-kubernetes-validations"])
        parts.append(f"{count} CEL rule{'s' if count > 1 else ''}")
    return "; ".join(parts)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _field_table(rows: list[FieldRow]) -> list[str]:
    lines = ["| Field | Type | Default | Validation | Description |",
             "|---|---|---|---|---|"]
    lines += [f"| `{r.path}` | {r.type} | {r.default} | {_cell(r.validation)} | "
              f"{_cell(r.description)} |" for r in rows]
    return lines


def _rule_table(rows: list[RuleRow]) -> list[str]:
    lines = ["| Where | Message | Rule | Origin |", "|---|---|---|---|"]
    for row in rows:
        origin = row.rule.origin + (f": {row.rule.note}" if row.rule.note else "")
        lines.append(f"| `{row.path}` | {_cell(row.rule.message)} | "
                     f"`{_cell(row.rule.rule)}` | {_cell(origin)} |")
    return lines


def _resource_section(resource: crd.Resource, builder: crd.SchemaBuilder) -> list[str]:
    walker = _Walker(builder)
    rows = list(walker.fields(resource.model, ""))
    columns = ", ".join(c.name for c in resource.columns)
    return [
        f"## {resource.kind}", "",
        " ".join((resource.model.__doc__ or "").split()), "",
        "| | |", "|---|---|",
        f"| API | `{API_VERSION}`, kind `{resource.kind}`, cluster-scoped |",
        f"| Resource | `{resource.plural}` (singular `{resource.singular}`) |",
        f"| Short names | {', '.join(f'`{n}`' for n in resource.short_names)} |",
        f"| Categories | {', '.join(f'`{c}`' for c in resource.categories)} |",
        f"| `kubectl get` columns | {columns} |",
        "| Subresources | status |",
        f"| Name | must be `{SINGLETON_NAME}` (singleton) |",
        "",
        "### Fields", "",
        *_field_table(rows), "",
        "### Validation rules (CEL)", "",
        "Messages are exact: the API server reports them as "
        "`<field>: Invalid value: \"<type>\": <message>`.", "",
        *_rule_table(walker.rules), "",
    ]


def _examples() -> list[str]:
    lines = ["## Examples", ""]
    for title, body in EXAMPLES.items():
        text = yaml.safe_dump(body, sort_keys=False, default_flow_style=False)
        lines += [f"### {title}", "", "```yaml", text.rstrip(), "```", ""]
    return lines


_INTRO = """\
# API reference: ExternalSecretsConfig and ExternalSecretsManager

<!-- Generated by `python -m manager generate` from manager/api/. Do not edit by hand:
     change the models and regenerate; `python -m manager generate --check` (make verify)
     fails when this file is stale. -->

The operator is configured through two cluster-scoped singletons in the API group
`operator.openshift.io`, version `v1alpha1`. Both must be named `cluster`.

- **ExternalSecretsConfig** (`esc`): how the external-secrets operand is installed and
  configured. The operator does nothing until it exists.
- **ExternalSecretsManager** (`esm`): global defaults (labels, log level, scheduling,
  resources, proxy) for everything the operator manages, and the status of its controllers.
  The operator creates it at start-up when it is missing.

The CRDs (`manifests/crds/`) and this page are generated from the pydantic models in
`manager/api/models.py`, which are the single source of truth.
`kubectl explain externalsecretsconfig.spec.appConfig` prints the same descriptions as the
tables below; each says the field's range, default and effect. `kubectl get esc` shows the
Ready condition's status, reason and message, the operand's version and namespace (`-o wide`
adds the failed object and the image); `kubectl get esm` how many of the operator's
controllers are Ready.
"""

_BEHAVIOUR = """\
## Behaviour worth knowing

- **Defaults apply only where their parent object is present.** `spec: {}` stays `{}`;
  `appConfig: {}` becomes `appConfig: {logLevel: 1}`; `controllerConfig: {}` becomes
  `controllerConfig: {namespace: external-secrets}`; an empty `certManagerConfig` gets
  `enabled: "false"`, `addInjectorAnnotations: "false"`, `certificateDuration: 8760h`,
  `certificateRenewBefore: 30m`; an empty `webhookConfig` gets `certificateCheckInterval: 5m`.
  Because `appConfig.logLevel` is always defaulted when `appConfig` exists, an
  ExternalSecretsManager `globalConfig.logLevel` only takes effect when the
  ExternalSecretsConfig has no `appConfig`; the ExternalSecretsManager's status says so when
  it happens (`PartlyOverridden`).
- **`managementState` has no CRD default** (absent means `Managed`), so `spec: {}` stays `{}`
  and objects stored before the field existed do not change.
- **Booleans are strings**: `enabled`, `addInjectorAnnotations` and `features[].enabled`
  take `"true"` or `"false"` (quote them in YAML).
- **Unknown fields are pruned** (and `kubectl` warns); they are never stored.
- **The operand namespace cannot move.** `spec.controllerConfig.namespace` may be set when
  the object is created. Afterwards:
  - changing it, or omitting it while another namespace was set (it would fall back to the
    default), is rejected with `namespace is immutable once set`;
  - adding a `controllerConfig` that names a non-default namespace, or removing one that
    names a non-default namespace, is rejected with
    `namespace can only be configured during creation`;
  - adding or removing a `controllerConfig` with the default namespace is accepted.

- **One-way settings name the way out.** Each refusal of an immutable field (the namespace,
  `certManagerConfig.enabled`, `issuerRef`, removing an enabled `certManagerConfig`) carries a
  second message: delete the ExternalSecretsConfig (the operand keeps running) and create it
  again with the new value.

- **cert-manager cannot be switched.** `certManagerConfig.enabled` is immutable once set,
  `issuerRef` is immutable once set, and a `certManagerConfig` with `enabled: "true"` cannot
  be removed. Adding a `certManagerConfig` to an existing object is allowed (that is how an
  installation moves from the built-in cert-controller to cert-manager). An `issuerRef` may be
  added later while `enabled` is `"false"`; `addInjectorAnnotations` may change.
- **`resources`, `affinity` and `tolerations`** carry the real core/v1 schemas, so the API
  server rejects a misspelt toleration operator, an unknown effect or a malformed quantity at
  admission. The seed's description of `resources` says "Cannot be updated"; that sentence
  comes from the Pod API and is not enforced: `resources` may be changed at any time.
"""

_DEVIATIONS = """\
## Where the CRDs deviate from the seed, and why

The seed's Go types are the specification; every field, default, bound and rule in them is
present. The generated CRDs differ only where the seed would accept a spec that can never
work, or where a rule would fail to evaluate:

- **`has()` guards.** The seed's `issuerRef` rules call `self.kind.lowerAscii()` and
  `self.group.lowerAscii()`, but `kind` and `group` are optional: without a guard an
  `issuerRef` with only a `name` fails with a CEL evaluation error instead of being accepted.
  Both rules are prefixed with `!has(self.kind) ||` / `!has(self.group) ||`. The bitwarden
  rule guards every optional step in the same way.
- **Added rules** (marked `added` in the rule tables): the bitwarden TLS source, the cert-manager
  removal guard, the namespace add/remove guard, `certificateRenewBefore` below
  `certificateDuration`, Go duration syntax, DNS names for namespaces, Secrets and Issuers,
  Kubernetes label key/value syntax for `labels` and `nodeSelector`, and the reserved label
  keys (`app`, `app.kubernetes.io/*`, `external-secrets.io/*`, `rbac.authorization.k8s.io/*`,
  `servicebinding.io/controller`) in both `labels` maps.
- **Added bounds**, needed so the added rules pass the API server's CEL cost check and
  matching what Kubernetes allows anyway: duration strings are 1 to 32 characters, label and
  node selector values at most 63.
- **`features` is a list keyed by `name`** (`x-kubernetes-list-type: map`): the same feature
  cannot be listed twice, and server-side apply merges entries by name.
- **The seed's `controllerConfig` transition rule** (`namespace can only be configured during
  creation`, comparing `has()` of the old and new namespace) is kept as written, but it can
  never fail: the API server defaults `namespace` whenever `controllerConfig` exists. The added
  root rule gives the message its intended meaning.
- **`certManagerConfig.enabled`** is both required and defaulted, as the seed marks it; the
  default makes `certManagerConfig: {}` valid (cert-manager disabled).
- **`controllerConfig.networkPolicies`** is an additive field that the seed does not have. It
  takes the reference operator's GA shape (`name`, `componentName`
  `ExternalSecretsCoreController` or `BitwardenSDKServer`, `egress` as core
  NetworkPolicyEgressRules; at most 50 entries; a list keyed by `name` and `componentName`)
  and differs where the reference's behaviour is a defect: names must be unique across the
  list (both entries of one name would be one NetworkPolicy object) and must not be the name
  of one of the operator's own policies; and the list is not append-only (the reference's
  `name and componentName fields in networkPolicies are immutable` rule exists because it
  never deletes a policy; this operator prunes a removed entry, so entries may be removed or
  renamed, which brings back the component's default egress).
- **`controllerConfig.adoptExistingObjects`** is an additive field that the seed does not
  have: the explicit opt-in for taking over objects of the rendered names that the operator
  did not create (migrations from Helm or an earlier install). It is a typed spec field
  rather than an annotation so that `kubectl explain` documents it, the schema validates it,
  and changing it bumps the generation, which starts a pass and shows in
  `observedGeneration`. Without it such objects are left untouched and reported.
- **Printer columns.** The seed's `Ready`, `Message` and `AGE` are kept as the seed writes
  them, shown by a plain `kubectl get` (issue 13 asked for the message in `-o wide` only; the
  seed wins). Added: `Reason`, `Version` (`status.externalSecretsVersion`) and `Namespace`
  (`status.operandNamespace`), and with `-o wide` `Failure` (`status.failure.object`) and
  `Image`. The ExternalSecretsManager gets `Ready` (`status.controllersReady`, "3/3") beside
  the seed's `AGE`.
- **Additive status fields**: `operandNamespace`, `externalSecretsVersion`,
  `bitwardenSDKServerVersion` and `failure` (`object`, `request`, `response`, `inspect`) on the
  ExternalSecretsConfig; `reason` and `lastTransitionTime` on the ExternalSecretsManager's
  controller conditions and `controllersReady`.
- **`spec.managementState`** (`Managed`, `Unmanaged`, `Removed`) is an additive field that the
  seed does not have, in the shape of OpenShift's operator API (docs/operations.md).
- **Way-out rules.** Each seed rule `self == oldSelf` keeps its exact message; a companion rule
  `oldSelf == self` (the API server keys a field's rules by expression, so the same one twice
  is refused) adds how to change the setting anyway. The added root rules
  (`namespace can only be configured during creation`, the cert-manager removal guard) start
  with their former message and add the same.
- **Descriptions** add each field's range, default and effect to the seed's text, so that
  `kubectl explain` is enough. The seed's "Cannot be updated" on `resources` (copied from the
  Pod API, never enforced) is left out: changing `resources` rolls the Deployments.
- **Categories: only `external-secrets-operator`.** The seed puts both CRDs in the categories
  `external-secrets-operator` and `external-secrets`. The operand's CRDs (ExternalSecret,
  SecretStore, ...) are in `external-secrets` too, so a namespaced command such as
  `kubectl delete external-secrets --all -n team-a` would also reach these two cluster-scoped
  singletons and delete `ExternalSecretsConfig/cluster` and `ExternalSecretsManager/cluster`.
  The CRDs keep only `external-secrets-operator` (`kubectl get external-secrets-operator`
  lists both).
"""


def _core_note() -> str:
    snapshot = core_schemas.load_snapshot()
    sources = " and ".join(f"`{source}`" for source in snapshot["sources"])
    return (
        "## Kubernetes schemas\n\n"
        "`resources` (ResourceRequirements), `affinity` (Affinity), `tolerations` "
        "(Toleration) and `networkPolicies[].egress` (NetworkPolicyEgressRule) embed the "
        f"schemas that kube-apiserver {snapshot['kubernetesVersion']} serves at {sources}, "
        "with references resolved and quantities as int-or-string with the Quantity pattern. "
        "They are kept in "
        "`manager/api/core_v1_schemas.json`; refresh them with "
        "`make refresh-core-schemas`.\n"
    )


def render() -> str:
    builder = crd.SchemaBuilder()
    lines = [_INTRO]
    for resource in crd.RESOURCES:
        lines += _resource_section(resource, builder)
    lines += _examples()
    lines += [_BEHAVIOUR, _DEVIATIONS, _core_note()]
    return "\n".join(lines).rstrip() + "\n"


def example_models() -> dict[str, BaseModel]:
    """The examples parsed with the models (tests use this)."""
    kinds: dict[str, type[BaseModel]] = {ESC_KIND: models.ExternalSecretsConfig,
                                         ESM_KIND: models.ExternalSecretsManager}
    return {title: kinds[body["kind"]].model_validate(body) for title, body in EXAMPLES.items()}
