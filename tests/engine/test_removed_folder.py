"""After a folder is removed (issue #44, 7): an old citation says its document left the
library (it said "no such passage (re-indexed?)"), and the emptied collection is no
reason to time the machine again."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.errors import EngineRequestError
from engine.service.server import PASSAGE_REMOVED
from tests.support.engine import running_engine

NOTE = "The greenhouse is watered every morning at six, before the sun reaches the glass.\n"


def test_a_citation_of_a_removed_folder_says_the_document_was_removed(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "greenhouse.txt").write_text(NOTE, encoding="utf-8")
    with running_engine(home=tmp_path / "home") as engine:
        assert engine.ingest(docs).state == "done"
        answer = engine.client.ask(question="When is the greenhouse watered?")
        (citation, *_) = answer.citations
        assert engine.client.source(chunk_id=citation.chunk_id).path.endswith("greenhouse.txt")
        engine.client.remove_folder(path=str(docs))
        with pytest.raises(EngineRequestError) as refused:
            engine.client.source(chunk_id=citation.chunk_id)
        assert refused.value.status == 404
        assert str(refused.value) == PASSAGE_REMOVED
        assert (docs / "greenhouse.txt").is_file()  # the file itself is untouched


def test_an_emptied_collection_does_not_start_the_machine_timing_again(tmp_path: Path) -> None:
    from engine.paths import resolve_paths
    from engine.runtime.planner.profiling import load_saved_profile
    from engine.service.core import Engine

    docs = tmp_path / "docs"
    docs.mkdir()
    for n in range(6):
        (docs / f"note{n}.txt").write_text(NOTE * 20, encoding="utf-8")
    paths = resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")})
    engine = Engine(paths=paths, warm_up=False)
    try:
        _, job = engine.add_folder(path=str(docs))
        version = 0
        while job.snapshot().state not in ("done", "failed", "cancelled"):
            version, _ = job.wait_next(after=version, timeout_s=1.0)
        assert engine.store.counts()[1] > 0
        engine.system.skip_profiling()  # the person's choice, stored for this collection
        saved = load_saved_profile(data_dir=paths.data)
        assert saved is not None and saved.collection_chunks > 0
        engine.remove_folder(path=str(docs))
        assert engine.store.counts()[1] == 0
        status = engine.profiler.check_now()  # what the profiler's loop does
        assert status.state == "skipped", (status.state, status.reason)
    finally:
        engine.close()
