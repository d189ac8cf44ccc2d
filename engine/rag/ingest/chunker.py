"""Pages into overlapping, token-bounded passages with exact character spans.

The window is counted in the embedder's own word pieces, so a chunk never gets
truncated by the embedder (all-MiniLM-L6-v2 reads at most 256). Each page is
tokenized once, in one batch per document; the offsets the fast tokenizer
returns are the only link between tokens and characters, which is what keeps
`page.text[chunk.char_start:chunk.char_end] == chunk.text` exact.

Tokenizers disagree on whether a token's offsets cover the whitespace before its word
(SentencePiece's metaspace without a whitespace split: "▁word" spans " word") or not
(BERT's word pieces, XLM-R from the hub). Boundaries are therefore read from the text:
whitespace at the end of one token's span or the start of the next one's counts as the
gap between them, and a chunk's span leaves out whitespace at its ends.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.rag.ingest.parsers import PageText, ParsedDocument

_SENTENCE_ENDS = frozenset(".!?…")
_CLOSERS = frozenset("\"')]}”’»")
# Characters that open a new structural line in Markdown and plain text lists.
_LINE_OPENERS = frozenset("#-*•>|")

# Boundary strengths: where a chunk may end (the boundary before token k).
_NONE, _WORD, _SENTENCE, _PARAGRAPH = 0, 1, 2, 3


@dataclass(frozen=True, kw_only=True)
class Chunk:
    text: str
    page: int | None  # PageText.number of the page it comes from
    char_start: int  # span in that page's cleaned text: text == page.text[char_start:char_end]
    char_end: int
    ordinal: int  # 0.. within the document
    # Title of the section the chunk's middle lies in ("5.13 Other debian/*
    # files"), from the PDF outline or the document's headings; "" when none.
    section: str = ""


@dataclass(frozen=True, kw_only=True)
class _Tokens:
    text: str
    starts: list[int]
    ends: list[int]
    strength: list[int]  # strength[k]: the boundary before token k (k=0 unused)


def chunk_document(
    *, doc: ParsedDocument, tokenizer: Any, max_tokens: int = 200, overlap_tokens: int = 40
) -> list[Chunk]:
    """Split every page into chunks of at most `max_tokens` word pieces, each
    overlapping the previous by about `overlap_tokens`. Chunks never cross a
    page; they end at a paragraph or sentence end when one lies in the second
    half of the window, else at a word boundary."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    if not 0 <= overlap_tokens < max_tokens:
        raise ValueError("overlap_tokens must be at least 0 and less than max_tokens")
    pages = [page for page in doc.pages if page.text.strip()]
    if not pages:
        return []
    # The section in effect when each page begins: a heading holds until the next.
    entering: dict[int, str] = {}
    current = ""
    for page in doc.pages:
        entering[id(page)] = current
        if page.headings:
            current = page.headings[-1].title
    encoded = tokenizer(
        [page.text for page in pages],
        add_special_tokens=False,
        return_offsets_mapping=True,
        truncation=False,
        # Pages are longer than the model's limit on purpose; the warning about
        # that would be noise.
        verbose=False,
    )
    chunks: list[Chunk] = []
    for page, offsets in zip(pages, encoded["offset_mapping"], strict=True):
        tokens = _tokens_of(text=page.text, offsets=offsets)
        for start, end in _windows(tokens=tokens, max_tokens=max_tokens, overlap=overlap_tokens):
            char_start, char_end = _trimmed(
                text=page.text, start=tokens.starts[start], end=tokens.ends[end - 1]
            )
            chunks.append(
                Chunk(
                    text=page.text[char_start:char_end],
                    page=page.number,
                    char_start=char_start,
                    char_end=char_end,
                    ordinal=len(chunks),
                    section=_section_at(
                        page=page, offset=(char_start + char_end) // 2, before=entering[id(page)]
                    ),
                )
            )
    return chunks


def _section_at(*, page: PageText, offset: int, before: str) -> str:
    section = before
    for heading in page.headings:
        if heading.offset > offset:
            break
        section = heading.title
    return section


def _trimmed(*, text: str, start: int, end: int) -> tuple[int, int]:
    """[start, end) without whitespace at either end (unchanged if that is all it holds)."""
    low, high = start, end
    while low < high and text[low].isspace():
        low += 1
    while high > low and text[high - 1].isspace():
        high -= 1
    return (low, high) if low < high else (start, end)


def _tokens_of(*, text: str, offsets: list[tuple[int, int]]) -> _Tokens:
    # Some tokenizers emit zero-width tokens; they cover no text and cannot bound a span.
    spans = [(s, e) for s, e in offsets if e > s]
    starts = [s for s, _ in spans]
    ends = [e for _, e in spans]
    strength = [_NONE] * len(spans)
    for k in range(1, len(spans)):
        strength[k] = _boundary_strength(
            text=text,
            prev_start=starts[k - 1],
            prev_end=ends[k - 1],
            next_start=starts[k],
            next_end=ends[k],
        )
    return _Tokens(text=text, starts=starts, ends=ends, strength=strength)


def _boundary_strength(
    *, text: str, prev_start: int, prev_end: int, next_start: int, next_end: int
) -> int:
    if next_start < prev_end:
        return _NONE  # overlapping spans: pieces of one character or word
    # The gap is the text between the two tokens plus any whitespace their own spans
    # hold on the facing sides (" word" from a metaspace tokenizer, "\n" as a token).
    low, high = prev_end, next_start
    while low > prev_start and text[low - 1].isspace():
        low -= 1
    while high < next_end and text[high].isspace():
        high += 1
    if high <= low:
        return _NONE  # word pieces of one word, or punctuation stuck to it
    prev_end, next_start = low, high
    gap = text[prev_end:next_start]
    newlines = gap.count("\n")
    if newlines >= 2:
        return _PARAGRAPH
    following = text[next_start] if next_start < len(text) else ""
    if newlines == 1 and following in _LINE_OPENERS:
        return _SENTENCE  # a heading or list item starts here
    last = prev_end - 1
    while last > 0 and text[last] in _CLOSERS:
        last -= 1
    # "e.g. the" is not a sentence end; "It broke. The" is.
    if last >= 0 and text[last] in _SENTENCE_ENDS and not following.islower():
        return _SENTENCE
    return _WORD


def _windows(*, tokens: _Tokens, max_tokens: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges [start, end) of the chunks of one page."""
    count = len(tokens.starts)
    windows: list[tuple[int, int]] = []
    start, end = 0, 0
    while start < count:
        limit = min(start + max_tokens, count)
        end = _snap_end(tokens=tokens, start=start, limit=limit, previous_end=end)
        windows.append((start, end))
        if end >= count:
            break
        start = _next_start(tokens=tokens, start=start, end=end, overlap=overlap)
    return windows


def _snap_end(*, tokens: _Tokens, start: int, limit: int, previous_end: int) -> int:
    """The end of the window [start, limit): the last paragraph or sentence end in
    its second half, else the last word boundary there, else `limit` itself.

    Boundaries further back are not "near": taking them would make chunks short,
    and on text without spaces (glued table-of-contents lines) it would make
    every following window end at the same place. The end also always moves
    past the previous chunk's end, which bounds the number of chunks."""
    if limit >= len(tokens.starts):
        return limit
    strength = tokens.strength
    lowest = max(start + max(1, (limit - start) // 2), previous_end + 1)
    candidates = range(limit, lowest - 1, -1)
    for wanted in (_SENTENCE, _WORD):
        for k in candidates:
            if strength[k] >= wanted:
                return k
    return limit  # no boundary near: cut inside a very long "word"


def _next_start(*, tokens: _Tokens, start: int, end: int, overlap: int) -> int:
    """Where the next chunk starts: `overlap` tokens before `end`, moved to a
    sentence start or else a word start if one is within half the overlap."""
    strength = tokens.strength
    target = max(start + 1, end - overlap)
    if overlap == 0 or target >= end:
        return end
    reach = max(1, overlap // 2)
    low, high = max(start + 1, target - reach), min(end - 1, target + reach)
    nearest_first = sorted(range(low, high + 1), key=lambda k: (abs(k - target), k))
    for wanted in (_SENTENCE, _WORD):
        for k in nearest_first:
            if strength[k] >= wanted:
                return k
    return target
