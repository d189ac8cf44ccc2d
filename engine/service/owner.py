"""The program an engine was started for: when it is gone, the engine stops.

The window stops the engine it started when it closes, unless the person keeps the
engine running to watch folders (app/engine_bridge.py), and a command that starts one
for a call stops it after (app/commands/session.py). A window that dies without
closing (killed, crashed, its display gone) says nothing, and the engine it started
kept running alone, holding the model in memory, until someone killed it. Started
with `--stop-with PID`, the engine looks every second whether that process still runs,
and when it has gone does what the window's close would have done: it stops, unless
the person asked to keep it running. An engine started by hand (`ragdoll engine`)
has no owner and runs until stopped.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from engine.service.launcher import ProcessRecord, process_runs

log = logging.getLogger(__name__)

# How often the owner is looked for: a psutil call, nothing the engine would feel.
OWNER_POLL_S = 1.0


class OwnerWatch:
    """Calls `stop` once `owner` no longer runs, unless `keep_running()` says the
    person keeps the engine running; either way it then stops looking."""

    def __init__(
        self,
        *,
        owner: ProcessRecord,
        keep_running: Callable[[], bool],
        stop: Callable[[], None],
        poll_s: float = OWNER_POLL_S,
    ) -> None:
        self._owner = owner
        self._keep_running = keep_running
        self._stop = stop
        self._poll_s = poll_s
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="ragdoll-owner", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._closed.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(timeout=5.0)

    def _watch(self) -> None:
        while not self._closed.is_set():
            if not process_runs(process=self._owner):
                self._gone()
                return
            self._closed.wait(self._poll_s)

    def _gone(self) -> None:
        pid = self._owner.pid
        if self._keep_running():
            log.info("process %d, which started the engine, is gone; kept running", pid)
            return
        log.info("process %d, which started the engine, is gone; stopping", pid)
        self._stop()
