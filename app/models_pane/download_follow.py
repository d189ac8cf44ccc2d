"""Following a model download the person asked for, from a worker thread: the Models
dialog and the multilingual embedder's offer both start one and watch it to its end."""

from __future__ import annotations

import time

from app.bridge_plumbing import Report
from engine.service.client import EngineClient
from engine.wire import FINAL_STATES, ModelDownload


def follow_download(
    *, client: EngineClient, repo_id: str, report: Report, poll_s: float, file: str | None = None
) -> ModelDownload:
    """In a worker: start a hub download (the person asked for it; `file`: one GGUF
    file of the repo) and follow it to its end by polling: a download runs for minutes,
    and polling survives an engine restart with a clear failure instead of a stream
    stuck in a read."""
    state = client.download_model(repo_id=repo_id, file=file)
    while state.state not in FINAL_STATES and report(state):
        time.sleep(poll_s)
        state = client.download_progress(download_id=state.download_id)
    return state
