"""Which of the engine's ingestion jobs the window follows (app/job_follower.py)."""

from __future__ import annotations

from app.job_follower import jobs_to_adopt
from engine.wire import IngestProgress, IngestQueueState


def _queue() -> IngestQueueState:
    return IngestQueueState(
        paused=False,
        jobs=[
            IngestProgress(job_id="asked", state="running", origin="request"),
            IngestProgress(job_id="changed", state="running", origin="watcher"),
            IngestProgress(job_id="start", state="queued", origin="rescan"),
        ],
    )


def test_the_engines_own_jobs_are_adopted_once() -> None:
    adopted = jobs_to_adopt(queue=_queue(), followed=set(), every_origin=False)
    assert [j.job_id for j in adopted] == ["changed", "start"]
    again = jobs_to_adopt(queue=_queue(), followed={"changed"}, every_origin=False)
    assert [j.job_id for j in again] == ["start"]


def test_at_connection_every_job_is_adopted() -> None:
    # A job another window asked for is none of this window's either.
    adopted = jobs_to_adopt(queue=_queue(), followed=set(), every_origin=True)
    assert [j.job_id for j in adopted] == ["asked", "changed", "start"]
