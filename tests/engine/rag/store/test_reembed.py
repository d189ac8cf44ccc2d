"""Re-embedding under another embedder (engine/rag/store/reembed.py): cut short, the old
index stays in force and the next run embeds only what is missing; documents
changed meanwhile end up in the new table exactly as in the old one."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np

from engine.rag.store.lance_store import LanceStore
from tests.engine.rag.store.test_lance_store import DIM, _doc

NEW_DIM = 4


class CountingEmbed:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts.extend(texts)
        out = np.zeros((len(texts), NEW_DIM), np.float32)
        out[:, 0] = 1.0
        return out


def _store(tmp_path: Path, docs: int) -> LanceStore:
    store = LanceStore(folder=tmp_path / "index", background=False)
    store.ensure_embedder(embedder_id="old", dimension=DIM)
    for i in range(docs):
        doc, pages, emb = _doc(f"d{i}", [f"text {i} one", f"text {i} two"])
        store.replace_document(doc=doc, pages=pages, embedded=emb)
    return store


def _ids(store: LanceStore) -> list[str]:
    return store.chunks.to_arrow().column("chunk_id").to_pylist()


def test_cut_short_keeps_the_old_index_and_the_next_run_goes_on(tmp_path: Path) -> None:
    store = _store(tmp_path, docs=10)
    first = CountingEmbed()
    steps = store.reembed(embedder_id="new", dimension=NEW_DIM, embed=first, batch=4)
    assert next(steps) == (0, 20)
    assert next(steps) == (4, 20)
    assert next(steps) == (8, 20)
    steps.close()  # as a kill between two batches
    assert store.meta is not None and store.meta.embedder_id == "old"
    assert len(_ids(store)) == 20 and store.meta.dimension == DIM
    store.close()

    store = LanceStore(folder=tmp_path / "index", background=False)
    # Meanwhile a document changed, one went and one came (ingestion goes on).
    doc, pages, emb = _doc("d0", ["text 0 rewritten"])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.remove_document(doc_id="d1")
    doc, pages, emb = _doc("d10", ["text 10 one"])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    second = CountingEmbed()
    swapped: list[str] = []
    done = list(
        store.reembed(
            embedder_id="new",
            dimension=NEW_DIM,
            embed=second,
            batch=4,
            on_swap=lambda: swapped.append(store.meta.embedder_id if store.meta else ""),
        )
    )
    assert done[0][0] > 0, "the batches done before were kept"
    assert done[-1] == (done[-1][1], 18)
    assert len(second.texts) < 18  # only what was missing
    assert swapped == ["new"]
    assert store.meta is not None and (store.meta.embedder_id, store.meta.dimension) == ("new", 4)
    rows = store.chunks.to_arrow().select(["chunk_id", "text"]).to_pylist()
    assert max(Counter(r["chunk_id"] for r in rows).values()) == 1
    texts = {r["chunk_id"]: r["text"] for r in rows}
    assert texts["d0:0"] == "text 0 rewritten" and "d0:1" not in texts
    assert "d1:0" not in texts and texts["d10:0"] == "text 10 one"
    assert len(texts) == 18
    hits = store.hybrid_search(vector=np.eye(NEW_DIM, dtype=np.float32)[0], text="text", k=3)
    assert len(hits) == 3
    store.close()
