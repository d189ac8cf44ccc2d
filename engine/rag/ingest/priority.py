"""Background work at a lower CPU priority than answering questions.

On Linux a thread's nice value is its own, and the threads it starts inherit
it: the ingestion worker lowers its own, so the thread pool torch starts for
that thread's encode calls (OpenMP keeps one pool per calling thread) runs
below the threads that embed a question. On a 2-core machine an ingestion
batch and a question's embedding otherwise split the cores evenly, and the
question takes twice as long or more. The parsing child lowers its whole
process (engine/rag/ingest/sandbox_child.py). How much lower: `EngineEnviron.ingest_nice`
(engine/environ.py, RAGDOLL_INGEST_NICE), which the engine hands its queue.
"""

from __future__ import annotations

import logging
import os
import sys
import threading

log = logging.getLogger(__name__)


def lower_this_thread(*, nice: int) -> bool:
    """Raise the calling thread's nice value by `nice` (never lower it: that
    needs privileges); True when it changed. Elsewhere than Linux, where
    priorities are per process, nothing changes."""
    if nice <= 0 or not sys.platform.startswith("linux"):
        return False
    tid = threading.get_native_id()
    try:
        current = os.getpriority(os.PRIO_PROCESS, tid)
        os.setpriority(os.PRIO_PROCESS, tid, min(19, current + nice))
    except OSError as e:  # a sandbox that forbids it: run at the engine's priority
        log.info("could not lower the ingestion thread's priority: %s", e)
        return False
    return True


def thread_nice() -> int | None:
    """The calling thread's nice value (Linux), None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
