"""`ragdoll engine`: run the engine headless, in the foreground."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("engine", help="run the engine headless (for other programs)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.paths import resolve_paths
    from engine.server import serve

    return serve(paths=resolve_paths())
