"""`ragdoll bench KIND`: the benchmarks, each side by side in one run.

Each kind lives in `engine.bench.<kind>` with `add_arguments(parser)` for its own
options and `run(args) -> dict`, which measures, prints a human report unless
`--json` is given, and returns the figures. This command prints the figures as
JSON with `--json` and writes them to `--out` when asked.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from engine.bench.runner import KINDS, kind_parser, run_kind


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run a benchmark", description=__doc__)
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, summary in KINDS.items():
        # The kind's own options are parsed in `run`: building them here would import
        # every benchmark (and torch) each time any `ragdoll` command starts.
        kp = kinds.add_parser(kind, help=summary, description=summary, add_help=False)
        kp.set_defaults(func=run, takes_extra_args=True)


def run(args: argparse.Namespace) -> int:
    module = _module(args.kind)
    if module is None:
        print(f"ragdoll bench {args.kind}: not built yet", file=sys.stderr)
        return 2
    options = kind_parser(kind=args.kind, module=module).parse_args(args.extra_args)
    return run_kind(kind=args.kind, module=module, options=options)


def _module(kind: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(f"engine.bench.{kind}")
    except ModuleNotFoundError as e:
        if e.name != f"engine.bench.{kind}":
            raise
        return None
