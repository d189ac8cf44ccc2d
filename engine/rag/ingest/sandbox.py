"""Parsing in a warm child process with a time and a memory limit per file.

One child serves file after file (starting Python and importing the parsers
costs about a second, more than parsing most files). A file that takes too long
gets the child killed; one that needs too much memory fails inside it or gets
it killed. Either way the file's outcome is a ParseError with the reason, and
the next file starts a fresh child. The engine never waits longer than the
time limit on one file, or, for files read page by page with OCR, on one page
(each page read resets the clock).
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import Connection
from pathlib import Path

from engine.errors import ParseError
from engine.rag.ingest.parsers import ParsedDocument
from engine.rag.ingest.sandbox_child import EXIT_OUT_OF_MEMORY

log = logging.getLogger(__name__)
_START_TIMEOUT_S = 120.0  # a cold start on a busy 2-core machine takes seconds


@dataclass(frozen=True, kw_only=True)
class SandboxLimits:
    time_s: float = 120.0  # per file
    memory_mb: int = 2048  # address space of the child; 0 = no limit
    nice: int = 10  # at least this nice: below the engine, so questions stay responsive
    # "module:function" called as f(path=...) in the child; tests name hostile ones.
    parser: str = "engine.rag.ingest.parsers:parse_file"


@dataclass(frozen=True, kw_only=True)
class _InFlight:
    path: Path
    deadline: float


class ParseSandbox:
    """Not thread-safe: one ingestion worker owns it. At most one file is in
    flight, so the caller can chunk and embed one file while the next parses."""

    def __init__(self, *, limits: SandboxLimits | None = None) -> None:
        self.limits = limits or SandboxLimits()
        self._proc: subprocess.Popen[bytes] | None = None
        self._conn: Connection | None = None
        self._inflight: _InFlight | None = None
        self.starts = 0  # children started: more than one means kills or crashes
        # (pages done, pages to do) of the file in flight, when its parser says.
        self.progress: tuple[int, int] | None = None

    @property
    def busy(self) -> bool:
        return self._inflight is not None

    def parse(
        self, *, path: Path, on_progress: Callable[[int, int], None] | None = None
    ) -> ParsedDocument:
        self.submit(path=path)
        return self.collect(on_progress=on_progress)

    def submit(self, *, path: Path) -> None:
        if self._inflight is not None:
            raise RuntimeError("a file is already being parsed")
        conn = self._ensure_child()
        conn.send(str(path))
        self._inflight = _InFlight(path=path, deadline=time.monotonic() + self.limits.time_s)

    def collect(self, *, on_progress: Callable[[int, int], None] | None = None) -> ParsedDocument:
        """The parsed document of the file in flight; ParseError with the reason
        when it could not be parsed, ran out of time or memory. `on_progress`
        hears (pages done, pages to do) from parsers that read slow pages."""
        inflight, self._inflight = self._inflight, None
        if inflight is None or self._conn is None:
            raise RuntimeError("no file is being parsed")
        deadline = inflight.deadline
        while True:
            remaining = max(0.0, deadline - time.monotonic())
            if not self._conn.poll(remaining):
                log.warning(
                    "parsing %s took over %.0f s: stopping it", inflight.path, self.limits.time_s
                )
                self._kill()
                raise ParseError(
                    f"parsing took longer than the limit ({self.limits.time_s:g} s); skipped"
                )
            try:
                kind, value = self._conn.recv()
            except (EOFError, OSError):
                raise ParseError(self._reason_for_death()) from None
            if kind == "progress":
                # A page was read: the limit now applies to the next one.
                deadline = time.monotonic() + self.limits.time_s
                self.progress = value
                if on_progress is not None:
                    on_progress(*value)
                continue
            self.progress = None
            if kind == "ok":
                return value
            raise ParseError(str(value))

    def abort(self) -> None:
        """Stop the file in flight, if any (cancel, shutdown)."""
        if self._inflight is not None:
            self._inflight = None
            self._kill()

    def close(self) -> None:
        self._inflight = None
        if self._conn is not None:
            self._conn.close()  # the child sees EOF and exits
            self._conn = None
        if self._proc is not None:
            try:
                self._proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
            self._proc = None

    # -- the child -------------------------------------------------------------

    def _ensure_child(self) -> Connection:
        if self._conn is not None and self._proc is not None and self._proc.poll() is None:
            return self._conn
        self._kill()
        self.starts += 1
        ours, theirs = socket.socketpair()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        try:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "engine.rag.ingest.sandbox_child",
                    f"--fd={theirs.fileno()}",
                    f"--parent={os.getpid()}",
                    f"--memory-mb={self.limits.memory_mb}",
                    f"--nice={self.limits.nice}",
                    f"--parser={self.limits.parser}",
                ],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=env,
            )
        finally:
            theirs.close()
        self._conn = Connection(ours.detach())
        if not self._conn.poll(_START_TIMEOUT_S):
            self._kill()
            raise RuntimeError("the parsing process did not start")
        try:
            kind, _ = self._conn.recv()
        except (EOFError, OSError) as e:
            code = self._proc.wait(timeout=5)
            self._kill()
            raise RuntimeError(f"the parsing process failed to start (exit code {code})") from e
        if kind != "ready":
            self._kill()
            raise RuntimeError(f"the parsing process said {kind!r} instead of ready")
        return self._conn

    def _reason_for_death(self) -> str:
        assert self._proc is not None
        try:
            code = self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        self._kill()
        if code == EXIT_OUT_OF_MEMORY:
            return (
                f"parsing needed more memory than the limit ({self.limits.memory_mb} MB); skipped"
            )
        if code is not None and code < 0:
            name = signal.Signals(-code).name if -code in signal.valid_signals() else str(-code)
            return f"the parser crashed on this file ({name}); skipped"
        return f"the parser stopped on this file (exit code {code}); skipped"

    def _kill(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()
