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
