"""The conversation store: JSON files, atomic saves, damaged files set aside."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.chat.conversations import (
    ConversationStore,
    Exchange,
    new_conversation,
    title_from_question,
    with_exchange,
    with_last_exchange,
    without_last_exchange,
)
from tests.app.fake_client import CITATIONS


def test_a_conversation_round_trips_with_its_citations(tmp_path: Path) -> None:
    store = ConversationStore(folder=tmp_path / "conversations")
    conv = with_exchange(
        new_conversation(),
        exchange=Exchange(
            question="What do tomatoes need?", answer="Sun [1].", citations=tuple(CITATIONS)
        ),
    )
    conv = with_exchange(conv, exchange=Exchange(question="And?", stopped=True, error="cut"))
    store.save(conv)
    (loaded,) = store.load_all()
    assert loaded == conv
    assert loaded.title == "What do tomatoes need?"  # named by its first question
    assert [p.name for p in store.folder.iterdir()] == [f"{conv.id}.json"]  # no temp files


def test_a_damaged_file_is_set_aside_and_the_others_still_load(tmp_path: Path) -> None:
    store = ConversationStore(folder=tmp_path)
    good = with_exchange(new_conversation(), exchange=Exchange(question="kept"))
    store.save(good)
    bad = tmp_path / ("0" * 32 + ".json")
    bad.write_text('{"id": "0000', encoding="utf-8")  # cut short mid-write
    wrong = tmp_path / ("1" * 32 + ".json")
    wrong.write_text(json.dumps({"id": "1" * 32, "exchanges": [{"answer": "no question"}]}))

    assert [c.id for c in store.load_all()] == [good.id]
    names = sorted(p.name for p in tmp_path.iterdir())
    assert f"{good.id}.json" in names
    assert sum(n.endswith(".damaged") for n in names) == 2
    assert not bad.exists() and not wrong.exists()
    # What was set aside keeps its bytes for the person to look at.
    aside = next(p for p in tmp_path.iterdir() if p.name.startswith("0" * 32))
    assert aside.read_text(encoding="utf-8") == '{"id": "0000'


def test_save_replaces_the_file_and_delete_removes_it(tmp_path: Path) -> None:
    store = ConversationStore(folder=tmp_path)
    conv = with_exchange(new_conversation(), exchange=Exchange(question="q"))
    store.save(conv)
    conv = with_last_exchange(conv, exchange=Exchange(question="q", answer="a"))
    store.save(conv)
    (loaded,) = store.load_all()
    assert loaded.exchanges[-1].answer == "a"
    assert without_last_exchange(loaded).exchanges == ()
    store.delete(conversation_id=conv.id)
    assert store.load_all() == []


def test_ids_that_could_escape_the_folder_are_refused(tmp_path: Path) -> None:
    store = ConversationStore(folder=tmp_path)
    with pytest.raises(ValueError):
        store.path_of(conversation_id="../../etc/passwd")


def test_search_needs_every_word_in_the_title_or_the_messages() -> None:
    conv = with_exchange(
        new_conversation(),
        exchange=Exchange(question="Where is the budget?", answer="In the Garden plan."),
    )
    assert conv.matches(query="garden BUDGET")
    assert conv.matches(query="  ")
    assert not conv.matches(query="garden invoice")


def test_titles_come_from_the_first_question_cut_at_a_word() -> None:
    assert title_from_question(question="  short\nquestion ") == "short question"
    long = title_from_question(question="word " * 40)
    assert len(long) <= 60 and long.endswith("…")
