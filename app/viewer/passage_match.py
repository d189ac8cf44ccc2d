"""Finding the engine's passage among pdfium's characters.

The engine read the page with pypdf and cleaned the text up (whitespace folded,
line-end hyphens joined, ligatures maybe expanded); pdfium's text page has its
own spacing, "\\r\\n" line ends and ligature characters. So both sides are
reduced to a key: NFKC-normalised, case-folded, with whitespace and hyphens
dropped, and every key character remembers which pdfium character it came from.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

_DROP = frozenset("-\u00ad\u2010\u2011\u2012\u2013\ufffe\uffff")
# A passage this short could match anywhere; an anchor at each end of a longer
# one is found even when the middle differs (a table, a footnote, an image).
_ANCHOR = 24


def key_chars(text: str) -> str:
    return "".join(_key(ch) for ch in text)


def _key(ch: str) -> str:
    if ch.isspace() or ch in _DROP:
        return ""
    return "".join(c for c in unicodedata.normalize("NFKC", ch).casefold() if not c.isspace())


def _keyed(chars: Sequence[str]) -> tuple[str, list[int]]:
    out: list[str] = []
    owner: list[int] = []
    for i, ch in enumerate(chars):
        k = _key(ch)
        out.append(k)
        owner.extend([i] * len(k))
    return "".join(out), owner


def locate(*, chars: Sequence[str], passage: str) -> tuple[int, int] | None:
    """The pdfium character range [first, last] that holds `passage`, or None."""
    needle = key_chars(passage)
    if not needle:
        return None
    hay, owner = _keyed(chars)
    at = hay.find(needle)
    if at >= 0:
        return owner[at], owner[at + len(needle) - 1]
    if len(needle) < 2 * _ANCHOR:
        return None
    head = hay.find(needle[:_ANCHOR])
    if head < 0:
        return None
    tail = hay.find(needle[-_ANCHOR:], head + _ANCHOR)
    # Anchors far apart are two different places, not one passage.
    if tail < 0 or tail + _ANCHOR - head > 2 * len(needle):
        return None
    return owner[head], owner[tail + _ANCHOR - 1]
