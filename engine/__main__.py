"""`python -m engine`: run the engine headless (what `ragdoll engine` does)."""

from __future__ import annotations

import sys

from engine.paths import resolve_paths
from engine.server import serve

if __name__ == "__main__":
    sys.exit(serve(paths=resolve_paths()))
