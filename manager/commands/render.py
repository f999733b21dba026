"""`render -f esc.yaml [--esm esm.yaml] [--env NAME=VALUE ...]`: preview the operand offline.

Prints, as multi-document YAML in apply order, exactly the objects the operator would apply
for these specs. No cluster is needed.

The operator's environment (RELATED_IMAGE_*, *_IMAGE_VERSION, HTTP_PROXY/HTTPS_PROXY/NO_PROXY)
comes only from `--env` options, never from the shell running the command: a proxy in an
administrator's shell says nothing about the operator's Deployment.

With a proxy, the operator adds the ClusterIP of the `kubernetes` Service (a fact it reads
from the cluster) to NO_PROXY; offline, give it with `--api-server-address` (`plan` reads it).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import pydantic
import yaml

from manager.api.models import ExternalSecretsConfig, ExternalSecretsManager
from manager.config import (
    ConfigError,
    OperatorEnvironment,
    effective_config,
    with_api_server_addresses,
)
from manager.names import ESC_KIND, ESM_KIND, SINGLETON_NAME
from manager.render import render_operand

_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Model = TypeVar("_Model", ExternalSecretsConfig, ExternalSecretsManager)


class InputError(ValueError):
    """An input file that is not a valid object of the expected kind."""


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "render",
        help="print the operand objects for an ExternalSecretsConfig (and ExternalSecretsManager)",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    add_spec_arguments(parser, esm_help="the ExternalSecretsManager, for its globalConfig",
                       env_help="a variable of the operator's environment, e.g. "
                                "HTTP_PROXY=http://proxy:3128 (repeatable)")
    parser.add_argument("--api-server-address", action="append", default=[],
                        metavar="IP", help="a ClusterIP of the cluster's `kubernetes` Service "
                        "in `default`, added to NO_PROXY when a proxy is set (repeatable)")
    parser.set_defaults(func=run)


def add_spec_arguments(parser: argparse.ArgumentParser, *, esm_help: str,
                       env_help: str) -> None:
    """-f ESC_FILE, --esm ESM_FILE and --env NAME=VALUE (render and plan)."""
    parser.add_argument("-f", "--filename", required=True, type=Path, metavar="ESC_FILE",
                        help="the ExternalSecretsConfig (YAML or JSON; '-' reads stdin)")
    parser.add_argument("--esm", type=Path, metavar="ESM_FILE", help=esm_help)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                        help=env_help)


def run(args: argparse.Namespace) -> int:
    try:
        esc = _load(args.filename, ExternalSecretsConfig, ESC_KIND)
        esm = _load(args.esm, ExternalSecretsManager, ESM_KIND) if args.esm else None
        environment = OperatorEnvironment.from_environ(environment_pairs(args.env))
        config = with_api_server_addresses(
            effective_config(esc.spec, esm.spec if esm else None, environment),
            tuple(args.api_server_address))
    except (InputError, ConfigError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(dump_objects(render_operand(config).objects()))
    return 0


def dump_objects(objects: Iterable[Mapping[str, Any]]) -> str:
    """Objects as multi-document YAML, each starting with `---`, keys in template order.

    Non-ASCII characters are written as escapes: raw, a few of them (NEL, LINE SEPARATOR)
    would read back as line breaks.
    """
    return yaml.dump_all([dict(obj) for obj in objects], Dumper=_Dumper, sort_keys=False,
                         explicit_start=True, allow_unicode=False, width=100)


def environment_pairs(pairs: list[str]) -> dict[str, str]:
    environment = {}
    for pair in pairs:
        name, separator, value = pair.partition("=")
        if not separator or not name:
            raise InputError(f"--env {pair!r}: write NAME=VALUE")
        environment[name] = value
    return environment


def _read(path: Path) -> str:
    try:
        return sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    except OSError as error:
        raise InputError(f"{path}: {error.strerror}") from None


def load_document(path: Path, kind: str) -> dict[str, Any]:
    """One object of `kind` named `cluster` (or unnamed) from a YAML or JSON file."""
    try:
        document = yaml.safe_load(_read(path))
    except yaml.YAMLError as error:
        raise InputError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(document, dict):
        raise InputError(f"{path}: expected one {kind} object")
    if document.get("kind", kind) != kind:
        raise InputError(f"{path}: kind: expected {kind}, got {document.get('kind')!r}")
    name = (document.get("metadata") or {}).get("name", SINGLETON_NAME)
    if name != SINGLETON_NAME:
        raise InputError(f"{path}: metadata.name: {kind} is a singleton, .metadata.name must "
                         f"be '{SINGLETON_NAME}'")
    return document


def _load(path: Path, model: type[_Model], kind: str) -> _Model:
    document = load_document(path, kind)
    try:
        return model.model_validate(document)
    except pydantic.ValidationError as error:
        raise InputError(f"{path}: {_describe(error)}") from None


def _describe(error: pydantic.ValidationError) -> str:
    """The first problem, as `field.path: message` with the spec's (camelCase) names."""
    first = error.errors()[0]
    location = "".join(f"[{part}]" if isinstance(part, int) else f".{part}"
                       for part in first["loc"]).lstrip(".")
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{location}: {first['msg']}{more}"
