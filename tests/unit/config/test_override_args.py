"""componentConfigs[].overrideArgs: the unsupported escape hatch (docs/operations.md).

The CRD's CEL rules refuse the same entries at admission (tests/api/externalsecretsconfig.
knobs.yaml, against the real API server); here the run-time check that covers objects stored
before those rules and what CEL does not check (a flag given twice), the rendering and the
status."""

from __future__ import annotations

from typing import Any

import pytest

from manager import versions
from manager.api import operand_flags, patterns
from manager.api.models import ExternalSecretsConfigSpec
from manager.config import ConfigError, OperatorEnvironment, effective_config
from manager.render import render_operand
from manager.reporting.status import Outcome, OutcomeKind, esc_fields

ENV = OperatorEnvironment.from_environ({})
SHIPPED = versions.EXTERNAL_SECRETS_VERSION


def spec(*entries: dict[str, Any]) -> ExternalSecretsConfigSpec:
    return ExternalSecretsConfigSpec.model_validate(
        {"controllerConfig": {"componentConfigs": list(entries)}})


def args_of(entries: tuple[dict[str, Any], ...], deployment: str) -> list[str]:
    config = effective_config(spec(*entries), None, ENV)
    [found] = [o for o in render_operand(config).objects()
               if o["kind"] == "Deployment" and o["metadata"]["name"] == deployment]
    args: list[str] = found["spec"]["template"]["spec"]["containers"][0]["args"]
    return args


def test_overrides_follow_the_rendered_arguments_of_their_component_only() -> None:
    entries = ({"componentName": "ExternalSecretsCoreController",
                "overrideArgs": ["--enable-flood-gate=false", "--controller-class=team-a"]},
               {"componentName": "CertController", "overrideArgs": ["--enable-http2=true"]})
    plain = args_of((), "external-secrets")
    assert args_of(entries, "external-secrets") == [
        *plain, "--enable-flood-gate=false", "--controller-class=team-a"]
    assert args_of(entries, "external-secrets-cert-controller")[-1] == "--enable-http2=true"
    assert args_of(entries, "external-secrets-webhook") == args_of((), "external-secrets-webhook")


def test_the_status_lists_each_override_with_its_field() -> None:
    config = effective_config(spec(
        {"componentName": "Webhook", "overrideArgs": ["--enable-http2=true"]}), None, ENV)
    fields = esc_fields(config, Outcome(OutcomeKind.READY, "Reconciled", "ok", True))
    assert fields["unsupportedOverrides"] == [
        "spec.controllerConfig.componentConfigs[0].overrideArgs (Webhook): --enable-http2=true"]
    plain = effective_config(None, None, ENV)
    assert esc_fields(plain, Outcome(OutcomeKind.READY, "R", "ok", True))[
        "unsupportedOverrides"] is None


@pytest.mark.parametrize(("component", "arg", "problem"), [
    ("Webhook", "--port=9443", "--port is set by the operator (the Service, the NetworkPolicy"),
    ("ExternalSecretsCoreController", "--concurrent=4",
     "--concurrent is set by the operator (use spec.controllerConfig.componentConfigs[]"
     ".tuning.concurrent)"),
    ("ExternalSecretsCoreController", "--leader-elect-lease-duration=30s",
     f"--leader-elect-lease-duration is not a flag of external-secrets {SHIPPED} controller"),
    ("Webhook", "--controller-class=x", "--controller-class is not a flag of external-secrets "
     f"{SHIPPED} webhook"),
    ("ExternalSecretsCoreController", "--leader-election-retry-period=5s",
     "--leader-election-retry-period is set by the operator (the operator renders the lease"),
    ("Webhook", "--metrics-auth=true", "--metrics-auth cannot be overridden: the ServiceMonitor"),
    ("ExternalSecretsCoreController", "--enable-flood-gate=no",
     "--enable-flood-gate takes true or false, not 'no'"),
    ("ExternalSecretsCoreController", "--enable-flood-gate", "is not of the form --flag=value"),
    ("BitwardenSDKServer", "--enable-http2=true", "BitwardenSDKServer takes no overrideArgs"),
    ("CertController", "--crd-names=widgets.example.com", "--crd-names cannot be overridden: "
     "it would point the conversion webhook of other products' CRDs at this webhook"),
    ("ExternalSecretsCoreController", "--live-addr=:8080", "--live-addr cannot be overridden: "
     "its address could collide with the rendered ports"),
    ("ExternalSecretsCoreController", "--metrics-secure=true", "--metrics-secure cannot be "
     "overridden: the ServiceMonitor and the NetworkPolicy expect plain HTTP metrics"),
    ("ExternalSecretsCoreController", "--unsafe-allow-generic-targets=true",
     "--unsafe-allow-generic-targets is set by the operator (use the ExternalSecretsManager's "
     "feature UnsafeAllowGenericTargets"),
])
def test_a_refused_override_is_a_config_error_naming_the_entry_and_the_fix(
        component: str, arg: str, problem: str) -> None:
    with pytest.raises(ConfigError) as refused:
        effective_config(spec({"componentName": component,
                               "overrideArgs": ["--enable-http2=false", arg]
                               if component == "Webhook" else [arg]}), None, ENV)
    index = 1 if component == "Webhook" else 0
    assert refused.value.field == (
        f"spec.controllerConfig.componentConfigs[0].overrideArgs[{index}]")
    assert problem in refused.value.message


def test_a_flag_given_twice_is_refused_at_run_time() -> None:
    """CEL lets it through (it would cost a comparison of every pair); pflag would take the
    last silently."""
    with pytest.raises(ConfigError, match=r"overrideArgs\[1\].*given twice"):
        effective_config(spec({"componentName": "ExternalSecretsCoreController",
                               "overrideArgs": ["--enable-flood-gate=true",
                                                "--enable-flood-gate=false"]}), None, ENV)


@pytest.mark.parametrize("command", sorted(operand_flags.COMMANDS.values()))
def test_the_cel_patterns_say_what_the_run_time_check_says(command: str) -> None:
    """The CRD's rules are built from allowed_pattern and owned_pattern: every flag of the
    release, with a sample value of its kind, passes both or neither."""
    component = next(c for c, cmd in operand_flags.COMMANDS.items() if cmd == command)
    samples = {"bool": "true", "int": "3", "float": "1.5", "duration": "90s",
               "string": "x", "list": "a,b"}
    for name, kind in operand_flags.snapshot().flags[command].items():
        arg = f"--{name}={samples[kind]}"
        accepted = not list(operand_flags.problems(component, [arg]))
        assert operand_flags.ARG.fullmatch(arg)
        by_pattern = (patterns.matches(operand_flags.allowed_pattern(command), arg)
                      and not patterns.matches(operand_flags.owned_pattern(command), arg)
                      and not patterns.matches(operand_flags.refused_pattern(command), arg))
        assert accepted == by_pattern, arg


def test_every_refused_flag_is_a_flag_of_the_release_the_operator_does_not_render() -> None:
    """A refusal of a flag the release lacks would be dead; one of a rendered flag belongs
    in OWNED, with the field to use instead."""
    for command, names in operand_flags.REFUSED.items():
        assert set(names) <= set(operand_flags.snapshot().flags[command]), command
        assert not set(names) & set(operand_flags.OWNED[command]), command
