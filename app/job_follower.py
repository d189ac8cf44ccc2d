"""Following ingestion jobs for the bridge (app/engine_bridge.py): which of the
engine's jobs the window adopts, and, in a worker thread, each progress event of
one sent to the GUI thread until the job ends or the window closes."""

from __future__ import annotations

from collections.abc import Callable

from engine.service.client import EngineClient
from engine.wire import FINAL_STATES, IngestProgress, IngestQueueState

# Jobs the engine starts on its own (a watched folder changed, the rescan at
# start): the window follows them too, found by the health probe.
ENGINE_ORIGINS = frozenset({"watcher", "rescan"})


def jobs_to_adopt(
    *, queue: IngestQueueState, followed: set[str], every_origin: bool
) -> list[IngestProgress]:
    """The engine's jobs the window is to follow and does not yet: those the
    engine started itself, or at connection (`every_origin`) every one."""
    return [
        job
        for job in queue.jobs
        if job.job_id not in followed and (every_origin or job.origin in ENGINE_ORIGINS)
    ]


def follow_job(
    *,
    client: EngineClient,
    last: IngestProgress,
    closed: Callable[[], bool],
    show: Callable[[IngestProgress], object],
) -> IngestProgress:
    """`show` each state of the job from `last` on (it posts to the GUI thread);
    returns its last state."""
    show(last)
    if last.state in FINAL_STATES:
        return last
    for progress in client.ingest_events(job_id=last.job_id):
        if closed():
            break
        last = progress
        show(progress)
        if progress.state in FINAL_STATES:
            break
    if last.state not in FINAL_STATES and not closed():
        # The event stream ended early (say, a proxy cut it): ask once.
        last = client.ingest_progress(job_id=last.job_id)
    return last
