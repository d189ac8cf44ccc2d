"""A question asked while a folder is still being added: "not found" then says that
files are left to read, and the same question is answered once they are in. A real
engine: LanceDB on disk, the parsing child, the bundled embedder."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

from engine.core import Engine
from engine.paths import resolve_paths
from engine.wire import DoneEvent


def _wait_for(check: Callable[[], bool], timeout_s: float = 180.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def _done(engine: Engine, question: str) -> DoneEvent:
    events = list(engine.ask_stream(question=question, k=3))
    done = events[-1]
    assert isinstance(done, DoneEvent)
    return done


def test_not_found_while_files_are_left_to_read_says_so_and_is_answered_after(
    tmp_path: Path,
) -> None:
    first, second = tmp_path / "garden", tmp_path / "boats"
    first.mkdir()
    (first / "ferns.md").write_text("# Ferns\n\nFerns grow best in deep shade and damp soil.\n")
    second.mkdir()
    for i, text in enumerate(
        (
            "Canal locks raise a narrowboat by filling the chamber with water.",
            "A lock keeper opens the paddles slowly so the boat is not thrown about.",
            "Swing bridges over the canal are opened with a windlass.",
        )
    ):
        (second / f"canal {i}.md").write_text(f"# Canals {i}\n\n{text}\n")
    engine = Engine(
        paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}),
        warm_up=False,
        watch=False,
    )
    try:
        _, job = engine.add_folder(path=str(first))
        _wait_for(lambda: job.snapshot().state == "done")
        engine.ingest.pause()
        _, waiting = engine.add_folder(path=str(second))
        question = "How does a canal lock lift a narrowboat?"
        done = _done(engine, question).done
        assert done.mode == "none"
        assert done.note is not None and "paused: some files are not read yet" in done.note

        engine.ingest.resume()
        _wait_for(lambda: waiting.snapshot().state == "done")
        done = _done(engine, question).done
        assert done.mode == "extractive" and "chamber" in done.answer
        assert "not read yet" not in (done.note or "")
    finally:
        engine.close()
