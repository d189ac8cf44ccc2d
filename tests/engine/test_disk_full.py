"""A full disk, through a real engine whose index lies on a small disk of its own
(tests/support/small_disk.py): files are added one at a time while the room left
shrinks by 64 KB a step (16 KB in the slow form), across the point where the disk
fills, half of them copies of an indexed file (whose chunks are copied, not
embedded). After every step the index agrees with itself (every chunk has its
document's row, nothing served without one), and no file is recorded with the disk's
error; with room again and a restart, every file is read. Before: a file added with
285,312 bytes free had its 126 chunks served with no row; copies added once the disk
was full could be recorded "the disk is full" and never read again, also after a
restart."""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import pytest

from engine.errors import EngineRequestError, EngineUnavailableError
from engine.paths import Paths, resolve_paths
from engine.service.client import EngineClient
from engine.service.launcher import endpoint_process_alive
from tests.support.small_disk import SmallDisk, small_disk

ROOT = Path(__file__).resolve().parents[2]
WORDS = [f"w{i}" for i in range(5000)]
# The room left before each file: coarse while files fit, then 64 KB a step (16 KB in
# the slow form) across the point where the disk fills (on the old code a file's
# chunks went in without their row with 285,312 bytes left). The store now refuses a
# group that would not fit with room to spare (engine/rag/store/doc_writes.py, about
# 0.5 MB beyond its rows), so the coarse steps cross the refusal and the fine ones
# check that nothing half-written comes of a write tried with less room still.
COARSE = [2_000_000, 1_500_000, 1_100_000, 800_000, 600_000]
# Words a file: about 60 chunks, each file's rows well under the coarse steps (a
# second refused or unread file costs its embedding again at the restart's rescan).
FILE_WORDS = 3000


@contextmanager
def _engine(disk: SmallDisk, paths: Paths) -> Iterator[EngineClient]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    log = open(paths.logs / "engine.out", "ab")  # noqa: SIM115 - the engine's, closed below
    process = disk.popen([sys.executable, "-m", "engine"], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 120
        while not endpoint_process_alive(paths=paths):
            assert process.poll() is None, "the engine stopped as it started"
            assert time.monotonic() < deadline, "the engine did not start"
            time.sleep(0.2)
        client = EngineClient.connect(paths=paths, start=False, wait_s=120)
        try:
            yield client
        finally:
            with suppress(EngineUnavailableError, EngineRequestError):
                client.shutdown()
            client.close()
            process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        log.close()


def _consistent(client: EngineClient) -> list[str]:
    """What of the index disagrees with itself, in words."""
    problems = []
    docs = client.documents()
    indexed = {d.path: d.chunks for d in docs if d.status == "indexed"}
    chunks = client.status().chunks
    if chunks != sum(indexed.values()):
        problems.append(f"{chunks} chunks, the documents' rows count {sum(indexed.values())}")
    hits = client.search(query=" ".join(WORDS[:8]), k=50).hits
    problems += [f"served without a row: {h.path}" for h in hits if h.path not in indexed]
    problems += [f"{d.path}: {d.error}" for d in docs if "full" in (d.error or "")]
    return problems


def _leave_free(disk: SmallDisk, *, ballast: Path, free: int) -> None:
    """Grow or shrink the ballast file so that about `free` bytes stay free."""
    size = ballast.stat().st_size
    target = max(0, size + disk.free_bytes() - free)
    if target < size:
        os.truncate(ballast, target)
    else:
        with open(ballast, "ab") as f:
            f.write(b"\1" * (target - size))


def _ingest(client: EngineClient, path: Path) -> str:
    job = client.ingest(paths=[path])
    last = job
    for last in client.ingest_events(job_id=job.job_id):  # noqa: B007
        pass
    return last.state


@pytest.mark.skipif(not shutil.which("nsenter"), reason="needs nsenter (Linux)")
@pytest.mark.parametrize("step_bytes", [65_536, pytest.param(16_384, marks=pytest.mark.slow)])
def test_a_full_disk_leaves_no_chunk_without_its_row_and_no_file_stuck(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, step_bytes: int
) -> None:
    free_before = [*COARSE, *range(400_000, 176_000, -step_bytes)]
    steps = len(free_before)
    monkeypatch.setenv("RAGDOLL_HOME", str(tmp_path / "home"))
    paths = resolve_paths().ensure()
    docs = tmp_path / "docs"
    docs.mkdir()
    rng = random.Random(7)
    first = docs / "first.txt"
    first.write_text(" ".join(rng.choice(WORDS) for _ in range(FILE_WORDS)))
    seen: list[str] = []
    with small_disk(mount=paths.data, size_mb=16) as disk:
        ballast = disk.inside(paths.data / "ballast")
        ballast.write_bytes(b"")
        with _engine(disk, paths) as client:
            client.add_folder(path=docs, ingest=False)
            assert _ingest(client, first) == "done"
            for step in range(steps):
                _leave_free(disk, ballast=ballast, free=free_before[step])
                path = docs / f"file {step:02d}.txt"
                if step % 2:
                    shutil.copy(first, path)  # its chunks are copied from first.txt's
                else:
                    path.write_text(" ".join(rng.choice(WORDS) for _ in range(FILE_WORDS)))
                seen.append(f"{step}: {_ingest(client, path)}, {disk.free_bytes()} B free")
                problems = _consistent(client)
                assert problems == [], f"after step {step} ({seen}): {problems}"
            assert any("failed" in s for s in seen), f"the disk never filled: {seen}"

        ballast.unlink()  # room again; the start-up rescan reads what was left
        with _engine(disk, paths) as client:
            deadline = time.monotonic() + 180
            while client.ingest_queue().jobs or client.status().documents < steps + 1:
                assert time.monotonic() < deadline, client.documents()
                time.sleep(0.5)
            assert _consistent(client) == []
            assert client.errors() == []
            assert {Path(d.path).name for d in client.documents()} == {
                "first.txt",
                *(f"file {step:02d}.txt" for step in range(steps)),
            }
