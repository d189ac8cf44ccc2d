"""Whether an answer holds a question's answer string, as the quality benchmarks judge."""

from __future__ import annotations

import re


def contains(text: str, wanted: str) -> bool:
    """Case and whitespace do not count: PDF text wraps where the set's string does not."""
    return _squash(wanted) in _squash(text)


def _squash(text: str) -> str:
    text = text.replace("\u00ad", "").replace("‘", "'").replace("’", "'")
    text = (
        text.replace("“", '"')
        .replace("”", '"')
        .replace("–", "-")
        .replace("—", "-")
        .replace("−", "-")
    )
    return re.sub(r"\s+", "", text).lower()
