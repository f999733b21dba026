"""`convert -f FILE [-o OUT] [--adopt]`: Red Hat's GA ExternalSecretsConfig or
ExternalSecretsManager in this operator's API.

Red Hat's operator uses the same group, version, kinds and name with another spec shape
(`plugins.bitwardenSecretManagerProvider.mode`, `controllerConfig.certProvider.certManager`,
`controllerConfig.trustedCABundle`, `features[].mode`, ...). This reads such objects (YAML,
one or more documents or a `kind: List`, as `kubectl get esc,esm -o yaml` prints them; `-f -`
reads stdin) and writes the same objects in this API, validated by its models, to OUT
(default stdout). No cluster is needed.

stderr reports every field: mapped (from -> to, with a note where the effect differs) or NOT
MAPPED, with why (no equivalent, a different meaning, or a value this API does not admit),
and what was dropped on purpose (server-set metadata, status, Red Hat's finalizer). An
object already in this operator's shape is written unchanged. `--adopt` adds
`controllerConfig.adoptExistingObjects: "true"` to the ExternalSecretsConfig, the opt-in for
taking over the objects Red Hat's operator made (docs/upgrade.md, "From Red Hat's operator").

The API server's CEL rules are not checked here: `kubectl apply --server-side
--dry-run=server -f OUT` does, once this operator's CRDs are installed.

Exit status: 0 every field mapped; 3 some fields not mapped (the objects are written without
them); 2 nothing written (the input cannot be read or holds no ESC or ESM, or OUT cannot be
written).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import yaml

from manager.commands import command
from manager.offline.convert import Conversion, ConvertError, convert_text, summary_lines

SOME_NOT_MAPPED = 3
NOTHING_WRITTEN = 2


def register(subparsers: Any) -> None:
    parser = command(subparsers, "convert", __doc__,
                     "convert Red Hat's GA ExternalSecretsConfig/ExternalSecretsManager to "
                     "this API")
    parser.add_argument("-f", "--filename", required=True, metavar="FILE",
                        help="the GA-shaped objects (YAML; '-' reads stdin)")
    parser.add_argument("-o", "--output", type=Path, default=None, metavar="OUT",
                        help="where to write the converted objects (default: stdout)")
    parser.add_argument("--adopt", action="store_true",
                        help="add controllerConfig.adoptExistingObjects: \"true\" to the "
                             "ExternalSecretsConfig (migration from Red Hat's operator)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        text = sys.stdin.read() if args.filename == "-" else Path(args.filename).read_text()
        conversions = convert_text(text, adopt=args.adopt)
    except (OSError, UnicodeDecodeError, ConvertError) as error:
        print(f"convert: nothing written: {error}", file=sys.stderr)
        return NOTHING_WRITTEN
    output = yaml.safe_dump_all([conv.result for conv in conversions], sort_keys=False)
    try:
        if args.output is None:
            sys.stdout.write(output)
        else:
            args.output.write_text(output)
    except OSError as error:
        print(f"convert: nothing written: {error}", file=sys.stderr)
        return NOTHING_WRITTEN
    for line in summary_lines(conversions):
        print(line, file=sys.stderr)
    print(_verdict(conversions, args.output), file=sys.stderr)
    return SOME_NOT_MAPPED if any(conv.not_mapped for conv in conversions) else 0


def _verdict(conversions: list[Conversion], output: Path | None) -> str:
    text = f"convert: {len(conversions)} objects written to {output or 'stdout'}"
    if not any(conv.converted for conv in conversions):
        return f"{text}, unchanged (already in this operator's shape)"
    mapped = sum(len(conv.mapped) for conv in conversions)
    refused = sum(len(conv.not_mapped) for conv in conversions)
    if refused:
        return f"{text}; {mapped} fields mapped, {refused} NOT MAPPED (exit {SOME_NOT_MAPPED})"
    return f"{text}; {mapped} fields mapped, none left out"
