"""`ragdoll embedder --wait` follows the switch it started, however short."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import pytest

from app.commands import embedder
from engine.wire import EngineStatus, IngestProgress

OLD, NEW = "all-MiniLM-L6-v2", "intfloat/multilingual-e5-small"


@dataclass
class _SwitchDoneBetweenCalls:
    """The engine as a short switch leaves it: the first status shows the job running,
    every later one shows the switch done and no job."""

    statuses: int = 0
    followed: list[str] = field(default_factory=list)

    def status(self) -> EngineStatus:
        self.statuses += 1
        running = self.statuses == 1
        return EngineStatus(
            version="0-test",
            pid=1,
            documents=1,
            chunks=4,
            embedder=NEW,
            model=None,
            answer_mode="extractive",
            embedder_in_force=OLD if running else NEW,
            embedder_job="embed-1" if running else None,
        )

    def ingest_progress(self, *, job_id: str) -> IngestProgress:
        return IngestProgress(job_id=job_id, state="done", chunks_found=4, chunks_embedded=4)

    def ingest_events(self, *, job_id: str) -> Iterator[IngestProgress]:
        self.followed.append(job_id)
        yield self.ingest_progress(job_id=job_id)


def test_a_switch_done_before_the_wait_begins_still_prints_the_embedder_in_force(
    capsys: pytest.CaptureFixture[str],
) -> None:
    client = _SwitchDoneBetweenCalls()
    job = embedder._show(client)  # type: ignore[arg-type]
    assert job == "embed-1"
    assert embedder._follow(client, job_id=job) == 0  # type: ignore[arg-type]
    out = capsys.readouterr().out
    assert client.followed == ["embed-1"]
    assert out.splitlines()[-1] == f"embedder: {NEW}"
