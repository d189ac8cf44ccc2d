"""`python -m engine`: run the engine headless (what `ragdoll engine` does)."""

from __future__ import annotations

import sys

from engine.service.server import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
