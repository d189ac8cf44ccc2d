"""`ragdoll ingest` when the ingestion does not end well, against a real engine:
it says why, and what happens to the files not yet in."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.support.engine import RunningEngine, process_alive


def _folder(root: Path, count: int = 400) -> Path:
    folder = root / "archive"
    folder.mkdir()
    for i in range(count):
        (folder / f"record {i:04d}.txt").write_text(f"Record {i} of the archive: a ledger page.")
    return folder


def _ingest_in_background(engine: RunningEngine, folder: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "app.cli", "ingest", str(folder)],
        env=engine.env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _running_job(engine: RunningEngine) -> str:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        jobs = [j for j in engine.client.ingest_queue().jobs if j.state == "running"]
        # Files commit in groups, so files_done may jump from 0 to all at the end:
        # chunks found say that the ingestion is under way.
        if jobs and (jobs[0].files_done > 0 or jobs[0].chunks_found > 0):
            return jobs[0].job_id
        time.sleep(0.05)
    raise AssertionError("the ingestion never started")


def test_a_cancelled_ingestion_says_so_and_why(engine: RunningEngine, tmp_path: Path) -> None:
    process = _ingest_in_background(engine, _folder(tmp_path))
    engine.client.cancel_ingest(job_id=_running_job(engine))
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "ingestion cancelled: cancelled on request" in stderr
    assert "files already ingested are kept" in stderr


def test_an_engine_killed_mid_ingest_is_explained(engine: RunningEngine, tmp_path: Path) -> None:
    process = _ingest_in_background(engine, _folder(tmp_path))
    _running_job(engine)
    os.kill(engine.pid, signal.SIGKILL)
    while process_alive(engine.pid):
        time.sleep(0.05)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1
    assert "the engine stopped during the ingestion" in stderr
    assert "ingested when the engine next starts" in stderr
    assert "peer closed" not in stderr
