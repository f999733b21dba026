r"""The command-line flags of the shipped operand release, and which of them the operator owns.

`componentConfigs[].overrideArgs` (the unsupported escape hatch, docs/operations.md) may set
any flag the pinned external-secrets release (EXTERNAL_SECRETS_VERSION) has, except the flags
the operator renders itself. Which flags a release has, and of which type, is read from its
own source (`cmd/controller/*.go` of its release tree) and committed as `operand_flags.json`, so
that generating the CRD and checking a spec need neither Go nor the network;
`python -m manager generate --refresh-operand-flags` rewrites the snapshot and
tests/integration/test_operand_flags.py fails when it differs from the source.

One table, OWNED, says which flags the operator renders (test_operand_flags.py checks it
against every flag the templates can produce); another, REFUSED, which flags it does not render
but no override may set either: they widen what the operand touches, or collide with what the
operator renders. The CRD's CEL rules (manager/api/rules.py) and the run-time check
(`problems`) all derive from these tables and the snapshot.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from manager.api import patterns
from manager.paths import REPO_ROOT

SNAPSHOT_PATH = Path(__file__).with_name("operand_flags.json")

# The subcommand each component runs ("" is the root command: the controller). The
# bitwarden-sdk-server image is another program, whose source no Go module serves: it takes
# no overrides.
COMMANDS: Mapping[str, str] = {"ExternalSecretsCoreController": "",
                               "Webhook": "webhook", "CertController": "certcontroller"}
NO_OVERRIDES = "BitwardenSDKServer"
# The command variable of each subcommand in cmd/controller/*.go.
_COMMAND_VARIABLES = {"rootCmd": "", "webhookCmd": "webhook", "certcontrollerCmd": "certcontroller"}
_FLAG_IN_SOURCE = re.compile(r'(\w+)\.(?:Persistent)?Flags\(\)\s*\.\s*(\w+)\(\s*&?[\w.]+\s*,\s*'
                             r'"([\w-]+)"')
# pflag's registration methods, by the kind of value they parse.
_KINDS = {"BoolVar": "bool", "IntVar": "int", "Int32Var": "int", "Int64Var": "int",
          "UintVar": "int", "Float32Var": "float", "Float64Var": "float",
          "DurationVar": "duration", "StringVar": "string", "StringSliceVar": "list",
          "StringArrayVar": "list"}
# The value each kind accepts, as pflag parses it (booleans spelt out, as the API does).
VALUE_PATTERNS: Mapping[str, str] = {
    "bool": "true|false", "int": "-?[0-9]+", "float": r"-?[0-9]+(\.[0-9]+)?",
    "duration": patterns.GO_DURATION, "string": ".*", "list": ".*"}
_VALUE_HINTS = {"bool": "true or false", "int": "an integer", "float": "a number",
                "duration": "a duration such as 90s or 5m"}

_CONTROLLER = "spec.controllerConfig.componentConfigs[].tuning"
_RENDERED = "the operator renders it"
_LEASE = ("the operator renders the lease timings together, so that a new controller takes "
          "over within seconds and never beside a running leader (docs/resilience.md)")
# The flags the operator renders, by subcommand, and what to use instead.
OWNED: Mapping[str, Mapping[str, str]] = {
    "": {
        "concurrent": f"use {_CONTROLLER}.concurrent",
        "client-qps": f"use {_CONTROLLER}.clientQPS",
        "client-burst": f"use {_CONTROLLER}.clientBurst",
        "enable-secrets-caching": f"use {_CONTROLLER}.enableSecretsCaching",
        "enable-configmaps-caching": f"use {_CONTROLLER}.enableConfigMapsCaching",
        "enable-managed-secrets-caching": f"use {_CONTROLLER}.enableManagedSecretsCaching",
        "store-requeue-interval": f"use {_CONTROLLER}.storeRequeueInterval",
        "loglevel": "use spec.appConfig.logLevel",
        "namespace": "use spec.appConfig.operatingNamespace",
        "enable-cluster-store-reconciler": "follows spec.appConfig.operatingNamespace",
        "enable-cluster-external-secret-reconciler":
            "follows spec.appConfig.operatingNamespace",
        "enable-cluster-push-secret-reconciler": "follows spec.appConfig.operatingNamespace",
        "enable-push-secret-reconciler": _RENDERED,
        "enable-leader-election": "the replicas of one Deployment must elect a leader",
        "leader-election-id": "the leader-election Role names that Lease",
        "leader-election-lease-duration": _LEASE,
        "leader-election-renew-deadline": _LEASE,
        "leader-election-retry-period": _LEASE,
        "metrics-addr": "the metrics Service, NetworkPolicy and ServiceMonitor use :8080",
        "zap-time-encoding": _RENDERED,
        "unsafe-allow-generic-targets": ("use the ExternalSecretsManager's feature "
                                         "UnsafeAllowGenericTargets, which also grants the "
                                         "RBAC and reports the risk"),
    },
    "webhook": {
        "port": ("the Service, the NetworkPolicy and the webhook configurations use port "
                 "10250"),
        "dns-name": "the certificate names the webhook Service",
        "cert-dir": "the certificate Secret is mounted there",
        "check-interval": "use spec.appConfig.webhookConfig.certificateCheckInterval",
        "lookahead-interval": ("follows the certificate source and certificateCheckInterval "
                               "(docs/configuration.md)"),
        "tls-min-version": "follows the cluster's TLS security profile",
        "tls-ciphers": "follows the cluster's TLS security profile",
        "metrics-addr": "the metrics Service and NetworkPolicy use :8080",
        "healthz-addr": "the readiness probe uses :8081",
        "loglevel": "use spec.appConfig.logLevel",
        "zap-time-encoding": _RENDERED,
    },
    "certcontroller": {
        "service-name": "the webhook Service is the operator's",
        "service-namespace": "the webhook Service is in the operand namespace",
        "secret-name": "the webhook mounts that Secret",
        "secret-namespace": "the webhook Secret is in the operand namespace",
        "crd-requeue-interval": "the webhook's lookahead is computed from it",
        "enable-partial-cache": _RENDERED,
        "enable-leader-election": "the replicas of one Deployment must elect a leader",
        "metrics-addr": "the metrics Service and NetworkPolicy use :8080",
        "healthz-addr": "the readiness probe uses :8081",
        "loglevel": "use spec.appConfig.logLevel",
        "zap-time-encoding": _RENDERED,
    },
}


_SCRAPE = "the ServiceMonitor and the NetworkPolicy expect plain HTTP metrics on :8080"
# The metrics server's TLS and authorization (external-secrets v2: every command has them;
# --metrics-auth needs --metrics-secure and RBAC for TokenReviews the operator does not grant).
_METRICS_SERVING = dict.fromkeys(("metrics-secure", "metrics-auth", "metrics-cert-dir",
                                  "metrics-cert-name", "metrics-key-name"), _SCRAPE)
REFUSED: Mapping[str, Mapping[str, str]] = {
    "": {
        "live-addr": ("its address could collide with the rendered ports (:8080 metrics) and "
                      "crash-loop the controller"),
        **_METRICS_SERVING,
    },
    "webhook": {**_METRICS_SERVING},
    "certcontroller": {
        "crd-names": ("it would point the conversion webhook of other products' CRDs at this "
                      "webhook (the cert-controller may update only its default CRDs)"),
        **_METRICS_SERVING,
    },
}


def reserved(command: str) -> dict[str, str]:
    """The flags no override of `command` may set, with the reason: OWNED and REFUSED."""
    return {**OWNED.get(command, {}), **REFUSED.get(command, {})}


@dataclass(frozen=True)
class Snapshot:
    version: str
    flags: Mapping[str, Mapping[str, str]]  # subcommand -> flag name -> kind

    def allowed(self, command: str) -> dict[str, str]:
        """The flags an override may set: the release's, without the reserved ones."""
        return {name: kind for name, kind in self.flags.get(command, {}).items()
                if name not in reserved(command)}


@cache
def snapshot() -> Snapshot:
    data = json.loads(SNAPSHOT_PATH.read_text())
    return Snapshot(data["externalSecretsVersion"], data["flags"])


# --- reading a release's source (generation time) --------------------------------------------


def source_flags(module_dir: Path) -> dict[str, dict[str, str]]:
    """Flag names and kinds by subcommand, from `cmd/controller/*.go` of a module tree.
    Flags registered elsewhere (provider feature flags, added from nested modules the module
    zip does not hold) are not found, so overrides cannot name them."""
    flags: dict[str, dict[str, str]] = {}
    for path in sorted((module_dir / "cmd" / "controller").glob("*.go")):
        for variable, method, name in _FLAG_IN_SOURCE.findall(path.read_text()):
            if variable in _COMMAND_VARIABLES:
                flags.setdefault(_COMMAND_VARIABLES[variable], {})[name] = _KINDS.get(
                    method, "string")
    return {command: dict(sorted(names.items())) for command, names in sorted(flags.items())}


def module_dir(version: str) -> Path:
    """The source of external-secrets `version`: its release tree as hack/upstream-sources.txt
    pins it (hack/upstream-tree.sh: checked and unpacked once, cached). The Go module proxy
    does not serve the v2 line (no /v2 module path)."""
    script = REPO_ROOT / "hack" / "upstream-tree.sh"
    unpacked = subprocess.run(["bash", str(script), "external-secrets", version],
                              capture_output=True, text=True, check=False, timeout=600)
    if unpacked.returncode != 0:
        raise RuntimeError(f"{script}: {unpacked.stderr.strip()}")
    return Path(unpacked.stdout.strip())


def snapshot_text(version: str, flags: Mapping[str, Mapping[str, str]]) -> str:
    return json.dumps({"externalSecretsVersion": version, "flags": flags}, indent=1) + "\n"


def refresh_snapshot(version: str) -> Path:
    SNAPSHOT_PATH.write_text(snapshot_text(version, source_flags(module_dir(version))))
    snapshot.cache_clear()
    return SNAPSHOT_PATH


# --- checking overrides (admission and run time) ---------------------------------------------

ARG = re.compile(r"--([\w-]+)=(.*)", re.DOTALL)


def problems(component: str, args: list[str] | tuple[str, ...]) -> Iterator[tuple[int, str]]:
    """(index, what is wrong and the fix) for each override `component` cannot take."""
    command = COMMANDS.get(component)
    known = snapshot()
    seen: set[str] = set()
    for index, arg in enumerate(args):
        if command is None:
            yield index, (f"{component} takes no overrideArgs: the operator cannot check its "
                          "flags; remove them")
            continue
        found = ARG.fullmatch(arg)
        if found is None:
            yield index, f"{arg!r} is not of the form --flag=value"
            continue
        name, value = found.groups()
        kind = known.flags.get(command, {}).get(name)
        if name in OWNED.get(command, {}):
            yield index, (f"--{name} is set by the operator ({OWNED[command][name]}); "
                          "remove it from overrideArgs")
        elif name in REFUSED.get(command, {}):
            yield index, (f"--{name} cannot be overridden: {REFUSED[command][name]}; remove it "
                          "from overrideArgs")
        elif kind is None:
            yield index, (f"--{name} is not a flag of external-secrets {known.version} "
                          f"{command or 'controller'}; remove it (docs/operations.md lists "
                          "how to see the flags)")
        elif not patterns.matches(VALUE_PATTERNS[kind], value):
            yield index, f"--{name} takes {_VALUE_HINTS[kind]}, not {value!r}"
        elif name in seen:
            yield index, f"--{name} is given twice; keep one"
        seen.add(name)


def allowed_pattern(command: str) -> str:
    """One regular expression matching every override `command` can take (for CEL)."""
    by_kind: dict[str, list[str]] = {}
    for name, kind in snapshot().allowed(command).items():
        by_kind.setdefault(kind, []).append(name)  # [\w-]+: nothing to escape
    alternatives = [f"({'|'.join(names)})=({VALUE_PATTERNS[kind]})"
                    for kind, names in sorted(by_kind.items())]
    return f"--({'|'.join(alternatives)})"


def owned_pattern(command: str) -> str:
    """A regular expression matching an override of a flag the operator renders."""
    return f"--({'|'.join(OWNED[command])})=.*"


def refused_pattern(command: str) -> str:
    """A regular expression matching an override of a REFUSED flag (one that matches
    nothing where there are none: RE2, CEL's engine, has no lookahead)."""
    names = REFUSED.get(command, {})
    return f"--({'|'.join(names)})=.*" if names else r"[^\s\S]"
