"""`ragdoll ingest`'s summary: notes about files read, and a full disk said in words."""

from __future__ import annotations

import pytest

from app.commands.ingest import _summary
from engine.rag.ingest.jobs import disk_full_text
from engine.wire import DiskFull, FileNote, IngestProgress


def test_the_summary_lists_the_notes_about_files(capsys: pytest.CaptureFixture[str]) -> None:
    done = IngestProgress(
        job_id="a",
        state="done",
        files_total=2,
        files_done=2,
        files_indexed=2,
        chunks_added=9,
        notes=[FileNote(path="/docs/big.csv", note="only the first 100,000 rows were read")],
    )
    assert _summary(done) == 0
    out = capsys.readouterr().out
    assert "2 files: 2 ingested, 0 unchanged, 0 errors; 9 chunks added" in out
    assert "note: /docs/big.csv: only the first 100,000 rows were read" in out


def test_a_full_disk_says_which_what_is_in_and_that_nothing_was_lost(
    capsys: pytest.CaptureFixture[str],
) -> None:
    report = DiskFull(mount="/mnt/small", folder="/mnt/small/index", files_in=369, files_not_read=1)
    failed = IngestProgress(
        job_id="a",
        state="failed",
        files_total=370,
        files_done=369,
        files_indexed=369,
        disk_full=report,
        message=disk_full_text(report),
    )
    assert _summary(failed) == 1
    err = capsys.readouterr().err
    assert "The disk at /mnt/small is full (it holds the index, /mnt/small/index)." in err
    assert "369 files are in the index; 1 was not read. Nothing was lost" in err
    assert "Lance" not in err and ".rs" not in err
