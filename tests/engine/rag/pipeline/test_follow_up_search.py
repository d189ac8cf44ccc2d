"""A follow-up's search (engine/rag/pipeline/adapters.py): its own ranking fused with its
other searches (FollowUp.also), and the last answer's files and quoted pages favoured."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from engine.rag.answer.conversation import resolve
from engine.rag.pipeline.adapters import store_retrieve_batch
from engine.rag.pipeline.requests import new_question
from engine.rag.store.records import ChunkRecord, SearchFilters, SearchHit, SearchResult
from engine.wire import Citation, Turn


def _chunk(cid: str, path: str, page: int | None, section: str = "") -> ChunkRecord:
    return ChunkRecord(
        chunk_id=cid, doc_id=path, path=path, ordinal=0, page=page, char_start=0, char_end=1,
        text=cid, text_hash=cid, section=section,
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


def test_the_top_k_lists_distinct_pages_before_a_second_chunk_of_one() -> None:
    ranking = [
        _chunk("p124a", "/d/policy.pdf", 124),
        _chunk("p124b", "/d/policy.pdf", 124),
        _chunk("p19", "/d/policy.pdf", 19),
        _chunk("g27", "/d/guide.pdf", 27),
    ]
    store = _Store({"copyright": ranking})
    question = new_question(text="What goes into the copyright file?", k=3)
    (result,) = store_retrieve_batch(store=store, embed=_embed)([question])  # type: ignore[arg-type]
    # The same three candidates, the other page before the second chunk: a standalone
    # question is not searched deeper for it (deeper reads quoted worse answers).
    assert [h.chunk.chunk_id for h in result.hits] == ["p124a", "p19", "p124b"]


def _cite(index: int, path: str, page: int, section: str) -> Citation:
    return Citation(
        index=index, chunk_id=f"c{index}", path=path, page=page, text=f"passage {index}",
        score=0.5, char_start=0, char_end=1, section=section,
    )  # fmt: skip


# The New Maintainers' Guide and Debian Policy as the benchmark's index holds them: the
# answer quoted Policy's definition; the Guide's conffiles page was cited, not quoted.
CONFFILE = Turn(
    question="What is a conffile in a Debian package?",
    answer="A file listed in a package's conffiles file is treated specially by dpkg [1].",
    citations=[
        _cite(1, "/d/debian-policy.pdf", 107, "10.7.1 Definitions"),
        _cite(2, "/d/maint-guide.pdf", 36, "5.3 conffiles"),
    ],
)


def _top(*, follow_up: str, ranking: list[ChunkRecord], turn: Turn = CONFFILE) -> list[str]:
    follow = resolve(question=follow_up, history=(turn,))
    assert follow is not None and follow.dependent
    store = _Store({follow_up: ranking})
    question = new_question(text=follow.query, k=3, conversation=follow)
    (result,) = store_retrieve_batch(store=store, embed=_embed)([question])  # type: ignore[arg-type]
    return [h.chunk.chunk_id for h in result.hits]


def test_a_page_next_to_one_the_last_answer_cited_without_quoting_it_moves_up() -> None:
    ranking = [
        _chunk("far", "/d/maint-guide.pdf", 50, "6.1 Complete (re)build"),
        _chunk("next", "/d/maint-guide.pdf", 37, "5.5 dirs"),
        _chunk("menus", "/d/debian-policy.pdf", 140, "9.6 Menus"),
    ]
    # The Guide's p. 36 was cited (not quoted): p. 37 beside it passes p. 50.
    top = _top(follow_up="And what does the dirs one hold?", ranking=ranking)
    assert top.index("next") < top.index("far"), top


class _LeaningStore(_Store):
    """The batch's own search (the question as asked) finds `own`, matching weakly
    (0.3); every later search (history-aware: the earlier question blended in) finds
    `earlier`, matching better (0.45)."""

    def __init__(self, own: list[ChunkRecord], earlier: list[ChunkRecord]) -> None:
        super().__init__({})
        self.own, self.earlier = own, earlier

    def search_batch(self, *, vectors, texts, k, filters=None):  # type: ignore[no-untyped-def,override]
        first = not self.texts
        self.texts.extend(texts)
        ranked = self.own if first else self.earlier
        hits = tuple(
            SearchHit(chunk=c, similarity=0.3 if first else 0.45, fused=1.0 / (61 + i))
            for i, c in enumerate(ranked[:k])
        )
        best = 0.3 if first else 0.45
        return [SearchResult(hits=hits, best_similarity=best, not_found=False) for _ in texts]


def test_a_question_judged_standalone_keeps_its_own_best_match_first() -> None:
    own = [_chunk("own", "/d/gnuplot.pdf", 5), _chunk("own2", "/d/gnuplot.pdf", 6)]
    earlier = [_chunk(f"up{i}", "/d/devref.pdf", 43 + i) for i in range(3)]
    follow = resolve(question="Why might my plot be held back in gnuplot?", history=(UPLOAD,))
    assert follow is not None and follow.hedged
    store = _LeaningStore(own, earlier)
    asked = new_question(text=follow.query, k=3, conversation=follow)
    (result,) = store_retrieve_batch(store=store, embed=_embed)([asked])  # type: ignore[arg-type]
    top = [h.chunk.chunk_id for h in result.hits]
    assert result.leaned == 1.0  # +0.15 with the earlier question: it leans fully
    # Three history-aware searches outrank its own one, but not its best match.
    assert top == ["own", "up0", "up1"], top


def test_a_question_the_earlier_one_does_not_help_keeps_its_own_ranking() -> None:
    own = [_chunk(f"own{i}", "/d/gnuplot.pdf", 5 + i) for i in range(3)]
    earlier = [_chunk(f"up{i}", "/d/devref.pdf", 43 + i) for i in range(3)]
    follow = resolve(question="How do I draw a filled curve in gnuplot?", history=(UPLOAD,))
    assert follow is not None and follow.hedged
    store = _LeaningStore(own, earlier)
    store.search_batch = _diluted(store)  # type: ignore[method-assign]
    asked = new_question(text=follow.query, k=3, conversation=follow)
    (result,) = store_retrieve_batch(store=store, embed=_embed)([asked])  # type: ignore[arg-type]
    assert result.leaned == 0.0
    assert [h.chunk.chunk_id for h in result.hits] == ["own0", "own1", "own2"]


def _diluted(store: _LeaningStore):  # type: ignore[no-untyped-def]
    """`store`'s searches with the history-aware ones matching worse (0.25 < 0.3)."""
    search = store.search_batch

    def diluted(*, vectors, texts, k, filters=None):  # type: ignore[no-untyped-def]
        first = not store.texts
        results = search(vectors=vectors, texts=texts, k=k, filters=filters)
        if first:
            return results
        return [SearchResult(hits=r.hits, best_similarity=0.25, not_found=False) for r in results]

    return diluted
