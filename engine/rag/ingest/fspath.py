"""File paths as the store keeps them.

A POSIX file name is bytes; Python shows the bytes that are not UTF-8 as lone
surrogates (U+DC80–U+DCFF, PEP 383), which Arrow and LanceDB refuse. Those
bytes are kept as the private-use characters U+EF80–U+EFFF instead (the
OPTU-8 convention), so every name round-trips and the file is found again.

A real name may hold those characters too (any UTF-8 name may): alone, `lamp\\xe9.txt`
and a real `lamp\\uefe9.txt` would become one path. So a real character of that
range, and the escape U+EF7F itself, are kept escaped (U+EF7F before it): the
encoding is one-to-one, each character maps on its own (a folder's prefix stays the
prefix of its files), and a name that holds none of these reads as it did before.
"""

from __future__ import annotations

import re
from pathlib import Path

_SURROGATE_TO_PRIVATE = 0xEF80 - 0xDC80
ESCAPE = "\uef7f"
# One search in C per name: a rescan converts every path of the folder.
_TO_CHANGE = re.compile("[\udc80-\udcff\uef7f-\uefff]")
_STORED = re.compile("[\uef7f-\uefff]")
_SURROGATES = re.compile("[\udc80-\udcff]")


def to_store(path: Path | str) -> str:
    text = str(path)
    if not _TO_CHANGE.search(text):
        return text
    return _TO_CHANGE.sub(_encode, text)


def _encode(match: re.Match[str]) -> str:
    ch = match.group()
    if ch <= "\udcff":
        return chr(ord(ch) + _SURROGATE_TO_PRIVATE)
    return ESCAPE + ch


def to_wire(path: str | Path) -> str:
    """A path for a request to the engine. A `Path` names a file on this machine and is
    encoded whole (`to_store`). A `str` is taken as the API gave it (a document's or a
    folder's path), so only what cannot be in such a string is encoded: the bytes
    that are not UTF-8 of a name read from this machine."""
    if isinstance(path, Path):
        return to_store(path)
    if not _SURROGATES.search(path):
        return path
    return _SURROGATES.sub(lambda m: chr(ord(m.group()) + _SURROGATE_TO_PRIVATE), path)


def from_store(text: str) -> Path:
    if not _STORED.search(text):
        return Path(text)
    out: list[str] = []
    escaped = False
    for ch in text:
        if escaped:
            out.append(ch)
            escaped = False
        elif ch == ESCAPE:
            escaped = True
        elif "\uef80" <= ch <= "\uefff":
            out.append(chr(ord(ch) - _SURROGATE_TO_PRIVATE))
        else:
            out.append(ch)
    if escaped:  # a lone escape at the end (not written by to_store): kept as is
        out.append(ESCAPE)
    return Path("".join(out))
