"""Finding the engine's passage among pdfium's characters.

The engine read the page with pypdf and cleaned the text up (whitespace folded,
line-end hyphens joined, ligatures maybe expanded); pdfium's text page has its
own spacing, "\\r\\n" line ends, ligature characters, and the glyphs the engine
rewrote as written ("˜/.bashrc" is "~/.bashrc", "P´eter" is "Péter", a code line
Sphinx wrapped with "˓→" is one line again). So both sides are reduced to a key:
their letters and digits only, NFKD-normalised (accents apart, then dropped) and
case-folded; every key character remembers which pdfium character it came from.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence

# A passage this short could match anywhere; an anchor at each end of a longer
# one is found even when the middle differs (a table, a footnote, an image).
_ANCHOR = 24


def key_chars(text: str) -> str:
    return "".join(_key(ch) for ch in text)


def _key(ch: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKD", ch).casefold() if c.isalnum())


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
        return _widen(chars, owner[at], owner[at + len(needle) - 1])
    if len(needle) < 2 * _ANCHOR:
        return None
    head = hay.find(needle[:_ANCHOR])
    if head < 0:
        return None
    tail = hay.find(needle[-_ANCHOR:], head + _ANCHOR)
    # Anchors far apart are two different places, not one passage.
    if tail < 0 or tail + _ANCHOR - head > 2 * len(needle):
        return None
    return _widen(chars, owner[head], owner[tail + _ANCHOR - 1])


def _widen(chars: Sequence[str], first: int, last: int) -> tuple[int, int]:
    """The range grown over the punctuation its words carry ("(see ", "there."):
    the key holds letters and digits only."""
    while first > 0 and _attached(chars[first - 1]):
        first -= 1
    while last + 1 < len(chars) and _attached(chars[last + 1]):
        last += 1
    return first, last


def _attached(ch: str) -> bool:
    return not ch.isspace() and not _key(ch)
