"""`ragdoll ask --conversation ID`: turns kept under the data folder, in the window's
conversation files, and sent as the next question's history."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.chat.conversations import ConversationStore, history_of, new_conversation
from app.commands.cli_conversation import conversation_id, open_conversation
from engine.wire import Answer, Citation

CITE = Citation(
    index=1, chunk_id="c1", path="/d/bees.md", page=None, text="Honey in August.",
    score=0.8, char_start=0, char_end=16,
)  # fmt: skip


def test_turns_are_appended_and_come_back_as_history(tmp_path: Path) -> None:
    conv = open_conversation(name="bees", folder=tmp_path)
    assert history_of(conv.value) == []
    conv.append(
        question="When is honey extracted?",
        answer=Answer(answer="In August [1].", citations=[CITE], mode="extractive"),
        searched="",
    )
    again = open_conversation(name="bees", folder=tmp_path)  # the next `ragdoll ask`
    (turn,) = history_of(again.value)
    assert turn.question == "When is honey extracted?" and turn.citations == [CITE]
    assert again.value.title == "When is honey extracted?"  # titled as in the window
    # It is one of the window's conversations.
    (listed,) = ConversationStore(folder=tmp_path).load_all()
    assert listed.id == conversation_id(name="bees")


def test_a_window_conversation_goes_on_by_its_id(tmp_path: Path) -> None:
    store = ConversationStore(folder=tmp_path)
    shown = new_conversation()
    store.save(shown)
    assert open_conversation(name=shown.id, folder=tmp_path).value.id == shown.id
    assert conversation_id(name="work") == conversation_id(name=" work ")
    assert conversation_id(name="work") != conversation_id(name="home")
    with pytest.raises(ValueError):
        conversation_id(name="  ")


def test_a_failed_answer_is_not_history(tmp_path: Path) -> None:
    conv = open_conversation(name="x", folder=tmp_path)
    conv.append(question="q?", answer=Answer(answer="", citations=[], mode="none"), searched="")
    assert history_of(conv.value) == []
