"""A model's written answer made final: every marker checked against its passage
(engine/rag/answer/marker_check.py), then markers added to the sentences left without one
that restate a passage (engine/rag/answer/attribution.py); an answer that says nothing
but markers replaced by the sources' best sentences, and an answer none of whose
sentences a passage supports followed by them, each with a note saying so.

A small model often answers beside its passages: on the blind set the real 1.5B's words
held the fact for 0.19–0.46 of the answerable questions a part, where the extractive
quote of the same passages held it for 0.55–0.68 (docs/benchmarks.md). An answer left
with no marker is one the documents do not bear out, and the person is shown what they
do say, rather than the model's words alone."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.rag.answer.attribution import attribute_sources, cites_any
from engine.rag.answer.marker_check import CheckedMarkers, check_markers, strip_markers
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.ingest.language import text_language

BARE_NOTE = (
    "The model answered only {reply}; shown instead are the sentences of your documents "
    "closest to the question."
)
UNSUPPORTED_NOTE = (
    "Your documents do not bear out the model's answer; below it are the sentences of "
    "your documents closest to the question."
)
_REPLY_CHARS = 40


@dataclass(frozen=True, kw_only=True)
class FinalAnswer:
    text: str
    note: str | None  # said beside the answer when it is not the model's own
    markers: CheckedMarkers  # what the check did to the model's markers
    # "instead": the sources' sentences in place of the model's bare markers; "after":
    # following an answer no passage supports; "no": the model's answer alone.
    quoted: str = "no"


def finish_written(
    *,
    answer: str,
    passages: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    fallback: str | None,
    scale: SemanticScale = IDENTITY,
) -> FinalAnswer:
    """The answer the person sees for the model's `answer` to `passages`; `fallback`
    (the extractive answer) stands in for an answer that is only markers. `scale`:
    `embed`'s (engine/rag/answer/semantic_scale.py), read on a translation's scale
    against a passage in another language than the answer."""
    # Only a scale that knows a translation's cosine reads another language apart: the
    # bundled MiniLM's does not, and its answers need no language guessed.
    languages = [text_language(p) for p in passages] if scale.across() != scale else None
    across = _across(answer=answer, languages=languages)
    checked = check_markers(
        answer=answer, passages=passages, embed=embed, scale=scale, across=across
    )
    if checked.bare and fallback:
        reply = " ".join(answer.split())
        if len(reply) > _REPLY_CHARS:
            reply = reply[:_REPLY_CHARS] + "…"
        note = BARE_NOTE.format(reply=f"“{reply}”" if reply else "nothing")
        quoted = _marked(fallback, passages=passages, embed=embed, scale=scale, languages=languages)
        return FinalAnswer(text=quoted, note=note, markers=checked, quoted="instead")
    # Then every sentence left without a marker gets the passage it restates, if any.
    filled = attribute_sources(
        answer=checked.text, passages=passages, embed=embed, scale=scale, across=across, fill=True
    )
    if fallback and filled.text.strip() and not cites_any(filled.text, count=len(passages)):
        quoted = _marked(fallback, passages=passages, embed=embed, scale=scale, languages=languages)
        return FinalAnswer(
            text=f"{filled.text.rstrip()}\n\n{quoted}",
            note=UNSUPPORTED_NOTE,
            markers=checked,
            quoted="after",
        )
    return FinalAnswer(text=filled.text, note=None, markers=checked)


def _marked(
    fallback: str,
    *,
    passages: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    scale: SemanticScale,
    languages: Sequence[str | None] | None,
) -> str:
    """The extractive answer `fallback`, each sentence marked with the passage it restates."""
    return attribute_sources(
        answer=fallback,
        passages=passages,
        embed=embed,
        scale=scale,
        across=_across(answer=fallback, languages=languages),
    ).text


def _across(*, answer: str, languages: Sequence[str | None] | None) -> list[bool]:
    """Which passages (of `languages`, None where the guess is unsure; no list: none
    asked) are in another language than `answer`: a small model asked in one language
    often answers in another, or quotes its passages' own."""
    if languages is None:
        return []
    said = text_language(strip_markers(answer))
    return [said is not None and lang is not None and lang != said for lang in languages]
