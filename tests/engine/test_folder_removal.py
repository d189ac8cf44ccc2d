"""Removing a folder while it is ingested: its jobs are cancelled and what they wrote
leaves the index at once, not at the next start (the job used to run to "done" and
leave the rest searchable under "(not in a watched folder)"). Other folders keep their
documents.

The job is held where the test needs it, never raced: one file of the folder waits in
the parser until the test releases it (tests/support/hostile_parsers.py), so however
fast or slow the machine, the removal lands mid-job with groups already written. (It
raced a 100-file job before: a busy machine let the job finish before the pause.)"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.environ import COMMIT_FILES_ENV
from engine.paths import resolve_paths
from engine.rag.ingest.sandbox import SandboxLimits
from engine.service import core
from engine.service.core import Engine
from engine.wire import IngestProgress

FILES = 100
HELD = 25  # the file the parser holds: 25 before it, in groups of 10
HOSTILE = "tests.support.hostile_parsers:parse"


@pytest.fixture(autouse=True)
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_FILES_ENV, "10")  # groups go in while the job runs
    real = core.SandboxLimits
    monkeypatch.setattr(core, "SandboxLimits", functools.partial(real, parser=HOSTILE))
    assert isinstance(core.SandboxLimits(), SandboxLimits)


@pytest.fixture
def engine(tmp_path: Path):  # type: ignore[no-untyped-def]
    home = tmp_path / "home"
    running = Engine(paths=resolve_paths(env={"RAGDOLL_HOME": str(home)}), warm_up=False)
    try:
        yield running
    finally:
        running.close()


def _folder(root: Path, count: int) -> Path:
    root.mkdir()
    for i in range(count):
        held = " held" if i == HELD else ""
        (root / f"note {i:03d}{held}.txt").write_text(
            f"Note {i}: the heron count at the marsh was {i * 7} birds this spring.\n",
            encoding="utf-8",
        )
    return root


def _release(folder: Path) -> None:
    (folder / f"note {HELD:03d} held.txt.release").write_text("")


def _wait(job: object, what: str, ready: Callable[[IngestProgress], bool]) -> IngestProgress:
    deadline = time.monotonic() + 120
    version = 0
    while True:
        version, progress = job.wait_next(after=version, timeout_s=0.5)  # type: ignore[attr-defined]
        if ready(progress):
            return progress
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {progress}"


def _at_hand(progress: IngestProgress) -> bool:
    """The held file in the parser: the 25 before it were read, two groups of 10
    written (its count of files done is published at the next tick, not yet)."""
    return (progress.current or "").endswith("held.txt")


def _from(engine: Engine, folder: Path) -> list[str]:
    """Documents and search hits under `folder`."""
    docs = [d.path for d in engine.documents() if Path(d.path).is_relative_to(folder)]
    hits = engine.retrieve(question="heron count at the marsh", k=20)
    return docs + [h.chunk.path for h in hits if Path(h.chunk.path).is_relative_to(folder)]


def _finished(job: object) -> IngestProgress:
    return _wait(job, "the job's end", lambda p: p.state in ("done", "failed", "cancelled"))


def test_removing_a_folder_mid_ingest_cancels_its_job_and_removes_what_it_wrote(
    engine: Engine, tmp_path: Path
) -> None:
    keep = _folder(tmp_path / "keep", 1)
    marsh = _folder(tmp_path / "marsh", FILES)
    _, first = engine.add_folder(path=str(keep))
    assert _finished(first).state == "done"

    # Paused with groups of 10 in and the held file in the parser, the rest to come.
    _, job = engine.add_folder(path=str(marsh))
    _wait(job, "the held file", _at_hand)
    assert _from(engine, marsh)  # groups of it are in, searchable
    engine.pause_ingest()
    _release(marsh)
    paused = _wait(job, "the pause", lambda p: p.paused and p.current is None)
    assert 20 <= paused.files_done < FILES
    engine.remove_folder(path=str(marsh))
    assert _from(engine, marsh) == []  # at once
    engine.resume_ingest()
    assert _finished(job).state == "cancelled"
    assert _from(engine, marsh) == []
    assert [Path(d.path).name for d in engine.documents()] == ["note 000.txt"]

    # Not paused: removed while the held file is read and groups are committed.
    (marsh / f"note {HELD:03d} held.txt.release").unlink()
    _, job = engine.add_folder(path=str(marsh))
    _wait(job, "the held file", _at_hand)
    assert _from(engine, marsh)
    engine.remove_folder(path=str(marsh))
    assert _from(engine, marsh) == []
    _release(marsh)
    assert _finished(job).state == "cancelled"
    assert _from(engine, marsh) == []
    assert [Path(d.path).parent for d in engine.documents()] == [keep]
