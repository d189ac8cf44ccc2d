"""Ingestion's threads below the threads that answer questions (Linux)."""

from __future__ import annotations

import sys
import threading

import pytest

from engine.rag.ingest import priority

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="per-thread nice")


def _in_thread(work):  # type: ignore[no-untyped-def]
    out: dict[str, object] = {}
    t = threading.Thread(target=lambda: out.update(value=work()))
    t.start()
    t.join()
    return out["value"]


@linux_only
def test_a_lowered_thread_and_the_threads_it_starts_run_nicer_than_the_rest() -> None:
    before = priority.thread_nice()

    def lowered() -> tuple[bool, int | None, int | None]:
        changed = priority.lower_this_thread(nice=5)
        # What torch's pool for this thread would be: a thread started by it.
        return changed, priority.thread_nice(), _in_thread(priority.thread_nice)

    changed, own, child = _in_thread(lowered)
    assert before is not None
    assert changed and own == min(19, before + 5) and child == own
    assert priority.thread_nice() == before, "the caller's thread keeps its priority"
