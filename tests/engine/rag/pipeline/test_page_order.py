"""A question's sources, distinct pages first (engine/rag/pipeline/page_order.py)."""

from __future__ import annotations

from engine.rag.pipeline.page_order import distinct_pages_first
from engine.rag.store.records import ChunkRecord, SearchHit


def _hit(cid: str, path: str, page: int | None) -> SearchHit:
    chunk = ChunkRecord(
        chunk_id=cid, doc_id=path, path=path, ordinal=0, page=page, char_start=0, char_end=1,
        text=cid, text_hash=cid,
    )  # fmt: skip
    return SearchHit(chunk=chunk, similarity=0.5, fused=0.1)


def _ids(hits: list[SearchHit]) -> list[str]:
    return [h.chunk.chunk_id for h in hits]


def test_a_second_chunk_of_a_listed_page_follows_the_other_pages() -> None:
    hits = [
        _hit("p124a", "/d/policy.pdf", 124),
        _hit("p19", "/d/policy.pdf", 19),
        _hit("p124b", "/d/policy.pdf", 124),
        _hit("g27", "/d/guide.pdf", 27),
        _hit("p19b", "/d/policy.pdf", 19),
        _hit("g124", "/d/guide.pdf", 124),  # the same page number in another file
    ]
    assert _ids(distinct_pages_first(hits)) == ["p124a", "p19", "g27", "g124", "p124b", "p19b"]


def test_chunks_without_pages_each_count_as_a_place_and_nothing_is_dropped() -> None:
    hits = [
        _hit("t1", "/d/apt.txt", None),
        _hit("t2", "/d/apt.txt", None),
        _hit("a", "/d/x.pdf", 3),
    ]
    assert _ids(distinct_pages_first(hits)) == ["t1", "t2", "a"]
    assert distinct_pages_first([]) == []


def test_a_ranking_of_distinct_pages_is_left_as_it_is() -> None:
    hits = [_hit(str(i), "/d/x.pdf", i) for i in range(5)]
    assert distinct_pages_first(hits) == hits
