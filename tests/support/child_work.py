"""A module run as the engine's child processes are (engine/rag/child_module.py): it
writes its pid and arguments to the file named first, then ends with the code named
second, or sleeps when told to."""

from __future__ import annotations

import json
import os
import sys
import time


def main(argv: list[str]) -> int:
    out, then = argv[0], argv[1]
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"pid": os.getpid(), "argv": argv}, f)
    if then == "sleep":
        time.sleep(120)
        return 0
    if then != "0":
        print(f"asked to end with {then}", file=sys.stderr)
    return int(then)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
