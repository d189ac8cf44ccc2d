"""`ragdoll`: the one command-line entry point. Bare `ragdoll` opens the window.

Each subcommand lives in its own module under app/commands/ with two functions:
`register(subparsers)` adds its parser and sets `func`, and the `func` runs it and
returns the exit code. Imports of heavy libraries stay inside the functions so
that `ragdoll ask` starts fast (it only needs the HTTP client).
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Module names under app.commands, in the order `ragdoll --help` lists them.
COMMAND_MODULES = (
    "gui",
    "engine_cmd",
    "ingest",
    "ask",
    "model",
    "embedder",
    "reranker",
    "status",
    "profile",
    "plan",
    "bench",
    "desktop",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ragdoll",
        description="Ask questions about your own documents, on your own machine.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(f"app.commands.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from engine.rag.store.lance_logs import quiet_lancedb_logs

    quiet_lancedb_logs()  # before any command imports lancedb
    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command is None:
        args, extra = parser.parse_known_args(["gui", *(argv or [])])
    if getattr(args, "takes_extra_args", False):
        args.extra_args = extra  # a subcommand that parses its own options
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
