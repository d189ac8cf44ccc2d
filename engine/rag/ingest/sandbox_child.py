"""The parsing child: reads one path at a time from its socket, parses it and
sends back the ParsedDocument or the reason it could not.

Started by engine/rag/ingest/sandbox.py as `python -m engine.rag.ingest.sandbox_child`.
It runs at low priority under an address-space limit, so a pathological file
fails here (or gets this process killed) and never takes the engine down.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from engine.errors import ParseError
from engine.rag.child_module import die_with_parent

EXIT_OUT_OF_MEMORY = 3


def load_callable(spec: str) -> Callable[..., Any]:
    module, _, name = spec.partition(":")
    return getattr(importlib.import_module(module), name)


def _limit_resources(*, memory_mb: int, nice: int) -> None:
    import resource

    # `nice` is the value to run at, not a step: the ingestion thread that
    # starts the child has lowered its own priority already (priority.py).
    if nice > os.nice(0):
        os.nice(nice - os.nice(0))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    if memory_mb > 0:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def serve(*, conn: Connection, parse: Callable[..., Any]) -> int:
    # Parsers that read slow pages (OCR) report each one; the engine takes the
    # message as a sign of life (it extends the time limit) and shows it.
    takes_progress = "progress" in inspect.signature(parse).parameters

    def progress(done: int, total: int) -> None:
        conn.send(("progress", (done, total)))

    while True:
        try:
            path = conn.recv()
        except (EOFError, OSError):
            return 0  # the engine closed its end: nothing more to do
        try:
            if takes_progress:
                conn.send(("ok", parse(path=Path(path), progress=progress)))
            else:
                conn.send(("ok", parse(path=Path(path))))
        except MemoryError:
            return EXIT_OUT_OF_MEMORY
        except ParseError as e:
            if isinstance(e.__cause__, MemoryError):
                return EXIT_OUT_OF_MEMORY  # parse_file wraps unforeseen errors
            conn.send(("error", e.reason))
        except Exception as e:  # a parser bug is this file's error, not the child's end
            conn.send(("error", f"could not read the file ({type(e).__name__}: {e})"[:300]))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="engine.rag.ingest.sandbox_child")
    p.add_argument("--fd", type=int, required=True)
    p.add_argument("--parent", type=int, required=True)
    p.add_argument("--memory-mb", type=int, default=0)
    p.add_argument("--nice", type=int, default=0)
    p.add_argument("--parser", default="engine.rag.ingest.parsers:parse_file")
    args = p.parse_args(argv)
    die_with_parent(args.parent)  # an engine killed mid-parse takes its child along
    conn = Connection(args.fd)
    parse = load_callable(args.parser)  # imported before the limit: imports map memory
    _limit_resources(memory_mb=args.memory_mb, nice=args.nice)
    conn.send(("ready", os.getpid()))
    return serve(conn=conn, parse=parse)


if __name__ == "__main__":
    sys.exit(main())
