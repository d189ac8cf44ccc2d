"""`ragdoll ask --conversation ID`: a conversation kept under the data folder.

The CLI keeps its conversations where the window keeps its own (one JSON file each,
app/chat/conversations.py), so a conversation started on the command line shows in the
window and the command line can go on with one the window shows (by its id). A name
of the person's own ("work") becomes a stable id (uuid5 of the name); the first
question titles a new conversation, as in the window.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from pathlib import Path

from app.chat.conversations import (
    Conversation,
    ConversationStore,
    Exchange,
    default_folder,
    new_conversation,
    with_exchange,
)
from engine.wire import Answer

_HEX_ID = re.compile(r"^[0-9a-f]{32}$")
_NAMESPACE = uuid.UUID("0b5c3d1e-5a8f-4f6e-9c41-7d2b1a9e6f30")  # RAGDoll's CLI names


@dataclass(kw_only=True)
class CliConversation:
    """One conversation file, read once and written after each turn."""

    store: ConversationStore
    value: Conversation

    def append(self, *, question: str, answer: Answer, searched: str) -> None:
        exchange = Exchange(
            question=question,
            answer=answer.answer,
            citations=tuple(answer.citations),
            note=answer.note or "",
            searched=searched,
        )
        self.value = with_exchange(self.value, exchange=exchange)
        self.store.save(self.value)


def conversation_id(*, name: str) -> str:
    """A window conversation's id as it is; any other name as a stable id of its own."""
    name = name.strip()
    if not name:
        raise ValueError("--conversation needs a name or an id")
    if _HEX_ID.match(name):
        return name
    return uuid.uuid5(_NAMESPACE, name).hex


def open_conversation(*, name: str, folder: Path | None = None) -> CliConversation:
    """The conversation called `name` (a new, empty one if there is none yet);
    ValueError when its file is damaged."""
    store = ConversationStore(folder=folder or default_folder())
    cid = conversation_id(name=name)
    found = store.load(conversation_id=cid)
    if found is None:
        fresh = new_conversation()
        found = Conversation(
            id=cid, title=fresh.title, created=fresh.created, updated=fresh.updated
        )
    return CliConversation(store=store, value=found)
