"""`ragdoll gui` (and bare `ragdoll`): open the window."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("gui", help="open the RAGDoll window (the default)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Before Qt loads its X11 plugin: a missing system library made Qt abort with a
    # message that blamed another one, and without a display it aborted too.
    from native.qt_deps import window_problem

    problem = window_problem(env=os.environ)
    if problem is not None:
        print(problem, file=sys.stderr)
        return 1
    # Qt is imported here, not at the top: `ragdoll ask` must not pay for it.
    from app.main import run_gui

    return run_gui(argv=sys.argv[:1])
