"""Source markers for a written answer that carries none: each sentence matched to the
passage it restates.

The prompt asks the model to cite its sources as [n], and small models rarely do
(SmolLM2-135M: almost never, docs/benchmarks-history.md). An answer without markers leaves the
person nothing to click beside a claim, and the next turn of the conversation loses
"the pages the last answer cited" (engine/rag/answer/conversation.py). So, once the answer
is written and before it is final, every prose sentence of at least `MIN_WORDS`
content words is embedded with the passages' sentences; a sentence gets the [n] of the
passage holding its most similar sentence when that similarity reaches `MIN_SIMILARITY`.
A sentence that matches nothing well stays unmarked. A marker points at the passage
closest to what the sentence says, where the person can check it; it does not prove
the passage says it (a small model's invented detail next to a true one is marked
too). An answer that already cites any passage is left exactly as written, and so
are code blocks, headings and table rows.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.rag.answer.content_words import content_words
from engine.rag.answer.marker_check import in_code
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale, passage_similarity
from engine.rag.answer.sentences import asks, split_sentences

# all-MiniLM-L6-v2 cosine (another embedder's is put on its scale first:
# engine/rag/answer/semantic_scale.py): a sentence restating a passage's sentence
# scores 0.7-0.9, one on the same topic saying something else about 0.4-0.6.
MIN_SIMILARITY = 0.6
MIN_WORDS = 4  # content words a sentence needs to be worth a marker
_CITED = re.compile(r"\[(\d+)(?:\s*[,-]\s*\d+)*\]")
_MARKER_NEXT = re.compile(r"[ \t]*\[\d")
_FENCE = re.compile(r"^\s*(```|~~~)")
# A sentence ends at terminal punctuation followed by a space or the line's end
# ("file.txt" and "v1.2" go on).
_END = re.compile(r"[.!?]+[\"'”’)\]]*(?=\s|$)|[。！？｡]+[」』”’）)\]]*")
# What the marker goes before: closing punctuation, or the colon of a line that
# introduces a list.
_TRAILING = re.compile(r"[.!?:;,。！？：；，]+[\"'”’)\]」』）]*\s*$")


@dataclass(frozen=True, kw_only=True)
class Attributed:
    text: str
    markers_added: int


def attribute_sources(
    *,
    answer: str,
    passages: Sequence[str],
    embed: Callable[[list[str]], np.ndarray],
    scale: SemanticScale = IDENTITY,
    across: Sequence[bool] = (),
    fill: bool = False,
) -> Attributed:
    """`answer` with [n] after each sentence that restates passage n (1-based, in the
    order given); unchanged when it cites a passage already or nothing matches. With
    `fill`, an answer that cites some passages gets markers on its sentences that
    carry none (engine/rag/answer/written_answer.py checks the ones it has). `scale`
    puts `embed`'s cosines on the scale MIN_SIMILARITY is set on; `across[n - 1]`:
    passage n is in another language than the answer (read on a translation's scale)."""
    cites = cites_any(answer, count=len(passages))
    if not passages or not answer.strip() or (cites and not fill):
        return Attributed(text=answer, markers_added=0)
    spans = _prose_sentences(answer)
    if cites:
        spans = [(a, b) for a, b in spans if not _carries_marker(answer, start=a, end=b)]
    if not spans:
        return Attributed(text=answer, markers_added=0)
    owners: list[int] = []
    texts: list[str] = []
    for n, passage in enumerate(passages, start=1):
        for sentence in split_sentences(passage, min_words=MIN_WORDS):
            owners.append(n)
            texts.append(sentence)
    if not texts:
        return Attributed(text=answer, markers_added=0)
    said = [answer[start:end] for start, end in spans]
    similarity = passage_similarity(
        said=said, sentences=texts, owners=owners, embed=embed, scale=scale, across=across
    )
    best = similarity.argmax(axis=1)
    out = answer
    added = 0
    # From the end, so that earlier spans keep their offsets.
    for (start, end), row, column in reversed(list(zip(spans, similarity, best, strict=True))):
        if float(row[column]) < MIN_SIMILARITY:
            continue
        at = _marker_at(out, start=start, end=end)
        out = f"{out[:at]} [{owners[int(column)]}]{out[at:]}"
        added += 1
    return Attributed(text=out, markers_added=added)


def cites_any(answer: str, *, count: int) -> bool:
    return any(
        1 <= int(m.group(1)) <= count
        for m in _CITED.finditer(answer)
        if not in_code(answer, at=m.start())
    )


def _carries_marker(answer: str, *, start: int, end: int) -> bool:
    """A marker inside the sentence, or right after its end ("… fails. [2]")."""
    inside = any(not in_code(answer, at=m.start()) for m in _CITED.finditer(answer, start, end))
    after = _MARKER_NEXT.match(answer, end)
    return inside or (after is not None and not in_code(answer, at=after.end() - 2))


def _prose_sentences(answer: str) -> list[tuple[int, int]]:
    """(start, end) of each sentence worth a marker, outside code blocks, headings and
    table rows."""
    spans: list[tuple[int, int]] = []
    offset = 0
    fenced = False
    for line in answer.splitlines(keepends=True):
        start_of_line = offset
        offset += len(line)
        if _FENCE.match(line):
            fenced = not fenced
            continue
        stripped = line.strip()
        if fenced or not stripped or stripped.startswith(("#", "|", "    ")):
            continue
        body = line.rstrip("\n")
        cuts = [m.end() for m in _END.finditer(body)]
        if not cuts or body[cuts[-1] :].strip():
            cuts.append(len(body.rstrip()))
        begin = 0
        for cut in cuts:
            text = body[begin:cut]
            if len(content_words(text)) >= MIN_WORDS and not asks(text):
                lead = len(text) - len(text.lstrip())
                spans.append((start_of_line + begin + lead, start_of_line + cut))
            begin = cut
    return spans


def _marker_at(text: str, *, start: int, end: int) -> int:
    """Where the marker goes: before the sentence's closing punctuation, else after its
    last word."""
    sentence = text[start:end]
    trailing = _TRAILING.search(sentence)
    if trailing is None:
        return start + len(sentence.rstrip())
    run = trailing.group()
    at = trailing.start()
    if at > 0 and sentence[at - 1].isspace() and len(run.rstrip()) > 1:
        # Punctuation after a space is a word of the sentence, not its end: bash's
        # "inverted with !." got "inverted with [3]!.". Only the last mark ends it.
        marks = [i for i, ch in enumerate(run) if ch in ".!?:;,。！？：；，"]
        if len(marks) > 1:
            return start + at + marks[-1]
    return start + at
