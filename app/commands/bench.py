"""`ragdoll bench KIND`: the benchmarks, each side by side in one run.

Each kind lives in `engine.bench.<kind>` with `add_arguments(parser)` for its own
options and `run(args) -> dict`, which measures, prints a human report unless
`--json` is given, and returns the figures. This command prints the figures as
JSON with `--json` and writes them to `--out` when asked.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any

KINDS = {
    "offload": "the layer-streaming executor against Accelerate offloading and all-resident",
    "retrieval": "partitioned search: latency and recall by resident budget, batched queries",
    "ingest": "ingestion pages/s and chunks/s, and the rescan of an unchanged folder",
    "pipeline": "decoupled pipelines with adaptive batches against serial RAG",
    "prefix": "time to first token of a conversation's next turn with prefix KV reuse",
    "conversation": "follow-up questions over real documents: the right page in the top 3",
}


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="run a benchmark", description=__doc__)
    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, summary in KINDS.items():
        # The kind's own options are parsed in `run`: building them here would import
        # every benchmark (and torch) each time any `ragdoll` command starts.
        kp = kinds.add_parser(kind, help=summary, description=summary, add_help=False)
        kp.set_defaults(func=run, takes_extra_args=True)


def kind_parser(*, kind: str, module: Any) -> argparse.ArgumentParser:
    """The whole parser of `ragdoll bench KIND`: the common flags and the kind's own."""
    parser = argparse.ArgumentParser(prog=f"ragdoll bench {kind}", description=KINDS[kind])
    parser.add_argument("--quick", action="store_true", help="a small form that runs in minutes")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--out", type=Path, metavar="FILE", help="also write the JSON here")
    module.add_arguments(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    module = _module(args.kind)
    if module is None:
        print(f"ragdoll bench {args.kind}: not built yet", file=sys.stderr)
        return 2
    options = kind_parser(kind=args.kind, module=module).parse_args(args.extra_args)
    return run_kind(kind=args.kind, module=module, options=options)


def run_kind(*, kind: str, module: Any, options: argparse.Namespace) -> int:
    """Measure, then print the figures as JSON (`--json`) and write them (`--out`)."""
    options.kind = kind
    figures = module.run(options)
    text = json.dumps(figures, indent=2, sort_keys=True, default=str)
    if options.json:
        print(text)
    if options.out:
        options.out.parent.mkdir(parents=True, exist_ok=True)
        options.out.write_text(text + "\n", encoding="utf-8")
    return 0


def _module(kind: str):  # type: ignore[no-untyped-def]
    try:
        return importlib.import_module(f"engine.bench.{kind}")
    except ModuleNotFoundError as e:
        if e.name != f"engine.bench.{kind}":
            raise
        return None
