from __future__ import annotations

from app.library.progress_text import counts_line, eta_text, pace_line, rate_text
from engine.wire import IngestProgress


def _running(**kwargs: object) -> IngestProgress:
    return IngestProgress(job_id="j", state="running", **kwargs)  # type: ignore[arg-type]


def test_rate_is_files_per_second_or_chunks_when_files_are_slow() -> None:
    assert rate_text(progress=_running(files_per_s=3.25, chunks_per_s=40.0)) == "3.2 files/s"
    assert rate_text(progress=_running(files_per_s=0.02, chunks_per_s=12.0)) == "12 chunks/s"
    assert rate_text(progress=_running()) == ""


def test_eta_reads_in_the_unit_a_person_uses() -> None:
    assert eta_text(eta_s=None) == ""
    assert eta_text(eta_s=0.4) == "almost done"
    assert eta_text(eta_s=42) == "about 42 s left"
    assert eta_text(eta_s=600) == "about 10 min left"
    assert eta_text(eta_s=2 * 3600 + 15 * 60) == "about 2 h 15 min left"
    assert eta_text(eta_s=3600) == "about 1 h left"


def test_pace_line_says_paused_and_nothing_once_finished() -> None:
    assert (
        pace_line(progress=_running(files_per_s=2.0, eta_s=90)) == "2.0 files/s · about 2 min left"
    )
    assert pace_line(progress=_running(files_per_s=2.0, paused=True)).startswith("Paused")
    done = IngestProgress(job_id="j", state="done", files_per_s=2.0)
    assert pace_line(progress=done) == ""


def test_the_counts_are_the_jobs_so_far_not_the_current_files() -> None:
    # Under "Working on debian-policy.pdf" (193 pages) the job has read 477 pages.
    line = counts_line(
        progress=_running(
            pages_read=477, chunks_found=2114, chunks_embedded=1381, chunks_added=1349
        )
    )
    assert line == "477 pages read · 1,381 of 2,114 new chunks embedded · 1,349 chunks added"
    assert counts_line(progress=_running(pages_read=1)).startswith("1 page read · ")
