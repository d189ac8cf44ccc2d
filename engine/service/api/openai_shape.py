"""What the OpenAI-compatible routes do to an answer on its way to a client: the
conversation read from `messages`, `stop` sequences and `max_tokens` applied (as the
text streams, too), and the sources written into the text as a numbered list.

Pure functions and one small streaming filter; openai_routes.py wires them in.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from engine.wire import Citation, Turn

SOURCES_HEADING = "Sources:"
# The list this module appends, as a client sends it back in an assistant message.
_SOURCES_TAIL = re.compile(r"\n\nSources:\n(?:\[\d+\] [^\n]*(?:\n|$))+\s*$")
_MARKER = re.compile(r"\[(\d+)\]")

Role = str
FinishReason = Literal["stop", "length"]


@dataclass(frozen=True, kw_only=True)
class ChatText:
    """One message's role and text (content parts joined)."""

    role: Role
    text: str


def question_and_history(messages: Sequence[ChatText]) -> tuple[str, list[Turn]]:
    """The last user message is the question; the user / assistant pairs before it are
    the conversation's earlier turns (a user message with no answer after it still
    counts, with an empty answer). System, developer and tool messages are not turns."""
    last = max((i for i, m in enumerate(messages) if m.role == "user"), default=-1)
    if last < 0:
        return "", []
    turns: list[Turn] = []
    pending: str | None = None
    for message in messages[:last]:
        if message.role == "user":
            if pending is not None:
                turns.append(Turn(question=pending, answer=""))
            pending = message.text.strip()
        elif message.role == "assistant" and pending is not None:
            turns.append(Turn(question=pending, answer=without_sources(message.text)))
            pending = None
    if pending is not None:
        turns.append(Turn(question=pending, answer=""))
    return messages[last].text.strip(), [t for t in turns if t.question]


def without_sources(text: str) -> str:
    """An answer as the engine wrote it: the sources list this API appended, removed."""
    return _SOURCES_TAIL.sub("", text).strip()


def sources_text(*, answer: str, citations: Sequence[Citation]) -> str:
    """The sources as a numbered list to append to the answer ("" when none): those
    the answer cites by [n], or all of them when it cites none by number."""
    if not citations:
        return ""
    cited = {int(n) for n in _MARKER.findall(answer)}
    shown = [c for c in citations if c.index in cited] or list(citations)
    lines = []
    for c in shown:
        where = os.path.basename(c.path) or c.path
        if c.page is not None:
            where += f", p. {c.page}"
        lines.append(f"[{c.index}] {where}")
    return f"\n\n{SOURCES_HEADING}\n" + "\n".join(lines)


def cut_to_tokens(*, text: str, max_tokens: int, tokenizer: Any) -> tuple[str, bool]:
    """`text` cut after its first `max_tokens` tokens; (text, whether it was cut)."""
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    offsets = encoded["offset_mapping"]
    if len(offsets) <= max_tokens:
        return text, False
    end = offsets[max_tokens - 1][1] if max_tokens > 0 else 0
    return text[:end], True


def first_stop(*, text: str, stops: Sequence[str]) -> int:
    """Where the first of `stops` begins in `text`; -1 when none occurs."""
    found = [i for i in (text.find(s) for s in stops if s) if i >= 0]
    return min(found) if found else -1


class StopFilter:
    """Streams text through `stop` sequences: nothing from the first stop sequence on
    is released, and text that could be the start of one is held back until the next
    piece shows it is not."""

    def __init__(self, *, stops: Sequence[str]) -> None:
        self._stops = [s for s in stops if s]
        self._held = ""
        self.stopped = False

    def feed(self, text: str) -> str:
        if self.stopped or not text:
            return ""
        if not self._stops:
            return text
        self._held += text
        at = first_stop(text=self._held, stops=self._stops)
        if at >= 0:
            self.stopped = True
            out, self._held = self._held[:at], ""
            return out
        keep = self._partial_suffix(self._held)
        out = self._held[: len(self._held) - keep]
        self._held = self._held[len(self._held) - keep :]
        return out

    def flush(self) -> str:
        out, self._held = ("" if self.stopped else self._held), ""
        return out

    def _partial_suffix(self, text: str) -> int:
        """The length of the longest end of `text` that begins a stop sequence."""
        best = 0
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), 0, -1):
                if text.endswith(stop[:n]):
                    best = max(best, n)
                    break
        return best


def counted(tokenizer: Any) -> Callable[[str], int]:
    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"]) if text else 0

    return count
