"""Test-only parsers run inside the parsing child (SandboxLimits.parser) to
act out what pathological files do to real parsers: hang, eat memory, crash,
or be rewritten while they are read, or leave a note about what they read; or
hold a file until the test releases it.
Any other file goes to the real parser."""

from __future__ import annotations

import dataclasses
import os
import signal
import time
from pathlib import Path

from engine.rag.ingest.parsers import ParsedDocument, parse_file


def parse(*, path: Path) -> ParsedDocument:
    name = path.name
    if "hang" in name:
        while True:
            time.sleep(1)
    if "bloat" in name:
        hoard = []
        while True:
            hoard.append(bytearray(64 * 1024 * 1024))
    if "crash" in name:
        os.kill(os.getpid(), signal.SIGSEGV)
    if "churn" in name:
        # Rewritten by someone else while this parser reads it: every time for
        # "churn-always", only the first time for "churn-once".
        marker = path.with_name(path.name + ".seen")
        if "always" in name or not marker.exists():
            marker.write_text("x")
            doc = parse_file(path=path)
            with path.open("a") as f:
                f.write(" More text arrived while the file was read.")
            time.sleep(0.05)
            return doc
    if "held" in name:
        # Read only once the test lets it (it writes NAME.release): a job cannot get
        # past this file before the test has done what it must while the file is at hand.
        release = path.with_name(path.name + ".release")
        deadline = time.monotonic() + 60
        while not release.exists() and time.monotonic() < deadline:
            time.sleep(0.02)
        return parse_file(path=path)
    if "noted" in name:  # read, with a note, as a huge sheet's first rows are
        return dataclasses.replace(
            parse_file(path=path), notes=("only the first 100,000 rows were read",)
        )
    return parse_file(path=path)


def parse_slow_pages(*, path: Path, progress=None) -> ParsedDocument:  # type: ignore[no-untyped-def]
    """Like a scanned PDF read by OCR: each page takes a while and is reported;
    the whole file takes longer than the sandbox's per-file limit."""
    pages = int(path.stem.rsplit("-", 1)[-1]) if "-" in path.stem else 3
    for done in range(1, pages + 1):
        time.sleep(0.5)
        if progress is not None:
            progress(done, pages)
    return parse_file(path=path)
