"""File paths as the store keeps them.

A POSIX file name is bytes; Python shows the bytes that are not UTF-8 as lone
surrogates (U+DC80–U+DCFF, PEP 383), which Arrow and LanceDB refuse. Those
bytes are kept as the private-use characters U+EF80–U+EFFF instead (the
OPTU-8 convention), so every name round-trips and the file is found again.
"""

from __future__ import annotations

import re
from pathlib import Path

_SURROGATE_TO_PRIVATE = 0xEF80 - 0xDC80
# One search in C per name: a rescan converts every path of the folder.
_SURROGATES = re.compile("[\udc80-\udcff]")
_PRIVATE = re.compile("[\uef80-\uefff]")


def to_store(path: Path | str) -> str:
    text = str(path)
    if not _SURROGATES.search(text):
        return text
    return "".join(
        chr(ord(ch) + _SURROGATE_TO_PRIVATE) if 0xDC80 <= ord(ch) <= 0xDCFF else ch for ch in text
    )


def from_store(text: str) -> Path:
    if not _PRIVATE.search(text):
        return Path(text)
    return Path(
        "".join(
            chr(ord(ch) - _SURROGATE_TO_PRIVATE) if 0xEF80 <= ord(ch) <= 0xEFFF else ch
            for ch in text
        )
    )
