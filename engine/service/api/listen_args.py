"""The flags of `ragdoll engine` and `python -m engine`: where it listens, and whom it
stops with (kept light: `ragdoll --help` imports this)."""

from __future__ import annotations

import argparse


def add_listen_arguments(parser: argparse.ArgumentParser) -> None:
    """The flags of `ragdoll engine` and `python -m engine`."""
    parser.add_argument(
        "--listen",
        default="127.0.0.1",
        metavar="ADDRESS",
        help="address to listen on (default 127.0.0.1). Anything else, such as 0.0.0.0, "
        "exposes the engine to the network (still token-only): only if you mean it",
    )
    parser.add_argument(
        "--port", type=int, default=0, help="port (default: any free one, see the endpoint file)"
    )
    parser.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --listen: a further host name clients may use (repeatable)",
    )
    parser.add_argument(
        "--stop-with",
        type=int,
        default=None,
        metavar="PID",
        help="stop when process PID ends, unless the engine is kept running to watch "
        "folders (what the window asks of an engine it starts)",
    )
