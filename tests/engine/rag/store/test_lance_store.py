from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import ChunkRecord, DocumentRecord, EmbeddedChunks, PageRecord

DIM = 8


def _unit(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).normal(size=DIM).astype(np.float32)
    return v / np.linalg.norm(v)


def _doc(doc_id: str, texts: list[str], *, page: int | None = 1) -> tuple:
    doc = DocumentRecord(
        doc_id=doc_id,
        path=f"/docs/{doc_id}.pdf",
        size=10,
        mtime=1.0,
        content_hash="h",
        status="indexed",
        error=None,
        pages=1,
        chunks=len(texts),
    )
    chunks = [
        ChunkRecord(
            chunk_id=f"{doc_id}:{i}",
            doc_id=doc_id,
            path=doc.path,
            ordinal=i,
            page=page,
            char_start=0,
            char_end=len(t),
            text=t,
            text_hash=f"{doc_id}{t}",
        )
        for i, t in enumerate(texts)
    ]
    vectors = np.stack([_unit(hash(t) % 1000) for t in texts])
    pages = [PageRecord(doc_id=doc_id, page=page, text=" ".join(texts))]
    return doc, pages, EmbeddedChunks(chunks=chunks, vectors=vectors)


@pytest.fixture
def store(tmp_path: Path) -> LanceStore:
    s = LanceStore(folder=tmp_path / "index")
    assert s.ensure_embedder(embedder_id="test", dimension=DIM) is False
    return s


def test_replace_document_swaps_chunks_without_duplicates(store: LanceStore) -> None:
    doc, pages, emb = _doc("a", ["alpha one", "alpha two", "alpha three"])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    other, opages, oemb = _doc("b", ["beta one"])
    store.replace_document(doc=other, pages=opages, embedded=oemb)
    doc2, pages2, emb2 = _doc("a", ["alpha new"])
    store.replace_document(doc=doc2, pages=pages2, embedded=emb2)
    texts = sorted(r["text"] for r in store.chunks.to_arrow().to_pylist())
    assert texts == ["alpha new", "beta one"]
    assert store.counts() == (2, 2)


def test_hybrid_search_finds_by_words_and_vectors(store: LanceStore) -> None:
    doc, pages, emb = _doc("a", ["the pump needs a zirconium gasket", "unrelated filler text"])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.refresh_fulltext_index()
    hits = store.hybrid_search(vector=emb.vectors[1], text="zirconium gasket?", k=2)
    assert {h.chunk.text for h in hits} == {
        "the pump needs a zirconium gasket",
        "unrelated filler text",
    }
    # Found by both searches, the gasket chunk would fuse highest; here the vector
    # points at the filler, so each wins one list and both are returned.
    assert hits[0].similarity <= 1.0 + 1e-5


def test_holds_word_asks_the_full_text_index(store: LanceStore) -> None:
    assert store.holds_word("gasket")  # no full-text index yet: not known to be absent
    doc, pages, emb = _doc("a", ["the pump needs zirconium gaskets", "unrelated filler text"])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.refresh_fulltext_index()
    assert store.holds_word("zirconium")
    assert store.holds_word("gasket")  # the index stems: "gaskets" holds it
    assert not store.holds_word("wireguard")
    # A word the index leaves out (a common word of some language) is not absent:
    # "like" and "come" read as never mentioned refused English questions.
    assert store.holds_word("like") and store.holds_word("Der")


def test_the_documents_that_hold_a_word_or_its_form(store: LanceStore) -> None:
    for doc_id, texts in (("a", ["the gasket seals the pump"]), ("b", ["a gasket and a valve"])):
        doc, pages, emb = _doc(doc_id, texts)
        store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.refresh_fulltext_index()
    assert store.word_documents("gaskets") == {"/docs/a.pdf", "/docs/b.pdf"}
    assert store.word_documents("valve") == {"/docs/b.pdf"}
    assert store.word_documents("wireguard") == frozenset()
    assert store.word_documents("the") is None  # left out of the index: not known absent
    assert store.form_documents("pumps", fixed=4) == {"/docs/a.pdf"}


def test_form_documents_hold_a_word_that_differs_in_its_last_letters(store: LanceStore) -> None:
    texts = ["para borrar los archivos generados", "el guion comprueba el paquete"]
    doc, pages, emb = _doc("a", texts)
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.refresh_fulltext_index()  # English rules: no Spanish stemming
    assert not store.holds_word("borro") and not store.holds_word("compruebo")
    assert store.form_documents("borro", fixed=4)  # "borrar": two edits after "borr"
    assert store.form_documents("compruebo", fixed=8)  # "comprueba"
    assert not store.form_documents("compramos", fixed=6)  # "compra": its sixth letter differs
    assert not store.form_documents("pybuild", fixed=4)


def test_form_documents_meet_accented_words_as_the_index_folds_them(store: LanceStore) -> None:
    """The index stores "pripojí" as "pripoji"; a fuzzy match is not analysed, so an
    unfolded "pripojím" met no stored word and read as never mentioned."""
    texts = ["Ako sa pripojí na vzdialený počítač", "spustenie inštalátora", "Größe der Seite"]
    doc, pages, emb = _doc("a", texts)
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.refresh_fulltext_index()
    assert store.form_documents("pripojím", fixed=7)
    assert store.form_documents("inštalátoru", fixed=10)
    assert store.form_documents("größen", fixed=5)  # ß folds to two letters
    assert not store.form_documents("prestavím", fixed=8)


def test_holds_phrase_wants_the_words_together(store: LanceStore) -> None:
    assert store.holds_phrase("Secure Boot")  # no full-text index yet: not known to be absent
    texts = [
        "boot the machine in secure mode",
        "the Secure\nBoot keys",
        "arch user repo",
        "zeigen Sie, dass ein Makro LuaTeX-spezifisch ist",
    ]
    doc, pages, emb = _doc("a", texts)
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.refresh_fulltext_index()
    assert store.holds_phrase("Secure Boot")  # case and line breaks aside
    assert store.holds_phrase("secure-boot keys")
    assert not store.holds_phrase("Arch User Repository")  # each word, never in a row
    assert not store.holds_phrase("Raspberry Pi")
    # German capitalises nouns: a "name" in a question may be held in another order
    # and form.
    assert store.holds_phrase("LuaTeX-spezifischen Makros")
    assert not store.holds_phrase("Machine Mode")  # too far apart


def test_search_survives_query_syntax_characters(store: LanceStore) -> None:
    doc, pages, emb = _doc("a", ['a "quoted" AND: (thing)'])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    store.refresh_fulltext_index()
    hits = store.hybrid_search(vector=emb.vectors[0], text='"quoted" AND: (thing)?', k=3)
    assert hits and hits[0].chunk.chunk_id == "a:0"


def test_pages_and_chunks_read_back(store: LanceStore) -> None:
    doc, pages, emb = _doc("a", ["first text"], page=None)
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    chunk = store.chunk(chunk_id="a:0")
    assert chunk is not None and chunk.page is None
    page = store.page(doc_id="a", page=None)
    assert page is not None and page.text == "first text"


def test_what_follows_a_chunk_on_its_page_is_read_back(store: LanceStore) -> None:
    doc, pages, emb = _doc("a", ["first page", "second page"])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    whole = store.page(doc_id="a", page=1)
    assert whole is not None
    chunk = store.chunk(chunk_id="a:0")
    assert chunk is not None
    cut = replace(chunk, char_end=3, chunk_id="cut")
    following = store.following_text(chunks=[chunk, cut], chars=4)
    assert following == {
        "a:0": whole.text[chunk.char_end : chunk.char_end + 4],
        "cut": whole.text[3:7],
    }
    assert following["cut"]  # the page goes on after the cut chunk
    assert store.following_text(chunks=[], chars=4) == {}


def test_changed_embedder_rebuilds_vectors_and_keeps_chunks(tmp_path: Path) -> None:
    s = LanceStore(folder=tmp_path / "index")
    s.ensure_embedder(embedder_id="old", dimension=DIM)
    doc, pages, emb = _doc("a", ["one", "two"])
    s.replace_document(doc=doc, pages=pages, embedded=emb)
    s.close()  # its index maintainer must not outlive the folder
    reopened = LanceStore(folder=tmp_path / "index")
    assert reopened.ensure_embedder(embedder_id="new", dimension=4) is True
    done = list(
        reopened.reembed(
            embedder_id="new",
            dimension=4,
            embed=lambda texts: np.ones((len(texts), 4), np.float32) / 2,
        )
    )
    assert done[-1] == (2, 2)
    assert reopened.meta is not None and reopened.meta.dimension == 4
    reopened.close()
    again = LanceStore(folder=tmp_path / "index")
    assert again.ensure_embedder(embedder_id="new", dimension=4) is False
    assert again.counts() == (1, 2)
    again.close()


def test_vectors_are_reused_by_text_hash(store: LanceStore) -> None:
    doc, pages, emb = _doc("a", ["same text"])
    store.replace_document(doc=doc, pages=pages, embedded=emb)
    reused = store.vectors_by_text_hash(doc_id="a")
    assert np.allclose(reused["asame text"], emb.vectors[0])


def test_the_fulltext_index_and_the_maintainers_compaction_do_not_preempt_each_other(
    tmp_path: Path,
) -> None:
    # An ingestion of 12 real manuals failed at its end: LanceDB refused the new
    # full-text index ("Retryable commit conflict … preempted by concurrent
    # transaction Rewrite"), the index maintainer having compacted meanwhile.
    store = LanceStore(folder=tmp_path / "index", background=False)
    store.ensure_embedder(embedder_id="test", dimension=DIM)
    stop = threading.Event()
    failures: list[str] = []

    def maintain() -> None:
        while not stop.is_set():
            try:
                store.maintain_index(force_optimize=True)
            except Exception as e:
                failures.append(f"maintainer: {e}")

    try:
        for i in range(6):  # small files for the compaction to fold
            doc, pages, embedded = _doc(f"d{i}", [f"gamma {i} delta {j}" for j in range(20)])
            store.replace_document(doc=doc, pages=pages, embedded=embedded)
        worker = threading.Thread(target=maintain)
        worker.start()
        try:
            for _ in range(20):
                try:
                    store.refresh_fulltext_index(force=True)
                except Exception as e:
                    failures.append(f"full-text index: {e}")
        finally:
            stop.set()
            worker.join()
        assert not failures, failures[:2]
        assert store.holds_word("gamma")
    finally:
        store.close()
