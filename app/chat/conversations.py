"""Conversations on disk: one JSON file per conversation in the app's data folder.

Pure Python (no Qt) so the store is tested without a window and can run in a
worker thread. A file is written to a temporary name and renamed over the old
one, so a crash mid-write leaves the previous version; a file that does not
parse is renamed aside (`*.damaged`) rather than deleted or overwritten, and the
other conversations still load.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
import uuid
from collections.abc import Collection
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from engine.paths import resolve_paths
from engine.wire import Citation, Turn

log = logging.getLogger(__name__)

FORMAT_VERSION = 1
_TITLE_CHARS = 60
_ID = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True, kw_only=True)
class Exchange:
    """One question and the answer it got (possibly cut short or failed)."""

    question: str
    answer: str = ""
    citations: tuple[Citation, ...] = ()
    note: str = ""
    stopped: bool = False
    error: str = ""
    # Quoted from the documents (no language model): shown literally, never as Markdown.
    quoted: bool = False
    # Where the documents' own sentences begin in a model's answer (after it, or in place
    # of bare markers): from there on it is shown literally too. None: nowhere.
    quoted_from: int | None = None
    searched: str = ""  # the query a follow-up was searched as ("" when as asked)


@dataclass(frozen=True, kw_only=True)
class Conversation:
    id: str
    title: str
    created: float
    updated: float
    exchanges: tuple[Exchange, ...] = field(default=())

    def matches(self, *, query: str) -> bool:
        """Case-insensitive: every word of `query` in the title or a message."""
        words = query.casefold().split()
        if not words:
            return True
        haystack = self.search_text()
        return all(w in haystack for w in words)

    def search_text(self) -> str:
        """What a search looks in: the title, the questions, the answers, and the
        cited sources (their passages and file names)."""
        parts = [self.title]
        for e in self.exchanges:
            parts.extend((e.question, e.answer))
            for c in e.citations:
                parts.extend((c.text, c.path))
        return "\n".join(parts).casefold()


def default_folder() -> Path:
    return resolve_paths().data / "conversations"


def new_conversation(*, title: str = "New chat", now: float | None = None) -> Conversation:
    stamp = time.time() if now is None else now
    return Conversation(id=uuid.uuid4().hex, title=title, created=stamp, updated=stamp)


def title_from_question(*, question: str) -> str:
    flat = " ".join(question.split())
    if len(flat) <= _TITLE_CHARS:
        return flat or "New chat"
    return flat[: _TITLE_CHARS - 1].rstrip() + "…"


def unique_title(*, title: str, taken: Collection[str]) -> str:
    """`title`, or "title (2)", "(3)"…: two conversations that begin with the same
    question are told apart in the list."""
    if title not in taken:
        return title
    n = 2
    while f"{title} ({n})" in taken:
        n += 1
    return f"{title} ({n})"


def with_exchange(
    conversation: Conversation, *, exchange: Exchange, taken: Collection[str] = ()
) -> Conversation:
    """Append an exchange; the first question names an untitled conversation (not
    with one of the `taken` titles, the other conversations')."""
    title = conversation.title
    if not conversation.exchanges and title == "New chat":
        title = unique_title(title=title_from_question(question=exchange.question), taken=taken)
    return replace(
        conversation,
        title=title,
        updated=time.time(),
        exchanges=(*conversation.exchanges, exchange),
    )


def with_last_exchange(conversation: Conversation, *, exchange: Exchange) -> Conversation:
    """Replace the last exchange (the answer streaming into it has grown or ended)."""
    if not conversation.exchanges:
        return with_exchange(conversation, exchange=exchange)
    return replace(
        conversation,
        updated=time.time(),
        exchanges=(*conversation.exchanges[:-1], exchange),
    )


def without_last_exchange(conversation: Conversation) -> Conversation:
    return replace(conversation, exchanges=conversation.exchanges[:-1])


def history_of(conversation: Conversation) -> list[Turn]:
    """The turns a new question of this conversation is asked after: the exchanges
    that got an answer (a failed or empty one tells the engine nothing)."""
    return [
        Turn(question=e.question, answer=e.answer, citations=list(e.citations))
        for e in conversation.exchanges
        if e.answer.strip() and not e.error
    ]


# -- (de)serialising ----------------------------------------------------------------


def to_json(conversation: Conversation) -> dict[str, Any]:
    return {"version": FORMAT_VERSION, **asdict(conversation)}


def from_json(data: Any) -> Conversation:
    """A conversation from its JSON; ValueError when it is not one."""
    if not isinstance(data, dict):
        raise ValueError("not a JSON object")
    try:
        cid = str(data["id"])
        if not _ID.match(cid):
            raise ValueError(f"bad conversation id {cid!r}")
        exchanges = tuple(_exchange(e) for e in data.get("exchanges", ()))
        return Conversation(
            id=cid,
            title=str(data.get("title") or "Untitled"),
            created=float(data.get("created", 0.0)),
            updated=float(data.get("updated", 0.0)),
            exchanges=exchanges,
        )
    except (KeyError, TypeError) as e:
        raise ValueError(f"missing or wrong field: {e}") from e


def _offset(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _exchange(data: Any) -> Exchange:
    if not isinstance(data, dict):
        raise TypeError("an exchange is not an object")
    return Exchange(
        question=str(data["question"]),
        answer=str(data.get("answer", "")),
        citations=tuple(Citation(**c) for c in data.get("citations", ())),
        note=str(data.get("note", "")),
        stopped=bool(data.get("stopped", False)),
        error=str(data.get("error", "")),
        quoted=bool(data.get("quoted", False)),
        quoted_from=_offset(data.get("quoted_from")),
        searched=str(data.get("searched", "")),
    )


# -- the store ----------------------------------------------------------------------


class ConversationStore:
    """The folder of conversation files. Methods block on disk: call `load_all`
    from a worker; single saves are a few KB and fast enough for the GUI thread."""

    def __init__(self, *, folder: Path) -> None:
        self.folder = folder

    def path_of(self, *, conversation_id: str) -> Path:
        if not _ID.match(conversation_id):
            raise ValueError(f"bad conversation id {conversation_id!r}")
        return self.folder / f"{conversation_id}.json"

    def load(self, *, conversation_id: str) -> Conversation | None:
        """One conversation; None when there is no such file (ValueError: damaged)."""
        try:
            text = self.path_of(conversation_id=conversation_id).read_text(encoding="utf-8")
        except FileNotFoundError:
            return None
        return from_json(json.loads(text))

    def load_all(self) -> list[Conversation]:
        """Every readable conversation, newest first; damaged files set aside."""
        if not self.folder.is_dir():
            return []
        out: list[Conversation] = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                out.append(from_json(json.loads(path.read_text(encoding="utf-8"))))
            except (OSError, UnicodeDecodeError, ValueError) as e:
                self._set_aside(path=path, reason=e)
        out.sort(key=lambda c: c.updated, reverse=True)
        return out

    def save(self, conversation: Conversation) -> None:
        self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        path = self.path_of(conversation_id=conversation.id)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        text = json.dumps(to_json(conversation), ensure_ascii=False, indent=1)
        try:
            # 0600: a conversation quotes the documents; it is this user's alone.
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    def delete(self, *, conversation_id: str) -> None:
        self.path_of(conversation_id=conversation_id).unlink(missing_ok=True)

    def _set_aside(self, *, path: Path, reason: BaseException) -> None:
        aside = path.with_name(f"{path.name}.{int(time.time())}.damaged")
        log.warning("conversation file %s is damaged (%s); kept as %s", path, reason, aside)
        try:
            os.replace(path, aside)
        except OSError:
            log.exception("could not set %s aside", path)
