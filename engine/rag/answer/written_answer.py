"""A model's written answer made final, as it is written: every marker checked against
its passage (engine/rag/answer/marker_check.py), then markers added to the sentences left
without one that restate a passage (engine/rag/answer/attribution.py); an answer that
says nothing but markers replaced by the sources' best sentences, and an answer none of
whose sentences a passage supports followed by them, each with a note saying so.

The answer is checked a sentence at a time, as the model finishes each one (`Checking`),
so a stream shows only checked text: an OpenAI client that reads the stream gets what
the window shows once the answer is done, and the two never differ. A marker's claim,
its earlier sentences and a sentence's "[n]" after its full stop are all read within
the sentence that holds them, so a sentence's check needs nothing written after it.

A small model sometimes writes the question back and nothing else (the real 1.5B, 3
of 180 recorded answers: "Po inštalácii som zistil, že mám zlé rozloženie klávesnice.
Ako ho prestavím? [3]"): an answer no word of which the question lacks says nothing, and
is followed by the sources' sentences as an unsupported one is (`ECHO_NOTE`).

A small model often answers beside its passages: on the blind set the real 1.5B's words
held the fact for 0.19–0.46 of the answerable questions a part, where the extractive
quote of the same passages held it for 0.55–0.68 (docs/benchmarks.md). An answer left
with no marker is one the documents do not bear out, and the person is shown what they
do say, rather than the model's words alone."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.rag.answer.attribution import attribute_sources, cites_any
from engine.rag.answer.marker_check import (
    MARKER_RUN,
    MIN_ANSWER_WORDS,
    CheckedMarkers,
    check_markers,
    strip_markers,
    words,
)
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.answer.sentence_memo import SentenceMemo
from engine.rag.ingest.language import text_language

BARE_NOTE = (
    "The model answered only {reply}; shown instead are the sentences of your documents "
    "closest to the question."
)
UNSUPPORTED_NOTE = (
    "Your documents do not bear out the model's answer; below it are the sentences of "
    "your documents closest to the question."
)
ECHO_NOTE = (
    "The model only repeated the question; below it are the sentences of your documents "
    "closest to the question."
)
_REPLY_CHARS = 40
# Where a finished sentence gives way to the next: after its full stop and any marker
# run that follows it ("… fails. [2]" is that sentence's), or a line's end, at the next
# sentence's first character. Chinese and Japanese end a sentence at a full-width stop
# with no space after it; others need one.
_NEXT_SENTENCE = re.compile(
    rf"[.!?…]+[\"'”’)»]*(?:[ \t]*{MARKER_RUN})*[ \t]+(?=[^\s\[\]])"
    rf"|[。！？｡]+[」』”’）)]*(?:[ \t]*{MARKER_RUN})*[ \t]*(?=[^\s\[\]。！？｡」』”’）)])"
    r"|\n\s*(?=[^\s\[\]])"
)
_MARKER_RUN = re.compile(MARKER_RUN)
_LIST_NUMBER = re.compile(r"(?:^|\n)[ \t]*\d{1,3}[.)]\s*$")  # "2. " is an item's start
_FENCE = re.compile(r"^[ \t]*(```|~~~)", re.MULTILINE)
_LINE = re.compile(r"[^\n]*\n")
# A sentence's end inside the text not yet checked, as attribution reads one (a stop
# before a space; a full-width stop): the next sentence may be checked with it.
_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]»]*\s|[。！？｡]")


@dataclass(frozen=True, kw_only=True)
class FinalAnswer:
    text: str
    note: str | None  # said beside the answer when it is not the model's own
    markers: CheckedMarkers  # what the check did to the model's markers
    # "instead": the sources' sentences in place of the model's bare markers; "after":
    # following an answer no passage supports; "no": the model's answer alone.
    quoted: str = "no"
    # Where in `text` the sources' own sentences begin (None: nowhere), so that a
    # reader shows them as written, not as the model's Markdown.
    quoted_from: int | None = None


class Checking:
    """A written answer checked as it is written: `feed` each piece the model writes
    and show what it returns, then show what `finish` returns with the final answer;
    the pieces shown join to the final text.

    A sentence is checked once the next one begins; until then its words are shown up
    to the last one before a marker or the sentence's end (where a marker may be put or
    taken away), so the text streams a word at a time. Lines inside a code block are
    shown as written, a line at a time: a marker's check reads prose."""

    def __init__(
        self,
        *,
        passages: Sequence[str],
        embed: Callable[[list[str]], np.ndarray],
        fallback: str | None,
        scale: SemanticScale = IDENTITY,
        question: str = "",
    ) -> None:
        """`fallback` (the extractive answer) stands in for an answer that is only
        markers; `scale`: `embed`'s (engine/rag/answer/semantic_scale.py), read on a
        translation's scale against a passage in another language than the answer;
        `question`: as asked (an answer that only repeats it is followed by `fallback`)."""
        self._passages = list(passages)
        self._question = question
        memo = SentenceMemo(size=4096)  # the passages' sentences, embedded once an answer
        self._embed: Callable[[list[str]], np.ndarray] = lambda texts: memo.rows(
            texts=texts, embed=embed
        )
        self._fallback = fallback
        self._scale = scale
        # Only a scale that knows a translation's cosine reads another language apart:
        # the bundled MiniLM's does not, and its answers need no language guessed.
        self._languages = [text_language(p) for p in passages] if scale.reads_across() else None
        self._written = ""  # as the model wrote it
        self._checked_to = 0  # of _written
        self._shown: list[str] = []  # each sentence (or code line) as shown
        self._early = ""  # the words shown of the sentence not yet checked
        self._kept = self._moved = self._dropped = 0

    def feed(self, piece: str) -> str:
        """The answer with `piece` written; returns the text to show now (may be "")."""
        self._written += piece
        # Nothing is shown before the answer says enough not to be bare: a bare one is
        # replaced whole.
        if len(words(strip_markers(self._written))) < MIN_ANSWER_WORDS:
            return ""
        # A sentence at a time, however many the piece finished: the same answer is
        # checked the same, whether it comes a token at a time or whole.
        ends = _finished(self._written, after=self._checked_to)
        return "".join(self._check_to(end) for end in ends) + self._words_so_far()

    def finish(self) -> tuple[str, FinalAnswer]:
        """(the text left to show, the final answer) once the model is done."""
        bare = len(words(strip_markers(self._written))) < MIN_ANSWER_WORDS
        if bare and self._fallback:
            reply = " ".join(self._written.split())
            if len(reply) > _REPLY_CHARS:
                reply = reply[:_REPLY_CHARS] + "…"
            note = BARE_NOTE.format(reply=f"“{reply}”" if reply else "nothing")
            text = self._marked(self._fallback)
            self._dropped = len(_MARKER_RUN.findall(self._written))  # all of them gone
            markers = self._markers(bare=True)
            return text, FinalAnswer(
                text=text, note=note, markers=markers, quoted="instead", quoted_from=0
            )
        tail = self._check_to(len(self._written), last=True)
        shown = "".join(self._shown)
        echo = repeats(question=self._question, answer=shown)
        unsupported = not cites_any(shown, count=len(self._passages))
        if self._fallback and shown.strip() and (echo or unsupported):
            after = f"\n\n{self._marked(self._fallback)}"
            return tail + after, FinalAnswer(
                text=shown + after,
                note=ECHO_NOTE if echo else UNSUPPORTED_NOTE,
                markers=self._markers(bare=bare),
                quoted="after",
                quoted_from=len(shown) + 2,
            )
        return tail, FinalAnswer(text=shown, note=None, markers=self._markers(bare=bare))

    def _check_to(self, end: int, *, last: bool = False) -> str:
        """The text to show for the model's sentence (or code line) from where the check
        stopped to `end`, checked (with no space after it when it is the `last`)."""
        raw = self._written[self._checked_to : end]
        before = self._written[: self._checked_to]
        self._checked_to = end
        started = any(self._shown)
        lead = raw[: len(raw) - len(raw.lstrip())] if started else ""
        trail = "" if last else raw[len(raw.rstrip()) :]
        core = raw.strip()
        if _inside_code(before):  # a code line, as written: its indent, a blank line
            text = raw if started else raw.lstrip()
            text = text.rstrip() if last else text
        elif not core:
            text = ""
        else:
            text = lead + self._checked(core, before=before, end=end) + trail
        # What was shown of it early is its start (the check changes nothing before a
        # marker or the last word); what is shown is the final text, whatever it holds.
        early, self._early = self._early, ""
        rest = text[len(early) :] if text.startswith(early) else text
        self._shown.append(early + rest)
        return rest

    def _checked(self, core: str, *, before: str, end: int) -> str:
        """One sentence's markers checked, and a marker added where it has none."""
        across = self._across(self._written[:end])
        runs = [m.end() for m in _MARKER_RUN.finditer(before)]
        checked = check_markers(
            answer=core,
            passages=self._passages,
            embed=self._embed,
            scale=self._scale,
            across=across,
            before=before[runs[-1] if runs else 0 :],
        )
        self._kept += checked.kept
        self._moved += checked.moved
        self._dropped += checked.dropped
        return attribute_sources(
            answer=checked.text,
            passages=self._passages,
            embed=self._embed,
            scale=self._scale,
            across=across,
            fill=True,
        ).text

    def _words_so_far(self) -> str:
        """The words of the sentence being written that no check can change, not yet
        shown: up to its last word, or to the space before its first marker, while it
        has not ended (a sentence's end or a line break stops them: what follows may be
        read with it)."""
        raw = self._written[self._checked_to :]
        body = raw.lstrip()
        if not body or _inside_code(self._written[: self._checked_to]):
            return ""
        if "\n" in body or _SENTENCE_END.search(body) or _FENCE.search(body):
            return ""
        lead = raw[: len(raw) - len(body)] if any(self._shown) else ""
        cut = body.find("[")
        head = body[:cut] if cut >= 0 else body[: max(body.rfind(" "), body.rfind("\t"), 0)]
        early = lead + head.rstrip()
        if not head.strip() or not early.startswith(self._early):
            return ""
        new, self._early = early[len(self._early) :], early
        return new

    def _marked(self, fallback: str) -> str:
        """The extractive answer `fallback`, each sentence marked with the passage it
        restates."""
        return attribute_sources(
            answer=fallback,
            passages=self._passages,
            embed=self._embed,
            scale=self._scale,
            across=self._across(fallback),
        ).text

    def _across(self, answer: str) -> list[bool]:
        """Which passages are in another language than `answer` (none where a guess is
        unsure, or no language is asked): a small model asked in one language often
        answers in another, or quotes its passages' own."""
        if self._languages is None:
            return []
        said = text_language(strip_markers(answer))
        return [said is not None and lang is not None and lang != said for lang in self._languages]

    def _markers(self, *, bare: bool) -> CheckedMarkers:
        return CheckedMarkers(
            text="".join(self._shown),
            kept=self._kept,
            moved=self._moved,
            dropped=self._dropped,
            bare=bare,
        )


def finish_written(
    *,
    answer: str,
    passages: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    fallback: str | None,
    scale: SemanticScale = IDENTITY,
    question: str = "",
) -> FinalAnswer:
    """The answer the person sees for the model's whole `answer` to `passages`, as
    `Checking` makes it when fed the answer as it is written."""
    checking = Checking(
        passages=passages, embed=embed, fallback=fallback, scale=scale, question=question
    )
    checking.feed(answer)
    return checking.finish()[1]


def repeats(*, question: str, answer: str) -> bool:
    """Whether `answer`, markers aside, holds no word that `question` lacks (a script
    written without spaces read in `words`' pieces): the question written back."""
    said = {w.casefold() for w in words(strip_markers(answer))}
    return bool(question.strip()) and bool(said) and said <= {w.casefold() for w in words(question)}


def _finished(text: str, *, after: int) -> list[int]:
    """Where each finished sentence of `text` beyond `after` ends (the next one's first
    character), not after a list item's number; in a code block, where each line ends
    (its fences' lines too)."""
    ends = set()
    for match in _NEXT_SENTENCE.finditer(text, after):
        end = match.end()
        if end > after and not _LIST_NUMBER.search(text, 0, end) and not _inside_code(text[:end]):
            ends.add(end)
    for match in _LINE.finditer(text, after):
        if _inside_code(text[: match.end()]) or _FENCE.match(match.group()):
            ends.add(match.end())
    return sorted(ends)


def _inside_code(text: str) -> bool:
    """Whether `text` ends inside a fenced code block."""
    return len(_FENCE.findall(text)) % 2 == 1
