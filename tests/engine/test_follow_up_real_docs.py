"""A follow-up in extractive mode, on real text nobody here wrote (git-rebase's manual
from the real-docs corpus, bench/real_docs.py), through the engine's own
answering path: alone the follow-up means little; with the conversation it is
searched with the earlier question weighed in and says so."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from bench.real_docs import find_real_docs
from engine.paths import resolve_paths
from engine.service.core import Engine
from engine.wire import CitationsEvent, DoneEvent, SearchedEvent, Turn


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Any:
    corpus = find_real_docs()
    if corpus is None:
        pytest.skip(
            "the real documents are not fetched: python -m bench.real_docs "
            "(or set RAGDOLL_REAL_DOCS)"
        )
    root = tmp_path_factory.mktemp("real")
    docs = root / "docs"
    docs.mkdir()
    shutil.copy2(corpus / "git-rebase.html", docs / "git-rebase.html")
    mp = pytest.MonkeyPatch()
    mp.setenv("RAGDOLL_HOME", str(root / "home"))
    mp.setenv("RAGDOLL_AUTO_PROFILE", "0")
    running = Engine(paths=resolve_paths().ensure(), warm_up=False, watch=False)
    _, job = running.add_folder(path=str(docs))
    version, progress = 0, job.snapshot()
    while progress.state not in ("done", "failed", "cancelled"):
        version, progress = job.wait_next(after=version, timeout_s=30.0)
    assert progress.state == "done"
    yield running
    running.close()
    mp.undo()


def _ask(engine: Engine, question: str, history: list[Turn]) -> dict[str, Any]:
    out: dict[str, Any] = {"searched": None}
    for event in engine.ask_stream(question=question, history=history):
        if isinstance(event, SearchedEvent):
            out["searched"] = event
        elif isinstance(event, CitationsEvent):
            out["citations"] = event.citations
        elif isinstance(event, DoneEvent):
            out["answer"] = event.done.answer
    return out


def test_the_second_option_is_found_after_the_question_about_the_options(
    engine: Engine,
) -> None:
    first = _ask(engine, "What choices does git rebase --empty accept?", [])
    assert first["searched"] is None  # a question alone is searched as asked
    assert first["answer"] and any("--empty" in c.text for c in first["citations"])
    turn = Turn(
        question="What choices does git rebase --empty accept?",
        answer=first["answer"],
        citations=first["citations"],
    )
    follow = _ask(engine, "And what does the second one do?", [turn])
    searched = follow["searched"]
    assert searched is not None and searched.rewritten_by == "history"
    assert searched.context == turn.question
    # Among the five passages the answer is given (it was third while the full-text
    # index still matched "one" of "the apply one does", which every language's
    # common words now leave out).
    assert any("--empty" in c.text and "keep" in c.text for c in follow["citations"][:5])
    assert follow["answer"]  # extractive mode follows the conversation
