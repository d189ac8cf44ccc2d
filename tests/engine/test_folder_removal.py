"""Removing a folder while it is ingested, through a real engine: its jobs are
cancelled and what they wrote leaves the index at once, not at the next start (the
job used to run to "done" and leave the rest searchable under "(not in a watched
folder)"). Other folders keep their documents."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.environ import COMMIT_FILES_ENV
from tests.support.engine import RunningEngine, running_engine

FILES = 100


@pytest.fixture(autouse=True)
def small_groups(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(COMMIT_FILES_ENV, "10")  # groups go in while the job runs


def _folder(root: Path, count: int) -> Path:
    root.mkdir()
    for i in range(count):
        (root / f"note {i:03d}.txt").write_text(
            f"Note {i}: the heron count at the marsh was {i * 7} birds this spring.\n",
            encoding="utf-8",
        )
    return root


def _wait(what: str, ready: object, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not ready():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _from(engine: RunningEngine, folder: Path) -> list[str]:
    """Documents and search hits under `folder`."""
    docs = [d.path for d in engine.client.documents() if Path(d.path).is_relative_to(folder)]
    hits = engine.client.search(query="heron count at the marsh", k=20).hits
    return docs + [h.path for h in hits if Path(h.path).is_relative_to(folder)]


def test_removing_a_folder_mid_ingest_cancels_its_job_and_removes_what_it_wrote(
    tmp_path: Path,
) -> None:
    keep = _folder(tmp_path / "keep", 1)
    marsh = _folder(tmp_path / "marsh", FILES)
    with running_engine(home=tmp_path / "home") as engine:
        client = engine.client
        assert engine.ingest(keep).state == "done"

        # Paused at a known point: groups of 10 in, the rest to come.
        job = client.add_folder(path=str(marsh)).job
        assert job is not None
        _wait("20 files", lambda: client.ingest_progress(job_id=job.job_id).files_done >= 20)
        client.pause_ingest()
        _wait("the pause", lambda: client.ingest_progress(job_id=job.job_id).current is None)
        assert client.ingest_progress(job_id=job.job_id).files_done < FILES
        client.remove_folder(path=str(marsh))
        assert _from(engine, marsh) == []  # at once
        _wait("the cancel", lambda: client.ingest_progress(job_id=job.job_id).state != "queued")
        client.resume_ingest()
        _wait("the job's end", lambda: not client.ingest_queue().jobs)
        assert client.ingest_progress(job_id=job.job_id).state == "cancelled"
        assert _from(engine, marsh) == []
        assert [Path(d.path).name for d in client.documents()] == ["note 000.txt"]

        # Not paused: removed while files are read and groups committed.
        job = client.add_folder(path=str(marsh)).job
        assert job is not None
        _wait("20 files", lambda: client.ingest_progress(job_id=job.job_id).files_done >= 20)
        client.remove_folder(path=str(marsh))
        assert _from(engine, marsh) == []
        _wait("the job's end", lambda: not client.ingest_queue().jobs)
        assert _from(engine, marsh) == []
        assert [Path(d.path).parent for d in client.documents()] == [keep]
