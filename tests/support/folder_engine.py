"""An in-process engine over a folder of copied files, for tests that ask it real
questions through its own answering path (`Engine.ask_stream`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine.paths import resolve_paths
from engine.service.core import Engine
from engine.service.settings import save_settings
from engine.wire import CitationsEvent, DoneEvent, EngineSettings, SearchedEvent, Turn


@contextmanager
def folder_engine(
    *, root: Path, files: Iterable[Path], embedder: Path | None = None
) -> Iterator[Engine]:
    """An engine in `root`/home that watches `root`/docs, a copy of `files`, once its
    first ingestion is done. `embedder`: a sentence-transformers folder to index with
    (torch back-end: no ONNX export of a large model here)."""
    docs = root / "docs"
    docs.mkdir()
    for file in files:
        shutil.copy2(file, docs / file.name)
    mp = pytest.MonkeyPatch()
    mp.setenv("RAGDOLL_HOME", str(root / "home"))
    mp.setenv("RAGDOLL_AUTO_PROFILE", "0")
    try:
        paths = resolve_paths().ensure()
        if embedder is not None:
            mp.setenv("RAGDOLL_EMBEDDER_BACKEND", "torch")
            save_settings(file=paths.settings_file, settings=EngineSettings(embedder=str(embedder)))
        running = Engine(paths=paths, warm_up=False, watch=False)
        try:
            _, job = running.add_folder(path=str(docs))
            version, progress = 0, job.snapshot()
            while progress.state not in ("done", "failed", "cancelled"):
                version, progress = job.wait_next(after=version, timeout_s=60.0)
            assert progress.state == "done"
            yield running
        finally:
            running.close()
    finally:
        mp.undo()


def ask(engine: Engine, question: str, history: Sequence[Turn] = ()) -> dict[str, Any]:
    """The answer's events: "searched" (None for a question searched as asked),
    "citations" and "answer"."""
    out: dict[str, Any] = {"searched": None}
    for event in engine.ask_stream(question=question, history=history):
        if isinstance(event, SearchedEvent):
            out["searched"] = event
        elif isinstance(event, CitationsEvent):
            out["citations"] = event.citations
        elif isinstance(event, DoneEvent):
            out["answer"] = event.done.answer
    return out
