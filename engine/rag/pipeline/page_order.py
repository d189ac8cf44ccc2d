"""A question's sources, distinct pages first.

Chunks overlap and a page holds several, so a ranking often puts two chunks of one
page in its top three: the window then lists "p.124, p.19, p.124" and a third page
that would have answered sits fourth. Sources are read as places to look, so each
page's best chunk comes first, in rank order, and the second chunks of pages already
listed follow them. Nothing is dropped or merged: what is cut to a question's k is
the same candidates in another order. Merging a page's chunks into one passage was
measured too and quoted worse answers (docs/benchmarks-history.md, "Distinct pages first").
"""

from __future__ import annotations

from collections.abc import Sequence

from engine.rag.store.records import SearchHit


def distinct_pages_first(hits: Sequence[SearchHit]) -> list[SearchHit]:
    """`hits` with the best chunk of each page first, in rank order, then the other
    chunks of those pages, in rank order. A chunk without a page (text, HTML) is a
    place of its own: a file is not one page."""
    seen: set[tuple[str, int]] = set()
    first: list[SearchHit] = []
    again: list[SearchHit] = []
    for hit in hits:
        page = hit.chunk.page
        if page is None:
            first.append(hit)
            continue
        place = (hit.chunk.path, page)
        (again if place in seen else first).append(hit)
        seen.add(place)
    return [*first, *again]
