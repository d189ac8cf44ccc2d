"""`ragdoll bench KIND`: the benchmarks, each side by side in one run.

Each kind lives in `bench.<kind>` (the checkout's top-level `bench` package, never in
the wheel) with `add_arguments(parser)` for its own options and `run(args) -> dict`,
which measures, prints a human report unless `--json` is given, and returns the
figures. This command prints the figures as JSON with `--json` and writes them to
`--out` when asked. Installed from a wheel, there is no `bench` package and the command
says so.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

# The checkout an editable install runs from: app/commands/bench.py → the repository.
_CHECKOUT = Path(__file__).resolve().parents[2]


def _bench_package() -> ModuleType | None:
    if not (_CHECKOUT / "bench" / "__init__.py").is_file():
        return None
    if str(_CHECKOUT) not in sys.path:
        sys.path.insert(0, str(_CHECKOUT))
    return importlib.import_module("bench")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "bench", help="run a benchmark (from a source checkout)", description=__doc__
    )
    if _bench_package() is None:
        p.set_defaults(func=_absent)
        return
    from bench.runner import KINDS

    kinds = p.add_subparsers(dest="kind", metavar="KIND", required=True)
    for kind, summary in KINDS.items():
        # The kind's own options are parsed in `run`: building them here would import
        # every benchmark (and torch) each time any `ragdoll` command starts.
        kp = kinds.add_parser(kind, help=summary, description=summary, add_help=False)
        kp.set_defaults(func=run, takes_extra_args=True)


def _absent(args: argparse.Namespace) -> int:
    print(
        "ragdoll bench: the benchmarks are not part of an installed RAGDoll; run them from "
        "a source checkout (`make setup`, then `.venv/bin/ragdoll bench KIND`)",
        file=sys.stderr,
    )
    return 2


def run(args: argparse.Namespace) -> int:
    from bench.runner import kind_parser, run_kind

    module = _module(args.kind)
    if module is None:
        print(f"ragdoll bench {args.kind}: not built yet", file=sys.stderr)
        return 2
    options = kind_parser(kind=args.kind, module=module).parse_args(args.extra_args)
    return run_kind(kind=args.kind, module=module, options=options)


def _module(kind: str) -> ModuleType | None:
    try:
        return importlib.import_module(f"bench.{kind}")
    except ModuleNotFoundError as e:
        if e.name != f"bench.{kind}":
            raise
        return None
