"""A question asked while a folder is still being added: "not found" then says that
files are left to read, and the same question is answered once they are in. A real
engine: LanceDB on disk, the parsing child, the bundled embedder."""

from __future__ import annotations

from pathlib import Path

from engine.paths import resolve_paths
from engine.service.core import Engine
from engine.wire import DoneEvent
from tests.support.waiting import wait_until


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
        wait_until(lambda: job.snapshot().state == "done", timeout_s=180)
        engine.ingest.pause()
        _, waiting = engine.add_folder(path=str(second))
        question = "How does a canal lock lift a narrowboat?"
        done = _done(engine, question).done
        assert done.mode == "none"
        assert done.note is not None and "paused: some files are not read yet" in done.note

        engine.ingest.resume()
        wait_until(lambda: waiting.snapshot().state == "done", timeout_s=180)
        done = _done(engine, question).done
        assert done.mode == "extractive" and "chamber" in done.answer
        assert "not read yet" not in (done.note or "")
    finally:
        engine.close()
