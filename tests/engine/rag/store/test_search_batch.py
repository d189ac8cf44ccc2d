from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.rag.store.ann_index import IndexPolicy
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import (
    ChunkRecord,
    DocumentRecord,
    EmbeddedChunks,
    PageRecord,
    SearchFilters,
)
from engine.rag.store.search import filters_accept

DIM = 16
WORDS = ["pump", "gasket", "valve", "filter", "boiler", "rotor", "sensor", "relay"]


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.normal(size=(n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _add(
    store: LanceStore, *, path: str, texts: list[str], vectors: np.ndarray, languages: str = ""
) -> None:
    doc_id = path.replace("/", "_")
    doc = DocumentRecord(
        doc_id=doc_id,
        path=path,
        size=1,
        mtime=1.0,
        content_hash="h",
        status="indexed",
        error=None,
        pages=1,
        chunks=len(texts),
        languages=languages,
    )
    chunks = [
        ChunkRecord(
            chunk_id=f"{doc_id}:{i}",
            doc_id=doc_id,
            path=path,
            ordinal=i,
            page=1,
            char_start=0,
            char_end=len(t),
            text=t,
            text_hash=t,
        )
        for i, t in enumerate(texts)
    ]
    store.replace_document(
        doc=doc,
        pages=[PageRecord(doc_id=doc_id, page=1, text=" ".join(texts))],
        embedded=EmbeddedChunks(chunks=chunks, vectors=vectors),
    )


@pytest.fixture
def store(tmp_path: Path) -> LanceStore:
    s = LanceStore(folder=tmp_path / "index", background=False)
    s.ensure_embedder(embedder_id="test", dimension=DIM)
    rng = np.random.default_rng(1)
    files = ["/docs/a/one.pdf", "/docs/a/two.TXT", "/docs/ab/three.pdf", "/docs/b/four.md"]
    for n, path in enumerate(files):
        texts = [f"{WORDS[(n + i) % 8]} note {n}-{i} {WORDS[i % 8]}" for i in range(12)]
        _add(store=s, path=path, texts=texts, vectors=_unit(rng, len(texts)))
    s.refresh_fulltext_index()
    return s


def test_batch_equals_single_queries(store: LanceStore) -> None:
    rng = np.random.default_rng(7)
    vectors = _unit(rng, 5)
    texts = ["pump gasket", "valve", "boiler rotor sensor", "", "relay note 2-3"]
    batch = store.search_batch(vectors=vectors, texts=texts, k=6)
    assert len(batch) == 5
    for vector, text, result in zip(vectors, texts, batch, strict=True):
        single = store.hybrid_search(vector=vector, text=text, k=6)
        assert [h.chunk.chunk_id for h in result.hits] == [h.chunk.chunk_id for h in single]
        assert [h.similarity for h in result.hits] == pytest.approx([h.similarity for h in single])
        assert len(result.hits) == 6


def test_similarity_is_the_cosine_of_the_stored_vector(store: LanceStore) -> None:
    row = store.chunks.to_arrow().slice(5, 1).to_pylist()[0]
    (result,) = store.search_batch(
        vectors=np.asarray([row["vector"]], np.float32), texts=["zzz"], k=1
    )
    assert result.hits[0].chunk.chunk_id == row["chunk_id"]
    assert result.hits[0].similarity == pytest.approx(1.0, abs=1e-5)
    assert result.not_found is False


def test_filters_by_folder_and_type(store: LanceStore) -> None:
    vectors = _unit(np.random.default_rng(3), 2)
    texts = ["pump", "valve"]
    by_folder = store.search_batch(
        vectors=vectors, texts=texts, k=50, filters=SearchFilters(folders=("/docs/a",))
    )
    for result in by_folder:
        paths = {h.chunk.path for h in result.hits}
        # "/docs/ab" shares the prefix but is another folder.
        assert paths == {"/docs/a/one.pdf", "/docs/a/two.TXT"}
    by_type = store.search_batch(
        vectors=vectors, texts=texts, k=50, filters=SearchFilters(types=("txt", ".MD"))
    )
    for result in by_type:
        assert {h.chunk.path for h in result.hits} == {"/docs/a/two.TXT", "/docs/b/four.md"}
    both = store.search_batch(
        vectors=vectors,
        texts=texts,
        k=50,
        filters=SearchFilters(folders=("/docs/a/", "/docs/ab"), types=("pdf",)),
    )
    for result in both:
        assert {h.chunk.path for h in result.hits} == {"/docs/a/one.pdf", "/docs/ab/three.pdf"}
    nothing = store.search_batch(
        vectors=vectors[:1], texts=texts[:1], k=5, filters=SearchFilters(types=("docx",))
    )
    assert nothing[0].hits == () and nothing[0].not_found


@pytest.mark.parametrize(
    "filters",
    [
        SearchFilters(folders=("/docs/a",)),
        SearchFilters(types=("txt", ".MD")),
        SearchFilters(folders=("/docs/a/", "/docs/ab"), types=("pdf",)),
        SearchFilters(paths=("/docs/ab/three.pdf", "/docs/a")),
        SearchFilters(types=("docx",)),
    ],
)
def test_a_filter_read_on_a_path_lets_through_what_the_search_does(
    store: LanceStore, filters: SearchFilters
) -> None:
    """`filters_accept` (the documents a filtered question may reach: which languages
    they are written in) and the search's `where` read a filter alike."""
    (result,) = store.search_batch(
        vectors=_unit(np.random.default_rng(5), 1), texts=["note"], k=50, filters=filters
    )
    every = {d.path for d in store.list_documents()}
    assert {h.chunk.path for h in result.hits} == {
        p for p in every if filters_accept(filters, path=p)
    }


def test_a_paths_filter_keeps_to_those_files_alone(store: LanceStore) -> None:
    vectors = _unit(np.random.default_rng(4), 3)
    texts = ["pump", "valve gasket", "note 1-3"]
    for path in ("/docs/a/one.pdf", "/docs/ab/three.pdf"):
        one = SearchFilters(paths=(path,))
        for result in store.search_batch(vectors=vectors, texts=texts, k=50, filters=one):
            assert len(result.hits) == 12  # every chunk of that file, nothing else
            assert {h.chunk.path for h in result.hits} == {path}
    # A name that is a prefix of another file's, or a folder, is not that file.
    (none,) = store.search_batch(
        vectors=vectors[:1], texts=texts[:1], k=5, filters=SearchFilters(paths=("/docs/a",))
    )
    assert none.hits == ()
    quoted = SearchFilters(paths=("/docs/it's.pdf",))  # a quote in a name is data
    (none,) = store.search_batch(vectors=vectors[:1], texts=texts[:1], k=5, filters=quoted)
    assert none.hits == ()


def test_not_found_when_best_similarity_is_weak(store: LanceStore) -> None:
    vectors = store.chunks.to_arrow().column("vector").to_numpy(zero_copy_only=False)
    matrix = np.stack(vectors).astype(np.float32)
    # A direction as far as possible from every chunk: the negated mean.
    away = -matrix.mean(axis=0)
    away /= np.linalg.norm(away)
    near = matrix[0]
    weak, strong = store.search_batch(
        vectors=np.stack([away, near]), texts=["qqq", "qqq"], k=3, not_found_below=0.6
    )
    assert weak.best_similarity < 0.6 and weak.not_found
    assert strong.best_similarity > 0.99 and not strong.not_found


ENGLISH_QUESTION = "How do I replace the worn gasket of the water pump?"


def _two_languages(
    tmp_path: Path, *, german: str, english: str, mix: tuple[float, float, float] = (1, 0.8, 0.4)
) -> tuple[LanceStore, np.ndarray]:
    """A German manual whose chunks are nearest the English question's vector (`mix`: of
    its first two chunks and the English one's), and an English one whose words the
    question repeats; the question's vector."""
    s = LanceStore(folder=tmp_path / "index", background=False)
    s.ensure_embedder(embedder_id="test", dimension=DIM)
    rng = np.random.default_rng(3)
    vectors = _unit(rng, 6)
    _add(
        s,
        path="/docs/de/pumpe.pdf",
        texts=["Die Dichtung der Wasserpumpe wird nach dem Lösen der vier Schrauben getauscht."]
        + [f"Kapitel {i} beschreibt den Kessel und das Ventil." for i in range(2)],
        vectors=vectors[:3],
        languages=german,
    )
    _add(
        s,
        path="/docs/en/garden.pdf",
        texts=["The garden pump has no gasket to replace: worn water seals are glued."]
        + [f"Chapter {i} covers hoses and sprinklers." for i in range(2)],
        vectors=vectors[3:],
        languages=english,
    )
    s.refresh_fulltext_index()
    question = mix[0] * vectors[0] + mix[1] * vectors[1] + mix[2] * vectors[3]
    return s, question / np.linalg.norm(question)


def test_a_question_about_documents_of_another_language_is_searched_by_meaning(
    tmp_path: Path,
) -> None:
    store, question = _two_languages(tmp_path, german="de", english="en")
    try:
        (result,) = store.search_batch(vectors=question[None, :], texts=[ENGLISH_QUESTION], k=1)
        assert result.hits[0].chunk.path == "/docs/de/pumpe.pdf"
    finally:
        store.close()


@pytest.mark.parametrize(
    ("german", "english", "mix"),
    [("", "", (1, 0.8, 0.4)), ("de,en", "en", (1, 0.8, 0.4)), ("de", "en", (1, 0, 0.9))],
)
def test_words_still_count_where_the_languages_are_unknown_or_shared(
    tmp_path: Path, german: str, english: str, mix: tuple[float, float, float]
) -> None:
    # No document's language is known, or the German manual has English text too, or
    # only the embedding's very best chunk is German (its second is the English
    # manual's): the English words the question repeats rank the English manual first.
    store, question = _two_languages(tmp_path, german=german, english=english, mix=mix)
    try:
        (result,) = store.search_batch(vectors=question[None, :], texts=[ENGLISH_QUESTION], k=1)
        assert result.hits[0].chunk.path == "/docs/en/garden.pdf"
    finally:
        store.close()


@pytest.mark.parametrize(
    ("german", "doc_ids", "across"),
    [
        ("de", ["_docs_de_pumpe.pdf"], True),
        ("de", ["_docs_de_pumpe.pdf", "_docs_en_garden.pdf"], False),
        ("de,en", ["_docs_de_pumpe.pdf"], False),
        ("", ["_docs_de_pumpe.pdf"], False),
    ],
)
def test_a_question_is_asked_across_languages_only_where_every_document_is_written_in_others(
    tmp_path: Path, german: str, doc_ids: list[str], across: bool
) -> None:
    store, _ = _two_languages(tmp_path, german=german, english="en")
    try:
        assert store.asked_across(question=ENGLISH_QUESTION, doc_ids=doc_ids) is across
    finally:
        store.close()


def test_a_collection_of_several_languages_is_searched_over_cut_words(tmp_path: Path) -> None:
    s = LanceStore(folder=tmp_path / "index", background=False)
    s.ensure_embedder(embedder_id="test", dimension=DIM)
    vectors = _unit(np.random.default_rng(5), 4)
    _add(
        s,
        path="/docs/sk/manual.pdf",
        texts=["Po inštalácii spustite powershell a nastavte nainštalované balíky."],
        vectors=vectors[:1],
        languages="sk",
    )
    _add(
        s,
        path="/docs/de/handbuch.pdf",
        texts=["Ein anderer Text."],
        vectors=vectors[1:2],
        languages="de",
    )
    s.refresh_fulltext_index()
    try:
        # The question's "nainštalovaných" meets the page's "nainštalované" (the vector
        # points at the German page, which the words then outrank).
        (result,) = s.search_batch(
            vectors=vectors[1:2], texts=["Kde nájdem zoznam nainštalovaných balíkov?"], k=1
        )
        assert result.hits[0].chunk.path == "/docs/sk/manual.pdf"
        # The gate's lookups read whole words: "power" begins "powershell", but no chunk
        # names it.
        assert s.word_documents("power") == frozenset()
        assert s.word_documents("powershell") == frozenset({"/docs/sk/manual.pdf"})
        # Each language's documents' chunks (engine/rag/answer/translation.py reads them).
        assert s.language_shares() == {"sk": 1, "de": 1}
        # Of the documents a filtered search reaches.
        assert s.language_shares(filters=SearchFilters(folders=("/docs/de",))) == {"de": 1}
        assert s.language_shares(filters=SearchFilters(types=("txt",))) == {}
        assert s.language_shares(filters=SearchFilters(types=("PDF",))) == {"sk": 1, "de": 1}
    finally:
        s.close()


def test_empty_store_and_bad_batches(tmp_path: Path) -> None:
    s = LanceStore(folder=tmp_path / "i", background=False)
    s.ensure_embedder(embedder_id="test", dimension=DIM)
    (r,) = s.search_batch(vectors=np.zeros((1, DIM), np.float32), texts=["x"], k=3)
    assert r.hits == () and r.not_found
    with pytest.raises(ValueError):
        s.search_batch(vectors=np.zeros((2, DIM), np.float32), texts=["x"], k=3)


def test_lookups_use_scalar_indices(store: LanceStore) -> None:
    assert store.maintain_index() == "none"  # below the ANN threshold
    names = {tuple(i.columns) for i in store.chunks.list_indices()}
    assert {("chunk_id",), ("doc_id",), ("ext",)} <= names
    plan = store.chunks.search().where("chunk_id = 'x'").limit(1).explain_plan(True)
    assert "ScalarIndexQuery" in plan
    assert store.chunk(chunk_id="_docs_a_one.pdf:3") is not None
    assert store.page(doc_id="_docs_a_one.pdf", page=1) is not None


def test_index_policy_rejects_nonsense() -> None:
    with pytest.raises(ValueError):
        IndexPolicy(min_rows=0)
