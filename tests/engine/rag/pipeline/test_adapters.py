"""The retrieval batch (engine/rag/pipeline/adapters.py) against a real store whose
embedder is swapped (engine/rag/store/reembed.py) between a question's embedding and
its search: the question is embedded again, by the embedder of the index it searches."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.errors import StaleVectorsError
from engine.rag.pipeline.adapters import store_retrieve_batch
from engine.rag.pipeline.requests import Question
from engine.rag.store.lance_store import LanceStore
from tests.engine.rag.store.test_lance_store import DIM
from tests.engine.rag.store.test_reembed import NEW_DIM, CountingEmbed, _store


class SwappedAfterTheFirstCall:
    """The old embedder's vectors for the first call, and then the swap lands;
    the new embedder's for every call after it."""

    def __init__(self, store: LanceStore) -> None:
        self.store = store
        self.made: list[str] = []

    def __call__(self, texts: list[str]) -> tuple[np.ndarray, str]:
        if not self.made:
            self.made.append("old")
            vectors = np.zeros((len(texts), DIM), np.float32)
            vectors[:, 0] = 1.0
            list(self.store.reembed(embedder_id="new", dimension=NEW_DIM, embed=CountingEmbed()))
            return vectors, "old"
        self.made.append("new")
        return CountingEmbed()(texts), "new"


def test_a_question_embedded_before_a_swap_is_embedded_again(tmp_path: Path) -> None:
    store = _store(tmp_path, docs=3)
    tagged = SwappedAfterTheFirstCall(store)
    retrieve = store_retrieve_batch(
        store=store, embed=lambda texts: tagged(texts)[0], tagged=tagged
    )
    (result,) = retrieve([Question(request_id="q", text="text 1 one", k=3)])
    assert tagged.made == ["old", "new"]
    assert store.meta is not None and store.meta.embedder_id == "new"
    assert result.hits and "text 1 one" in [h.chunk.text for h in result.hits]
    store.close()


def test_the_store_refuses_another_embedders_vectors(tmp_path: Path) -> None:
    store = _store(tmp_path, docs=1)
    vector = np.ones(DIM, np.float32) / np.sqrt(DIM)
    assert store.hybrid_search(vector=vector, text="text", k=1, made_by="old")
    with pytest.raises(StaleVectorsError):
        store.hybrid_search(vector=vector, text="text", k=1, made_by="another")
    store.close()


def test_a_translated_question_is_searched_in_the_documents_words_too(tmp_path: Path) -> None:
    """The question's own vector ranks the page 11th (ten closer pages, as across
    languages); its translation's words meet the page's in the full-text search, and
    the fused ranking lifts it into the top 3."""
    from engine.rag.store.records import EmbeddedChunks
    from tests.engine.rag.store.test_lance_store import _doc, _unit

    asked, translation = _unit(5000), _unit(6000)
    near = asked + 0.1 * _unit(999)
    vectors = [asked] * 10 + [_unit(i) for i in range(10, 200)] + [near / np.linalg.norm(near)]
    texts = [f"Abschnitt {i} über andere Dinge" for i in range(200)]
    texts.append("Zebrastreifen sind weiß gestreift")
    store = LanceStore(folder=tmp_path / "index", background=False)
    store.ensure_embedder(embedder_id="test", dimension=DIM)
    for i, (text, vector) in enumerate(zip(texts, vectors, strict=True)):
        doc, pages, emb = _doc(f"d{i}", [text])
        embedded = EmbeddedChunks(chunks=emb.chunks, vectors=np.stack([vector]))
        store.replace_document(doc=doc, pages=pages, embedded=embedded)
    store.refresh_fulltext_index()
    zebra = f"d{len(texts) - 1}:0"
    question = "Which crossing has white stripes?"

    def embed(batch: list[str]) -> np.ndarray:
        return np.stack([asked if t == question else translation for t in batch])

    retrieve = store_retrieve_batch(store=store, embed=embed)
    (alone,) = retrieve([Question(request_id="q", text=question, k=3)])
    assert zebra not in [h.chunk.chunk_id for h in alone.hits]
    (translated,) = retrieve(
        [Question(request_id="q", text=question, k=3, translated="Zebrastreifen gestreift")]
    )
    assert zebra in [h.chunk.chunk_id for h in translated.hits]
    assert len(translated.hits) == 3
    store.close()
