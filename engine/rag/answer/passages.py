"""The passages an answer is built from: what both answer modes take as input."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True)
class Passage:
    """One retrieved passage, in retrieval order; `index` is the n of its [n] marker."""

    index: int  # 1-based
    text: str
    path: str
    page: int | None  # 1-based; None for formats without pages
