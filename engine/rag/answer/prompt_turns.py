"""A conversation's earlier turns as the prompt shows them: each question with its
sources, then its answer, within a token budget.

Two things keep the prompt short and its start stable across turns, so that
engine/runtime/executor/prefix_cache.py serves the conversation's KV on the next turn:

- a source shown once is not repeated: a later turn that retrieves the same passage
  (follow-ups usually do) shows a one-line reference to it instead of its text, so
  only the new sources and the question are new tokens. The same rule renders the
  earlier turns and this turn, so a turn reads the same when it is the last one and
  when it is part of the history;
- when the turns do not fit, the oldest go a whole step at a time (half of what fits),
  so that the next few turns start at the same kept turn, and the dropped turns are
  replaced by a short extractive summary (each question with its answer's first
  sentence) of a size fixed by the prompt's budget alone: it does not change from one
  turn to the next while the same turns are dropped.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from engine.rag.answer.passages import Passage
from engine.rag.answer.sentences import split_sentences
from engine.rag.ingest.language import language_name, question_language
from engine.wire_events import Citation, Turn

# The words of a repeated source's start that name it in its reference.
_REFERENCE_WORDS = 8
_TURN_OVERHEAD = 12  # a turn's role markers in a chat template, roughly
# Room kept for the summary of dropped turns: a share of the prompt's budget.
SUMMARY_SHARE = 16
_SUMMARY_MAX_TOKENS = 256
_SUMMARY_QUESTION_CHARS = 160
_SUMMARY_ANSWER_CHARS = 200
_MARKER = re.compile(r"\s*\[\d+(?:\s*[,-]\s*\d+)*\]")

Count = Callable[[str], int]


@dataclass(kw_only=True)
class Shown:
    """The passages a prompt has already shown, by what they say and where."""

    keys: set[tuple[str, int | None, str]] = field(default_factory=set)

    def block(self, passage: Passage) -> str:
        """The passage's numbered block: its text the first time, else a reference."""
        text = " ".join(passage.text.split())
        key = (passage.path, passage.page, text)
        if key in self.keys:
            return reference_block(passage)
        self.keys.add(key)
        return source_block(passage)


def source_block(passage: Passage) -> str:
    return f"[{passage.index}] ({_where(passage)}) {' '.join(passage.text.split())}"


def reference_block(passage: Passage) -> str:
    words = " ".join(passage.text.split()).split(" ")
    opening = " ".join(words[:_REFERENCE_WORDS])
    more = " …" if len(words) > _REFERENCE_WORDS else ""
    where = _where(passage)
    return f'[{passage.index}] ({where}) the passage shown above that begins "{opening}{more}"'


def user_text(*, sources: Sequence[str], question: str, answer_in: str = "") -> str:
    sources_text = "\n\n".join(sources) if sources else "(no sources were found)"
    return f"Sources:\n{sources_text}\n\nQuestion: {question}{answer_in}"


def answer_in(*, question: str, passages: Sequence[str]) -> str:
    """The line naming the question's language after it, when it can be told
    (`question_language`, with the turn's passages as the evidence of what the asker
    reads): with the system prompt's "in the language of the question" alone, the real
    1.5B answered a quarter to a third of Dutch, Italian and German questions in
    English. A turn gets the same line whenever it is rendered, so an earlier turn reads
    as the model saw it (the prefix cache's stable start). A longer line that also
    repeated the rule on unknowns made it state fewer facts (docs/benchmarks.md)."""
    code = question_language(question, sources=passages)
    name = language_name(code) if code is not None else None
    return f"\nAnswer in {name}." if name else ""


def render_turns(turns: Sequence[Turn], *, shown: Shown) -> list[tuple[str, str]]:
    """Each turn as (user text, answer), sources already in `shown` as references
    (`shown` then holds every passage of these turns)."""
    out = []
    for turn in turns:
        blocks = [shown.block(_passage(c)) for c in turn.citations]
        question = " ".join(turn.question.split())
        line = answer_in(question=question, passages=[c.text for c in turn.citations])
        user = user_text(sources=blocks, question=question, answer_in=line)
        out.append((user, turn.answer.strip()))
    return out


@dataclass(frozen=True, kw_only=True)
class FittedTurns:
    turns: list[tuple[str, str]]  # (user text, answer), oldest first; the summary in front
    shown: Shown  # the passages these turns show: this turn's repeats become references
    dropped: int  # how many of the oldest turns were left out (summarised)


def fit_turns(
    *, history: Sequence[Turn], budget: int, max_prompt_tokens: int, count: Count
) -> FittedTurns:
    """Earlier turns within `budget` tokens (see the module's docstring). A newest turn
    too long even alone is kept without its sources, if that fits."""

    def cost(turns: Sequence[tuple[str, str]]) -> int:
        return sum(count(u) + count(a) + _TURN_OVERHEAD for u, a in turns)

    def from_start(start: int) -> tuple[list[tuple[str, str]], Shown]:
        shown = Shown()
        return render_turns(history[start:], shown=shown), shown

    turns, shown = from_start(0)
    if cost(turns) <= budget:
        return FittedTurns(turns=turns, shown=shown, dropped=0)
    room = budget - min(_SUMMARY_MAX_TOKENS, max_prompt_tokens // SUMMARY_SHARE)
    n = len(history)
    step = max(1, int(room // (cost(turns) / n)) // 2)
    starts = [*range(step, n, step)]
    starts += range((starts[-1] if starts else 0) + 1, n)
    for start in starts:
        turns, shown = from_start(start)
        if cost(turns) <= room:
            break
    else:
        last = history[-1]
        turns = [(f"Question: {' '.join(last.question.split())}", last.answer.strip())]
        shown, start = Shown(), n - 1
        if cost(turns) > room:
            return FittedTurns(turns=[], shown=Shown(), dropped=n)
    summary = summarise(
        history[:start],
        max_tokens=min(_SUMMARY_MAX_TOKENS, max_prompt_tokens // SUMMARY_SHARE),
        count=count,
    )
    if summary and turns:
        user, answer = turns[0]
        turns[0] = (f"{summary}\n\n{user}", answer)
    return FittedTurns(turns=turns, shown=shown, dropped=start)


def summarise(turns: Sequence[Turn], *, max_tokens: int, count: Count) -> str:
    """An extractive summary of dropped turns: each question with its answer's first
    sentence (source markers removed: those sources are no longer shown), the newest
    that fit within `max_tokens`, oldest first."""
    if not turns:
        return ""
    head = "(Earlier in this conversation, in short:"
    lines: list[str] = []
    used = count(head) + 2
    for turn in reversed(turns):
        question = _cut(" ".join(turn.question.split()), _SUMMARY_QUESTION_CHARS)
        answer = _first_sentence(turn.answer)
        line = f"- Asked: {question}" + (f" Answered: {answer}" if answer else "")
        c = count(line) + 1
        if used + c > max_tokens:
            break
        lines.insert(0, line)
        used += c
    if not lines:
        return ""
    return "\n".join([head, *lines]) + ")"


def _first_sentence(answer: str) -> str:
    text = _MARKER.sub("", " ".join(answer.split())).strip()
    if not text:
        return ""
    sentences = split_sentences(text, min_words=1)
    return _cut(sentences[0] if sentences else text, _SUMMARY_ANSWER_CHARS)


def _cut(text: str, chars: int) -> str:
    if len(text) <= chars:
        return text
    return text[:chars].rsplit(" ", 1)[0] + " …"


def _passage(citation: Citation) -> Passage:
    return Passage(index=citation.index, text=citation.text, path=citation.path, page=citation.page)


def _where(passage: Passage) -> str:
    where = Path(passage.path).name or passage.path
    if passage.page is not None:
        where = f"{where}, p. {passage.page}"
    return where
