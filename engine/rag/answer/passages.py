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
    # What follows the passage on its page (a bounded slice, "" when not read): an
    # extractive quotation that reaches the passage's end goes on into it, since the
    # passage's edge is only where the chunker's window stopped. Never scored or cited
    # apart: it is the same page.
    after: str = ""
