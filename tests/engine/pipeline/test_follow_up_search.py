"""A follow-up's search (engine/pipeline/adapters.py): its own ranking fused with its
other searches (FollowUp.also), and the last answer's files and quoted pages favoured."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.answer.conversation import resolve
from engine.pipeline.adapters import store_retrieve_batch
from engine.pipeline.requests import new_question
from engine.store.records import ChunkRecord, SearchFilters, SearchHit, SearchResult
from engine.wire import Citation, Turn


def _chunk(cid: str, path: str, page: int | None) -> ChunkRecord:
    return ChunkRecord(
        chunk_id=cid, doc_id=path, path=path, ordinal=0, page=page, char_start=0, char_end=1,
        text=cid, text_hash=cid,
    )  # fmt: skip


class _Store:
    """Answers each search text with the ranking given for it."""

    def __init__(self, rankings: dict[str, list[ChunkRecord]]) -> None:
        self.rankings = rankings
        self.texts: list[str] = []

    def search_batch(
        self,
        *,
        vectors: np.ndarray,
        texts: Sequence[str],
        k: int,
        filters: SearchFilters | None = None,
    ) -> list[SearchResult]:
        self.texts.extend(texts)
        out = []
        for text in texts:
            ranked = next((r for key, r in self.rankings.items() if key in text), [])
            hits = tuple(
                SearchHit(chunk=c, similarity=0.5, fused=1.0 / (61 + i))
                for i, c in enumerate(ranked[:k])
            )
            out.append(SearchResult(hits=hits, best_similarity=0.5, not_found=False))
        return out


def _embed(texts: list[str]) -> np.ndarray:
    return np.ones((len(texts), 4), dtype=np.float32) / 2.0


UPLOAD = Turn(
    question="How do I upload a package to the Debian archive?",
    answer="You can upload the package to the archive [2].",
    citations=[
        Citation(index=i + 1, chunk_id=f"c{i}", path=path, page=page, text=f"passage {i}",
                 score=0.5, char_start=0, char_end=1)
        for i, (path, page) in enumerate([("/d/devref.pdf", 43), ("/d/maint.pdf", 57)])
    ],
)  # fmt: skip


def test_a_chunk_only_the_earlier_questions_words_find_joins_the_top() -> None:
    other = [_chunk(f"policy{i}", "/d/policy.pdf", 100 + i) for i in range(6)]
    right = _chunk("maint58", "/d/maint.pdf", 58)
    store = _Store(
        {
            # The full-text half with the earlier question's words finds the answer;
            # the follow-up alone ranks it 7th.
            "upload package Debian archive": [right, *other],
            "When must": [*other, right],
        }
    )
    follow = resolve(question="When must the orig.tar.gz go with it?", history=(UPLOAD,))
    assert follow is not None
    question = new_question(text=follow.query, k=3, conversation=follow)
    alone = store_retrieve_batch(store=store, embed=_embed)(  # type: ignore[arg-type]
        [new_question(text=follow.query, k=3)]
    )[0]
    assert "maint58" not in [h.chunk.chunk_id for h in alone.hits]
    retrieve = store_retrieve_batch(store=store, embed=_embed)  # type: ignore[arg-type]
    (result,) = retrieve([question])
    top = [h.chunk.chunk_id for h in result.hits]
    # Fused with the search that names the earlier question, in the file the answer
    # quoted and next to its page, it comes first.
    assert top[0] == "maint58", top
    assert any(t.startswith("upload package Debian archive") for t in store.texts)


def test_a_question_without_history_is_searched_once_as_asked() -> None:
    store = _Store({"orig.tar.gz": [_chunk("a", "/d/a.pdf", 1), _chunk("b", "/d/b.pdf", 2)]})
    question = new_question(text="When must the orig.tar.gz be uploaded?", k=2)
    (result,) = store_retrieve_batch(store=store, embed=_embed)([question])  # type: ignore[arg-type]
    assert [h.chunk.chunk_id for h in result.hits] == ["a", "b"]
    assert store.texts == ["When must the orig.tar.gz be uploaded?"]
