"""`ragdoll gui` (and bare `ragdoll`): open the window."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("gui", help="open the RAGDoll window (the default)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    # Qt is imported here, not at the top: `ragdoll ask` must not pay for it.
    from app.main import run_gui

    return run_gui(argv=sys.argv[:1])
