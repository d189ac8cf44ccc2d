"""`ragdoll engine`: run the engine headless, in the foreground."""

from __future__ import annotations

import argparse


def register(sub: argparse._SubParsersAction) -> None:
    from engine.service.api.listen_args import add_listen_arguments

    p = sub.add_parser(
        "engine",
        help="run the engine headless (for other programs)",
        description="Run the engine in the foreground. It listens on 127.0.0.1 only and "
        "answers requests carrying the token in the config folder (see docs/api.md).",
    )
    add_listen_arguments(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from engine.service.server import serve_here

    return serve_here(args)
