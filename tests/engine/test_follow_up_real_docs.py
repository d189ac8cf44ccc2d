"""A follow-up in extractive mode, on real text nobody here wrote (git-rebase's manual
from the real-docs corpus, bench/real_docs.py), through the engine's own
answering path: alone the follow-up means little; with the conversation it is
searched with the earlier question weighed in and says so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bench.real_docs import find_real_docs
from engine.service.core import Engine
from engine.wire import Turn
from tests.support.folder_engine import ask, folder_engine


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    corpus = find_real_docs()
    if corpus is None:
        pytest.skip(
            "the real documents are not fetched: python -m bench.real_docs "
            "(or set RAGDOLL_REAL_DOCS)"
        )
    root = tmp_path_factory.mktemp("real")
    with folder_engine(root=root, files=[corpus / "git-rebase.html"]) as running:
        yield running


def test_the_second_option_is_found_after_the_question_about_the_options(
    engine: Engine,
) -> None:
    first = ask(engine, "What choices does git rebase --empty accept?", [])
    assert first["searched"] is None  # a question alone is searched as asked
    assert first["answer"] and any("--empty" in c.text for c in first["citations"])
    turn = Turn(
        question="What choices does git rebase --empty accept?",
        answer=first["answer"],
        citations=first["citations"],
    )
    follow = ask(engine, "And what does the second one do?", [turn])
    searched = follow["searched"]
    assert searched is not None and searched.rewritten_by == "history"
    assert searched.context == turn.question
    # Among the five passages the answer is given (it was third while the full-text
    # index still matched "one" of "the apply one does", which every language's
    # common words now leave out).
    assert any("--empty" in c.text and "keep" in c.text for c in follow["citations"][:5])
    assert follow["answer"]  # extractive mode follows the conversation
