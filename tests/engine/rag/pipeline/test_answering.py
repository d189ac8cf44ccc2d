"""The retrieval step's relevance gate with a reranker, and the refusal's wording."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from engine.rag.answer.refusal import MIN_CHUNKS
from engine.rag.answer.reranker import RERANK_CANDIDATES
from engine.rag.answer.semantic_scale import SemanticScale
from engine.rag.pipeline.answering import (
    NOT_FOUND_ANSWER,
    ONE_DOCUMENT_READ,
    RelevanceGate,
    gated_retrieve_batch,
    may_pass,
    refusal_text,
    still_adding_note,
)
from engine.rag.pipeline.requests import Question
from engine.rag.store.records import ChunkRecord, SearchFilters, SearchHit, SearchResult
from engine.wire import IngestProgress

TEXTS = [f"Filler passage number {i} about nothing in particular." for i in range(30)]
TEXTS[17] = "The air filter is cleaned every month with warm water."


def hit(i: int, *, path: str = "/docs/manual.pdf", page: int | None = 1) -> SearchHit:
    chunk = ChunkRecord(
        chunk_id=f"d:{i}",
        doc_id="d",
        path=path,
        ordinal=i,
        page=page,
        char_start=0,
        char_end=len(TEXTS[i]),
        text=TEXTS[i],
        text_hash=str(i),
    )
    return SearchHit(chunk=chunk, similarity=0.5, fused=1.0)


class FakeStore:
    def __init__(self, *, knows_everything: bool = False, chunks: int = 5000) -> None:
        self.asked_k: list[int] = []
        self.knows_everything = knows_everything
        self.chunks = chunks
        self.after: dict[str, str] = {}  # what follows a chunk on its page, by chunk id

    def counts(self) -> tuple[int, int]:
        return 1, self.chunks

    def word_documents(self, word: str) -> frozenset[str]:
        return self._documents(lambda t: word in t.lower())

    def form_documents(self, word: str, *, fixed: int) -> frozenset[str]:
        return self._documents(lambda t: word[:fixed] in t.lower())

    def _documents(self, holds: Callable[[str], bool]) -> frozenset[str]:
        """The one manual every hit comes from, when a text holds it."""
        found = self.knows_everything or any(holds(t) for t in TEXTS)
        return frozenset({"/docs/manual.pdf"}) if found else frozenset()

    def holds_phrase(self, phrase: str) -> bool:
        return self.knows_everything or any(phrase.lower() in t.lower() for t in TEXTS)

    def asked_across(self, *, question: str, doc_ids: Sequence[str]) -> bool:
        return False  # one English manual

    def following_text(self, *, chunks: Sequence[ChunkRecord], chars: int) -> dict[str, str]:
        return {c.chunk_id: self.after.get(c.chunk_id, "")[:chars] for c in chunks}

    def search_batch(
        self, *, vectors: np.ndarray, texts: Sequence[str], k: int, filters: SearchFilters | None
    ) -> list[SearchResult]:
        self.asked_k.append(k)
        return [
            SearchResult(hits=tuple(hit(i) for i in range(k)), best_similarity=0.5, not_found=False)
            for _ in texts
        ]


class FilterFirst:
    """A reranker that knows the filter passage answers."""

    candidates = RERANK_CANDIDATES

    def rerank(self, *, question: str, hits: Sequence[SearchHit], k: int) -> list[SearchHit]:
        return sorted(hits, key=lambda h: "filter" not in h.chunk.text)[:k]


def embed(texts: list[str]) -> np.ndarray:
    rows = np.array([[1.0, 0.0] if "filter" in t else [0.0, 1.0] for t in texts], np.float32)
    return rows


def test_with_a_reranker_the_gate_asks_for_more_candidates_and_keeps_k() -> None:
    store = FakeStore()
    retrieve = gated_retrieve_batch(store=store, embed=embed, reranker=FilterFirst())
    (gated,) = retrieve([Question(request_id="1", text="How is the air filter cleaned?", k=5)])
    assert store.asked_k == [RERANK_CANDIDATES]
    assert len(gated.hits) == 5 and gated.hits[0].chunk.ordinal == 17  # was 18th
    assert gated.found and "warm water" in gated.extract.text

    store = FakeStore()
    plain = gated_retrieve_batch(store=store, embed=embed)
    (gated,) = plain([Question(request_id="1", text="How is the air filter cleaned?", k=5)])
    assert store.asked_k == [5] and not gated.found  # the answer was not in the top 5


class PagedStore(FakeStore):
    """Two chunks a page: chunk i is on page i // 2."""

    def search_batch(
        self, *, vectors: np.ndarray, texts: Sequence[str], k: int, filters: SearchFilters | None
    ) -> list[SearchResult]:
        self.asked_k.append(k)
        hits = tuple(hit(i, page=i // 2) for i in range(k))
        return [SearchResult(hits=hits, best_similarity=0.5, not_found=False) for _ in texts]


def test_the_gate_s_quotation_goes_on_into_the_page_after_its_chunk() -> None:
    store = FakeStore()
    store.after["d:17"] = " Dry it in the sun before fitting it back."
    retrieve = gated_retrieve_batch(store=store, embed=embed, reranker=FilterFirst())
    (gated,) = retrieve([Question(request_id="1", text="How is the air filter cleaned?", k=5)])
    assert gated.found and "Dry it in the sun" in gated.extract.text
    # What a model is given stays the chunks' own text.
    assert "Dry it in the sun" not in " ".join(p.text for p in gated.passages)


def test_after_the_reranker_the_top_k_are_distinct_pages() -> None:
    retrieve = gated_retrieve_batch(store=PagedStore(), embed=embed, reranker=FilterFirst())
    (gated,) = retrieve([Question(request_id="1", text="How is the air filter cleaned?", k=5)])
    pages = [h.chunk.page for h in gated.hits]
    assert gated.hits[0].chunk.ordinal == 17 and pages == [8, 0, 1, 2, 3], pages


def test_a_refusal_offers_the_closest_sources_as_may_be_related() -> None:
    text = refusal_text(
        hits=[hit(0), hit(1), hit(2, page=4), hit(3, path="/web/page.html", page=None), hit(4)]
    )
    assert text.startswith(NOT_FOUND_ANSWER)
    assert "Not found in your documents" in text
    assert text.endswith(
        "May be related (they do not answer it): manual.pdf, page 1; manual.pdf, page 4; page.html."
    )
    assert refusal_text(hits=[]) == NOT_FOUND_ANSWER


def test_a_question_naming_what_no_document_mentions_needs_a_better_sentence() -> None:
    question = [Question(request_id="1", text="How is the air filter cleaned in Kubernetes?", k=20)]
    (open_gate,) = gated_retrieve_batch(store=FakeStore(), embed=embed, min_score=-5)(question)
    assert open_gate.found and open_gate.unknown == ("kubernetes",)
    score = open_gate.extract.score
    # Passes on its score alone, not with the unknown word's penalty on top.
    bar = score - 0.1
    (gated,) = gated_retrieve_batch(store=FakeStore(), embed=embed, min_score=bar)(question)
    assert not gated.found and gated.unknown == ("kubernetes",)
    assert "Your documents never mention: kubernetes." in refusal_text(
        hits=gated.hits, unknown=gated.unknown
    )
    store = FakeStore(knows_everything=True)
    (known,) = gated_retrieve_batch(store=store, embed=embed, min_score=bar)(question)
    assert known.found and known.unknown == ()
    # A small collection misses most words of a paraphrase: absence says nothing there
    # without a test of words for it, and with one counts only what that test does not
    # know as a word (a term no two word lists hold).
    small = FakeStore(chunks=MIN_CHUNKS - 1)
    (few,) = gated_retrieve_batch(store=small, embed=embed, min_score=bar)(question)
    assert few.found and few.unknown == ()
    asked: list[str] = []

    def known(word: str, language: str | None) -> bool:
        asked.append(word)
        return word != "kubernetes"

    read = gated_retrieve_batch(store=small, embed=embed, min_score=bar, small_ordinary=known)
    (tested,) = read(question)
    assert not tested.found and tested.unknown == ("kubernetes",)
    (paraphrase,) = read([Question(request_id="2", text="How is the air filter washed?", k=20)])
    assert paraphrase.found and "washed" in asked  # absent, but a word: nothing against it


def test_a_refusal_while_files_are_left_to_read_says_the_answer_may_come() -> None:
    running = IngestProgress(job_id="a", state="running", files_total=20, files_done=3)
    queued = IngestProgress(job_id="b", state="queued", files_total=5, files_done=0)
    note = still_adding_note(unfinished=[running, queued])
    assert note is not None and "still being added: 3 of 25 files" in note
    paused = IngestProgress(job_id="a", state="running", files_total=4, files_done=1, paused=True)
    assert "paused: 1 of 4 files" in (still_adding_note(unfinished=[paused]) or "")
    # A job whose files are all read (committing, compacting) no longer changes the answer.
    read = IngestProgress(job_id="c", state="running", files_total=2, files_done=2)
    assert still_adding_note(unfinished=[read]) is None
    # Queued, or still finding its files: no count to give yet.
    counting = IngestProgress(job_id="d", state="queued")
    assert "still being added: some files are not read yet" in (
        still_adding_note(unfinished=[running, counting]) or ""
    )
    assert still_adding_note(unfinished=[]) is None


def test_sentences_are_scored_by_the_sentence_embedder_the_search_by_the_index_one() -> None:
    asked: dict[str, list[str]] = {"index": [], "sentences": []}

    def index_embed(texts: list[str]) -> np.ndarray:
        asked["index"] += texts
        return np.tile(np.array([[0.0, 1.0]], np.float32), (len(texts), 1))

    def sentence_embed(texts: list[str]) -> np.ndarray:
        asked["sentences"] += texts
        return embed(texts)

    retrieve = gated_retrieve_batch(
        store=FakeStore(), embed=index_embed, reranker=FilterFirst(), sentence_embed=sentence_embed
    )
    (gated,) = retrieve([Question(request_id="1", text="How is the air filter cleaned?", k=5)])
    # The index embedder would score every sentence alike: the answer is the sentence
    # embedder's choice.
    assert gated.found and "warm water" in gated.extract.text
    assert asked["index"] == ["How is the air filter cleaned?"]
    assert any("warm water" in t for t in asked["sentences"])


class WeakChunks(FakeStore):
    """Every chunk scores low as a whole, as one sentence in a text about another topic."""

    def search_batch(
        self, *, vectors: np.ndarray, texts: Sequence[str], k: int, filters: SearchFilters | None
    ) -> list[SearchResult]:
        hits = tuple(
            SearchHit(chunk=hit(i).chunk, similarity=0.05, fused=1.0) for i in range(15, 20)
        )
        return [SearchResult(hits=hits, best_similarity=0.05, not_found=True) for _ in texts]


def test_a_question_of_one_document_has_its_sentences_read_however_weak_its_chunks() -> None:
    text = "How is the air filter cleaned?"
    store = WeakChunks(knows_everything=True)
    (whole,) = gated_retrieve_batch(store=store, embed=embed)([Question(request_id="1", text=text)])
    assert not whole.found  # over the collection, weak chunks spare the sentence check
    one = SearchFilters(paths=("/docs/manual.pdf",))
    (each,) = gated_retrieve_batch(store=store, embed=embed)(
        [Question(request_id="2", text=text, filters=one)]
    )
    assert each.found and "cleaned every month" in each.extract.text


class AnswerSeventh(FakeStore):
    """The chunk that states the answer ranks seventh as a whole: its document is about
    something else (a licence in a footnote, a version in a title block)."""

    def search_batch(
        self, *, vectors: np.ndarray, texts: Sequence[str], k: int, filters: SearchFilters | None
    ) -> list[SearchResult]:
        self.asked_k.append(k)
        order = [0, 1, 2, 3, 4, 5, 17, 6, 7, 8, 9]
        hits = tuple(hit(i, page=i) for i in order[:k])
        return [SearchResult(hits=hits, best_similarity=0.5, not_found=False) for _ in texts]


def test_one_document_is_read_wider_and_the_answer_given_k_led_by_the_statement() -> None:
    text = "How is the air filter cleaned?"
    one = SearchFilters(paths=("/docs/manual.pdf",))
    store = AnswerSeventh()
    gate = RelevanceGate(store=store, embed=embed)
    question = Question(request_id="1", text=text, k=3, filters=one)
    (searched,) = gate.search([question])
    assert store.asked_k == [ONE_DOCUMENT_READ] and len(searched.hits) == ONE_DOCUMENT_READ
    # The verdict chooses the passages the model is given: no generation before it.
    assert searched.one_document and not may_pass(searched)
    gated = gate.judge(question, searched)
    assert [h.chunk.ordinal for h in gated.hits] == [17, 0, 1]
    assert gated.found and gated.extract.text.startswith(
        "The air filter is cleaned every month with warm water [1]."
    )

    # A question of the whole collection reads its k, as it always did.
    store = AnswerSeventh()
    whole = gated_retrieve_batch(store=store, embed=embed)
    (gated,) = whole([Question(request_id="2", text=text, k=3)])
    assert store.asked_k == [3] and [h.chunk.ordinal for h in gated.hits] == [0, 1, 2]
    assert not gated.found


def test_a_document_that_does_not_state_it_is_refused_with_its_first_k() -> None:
    one = SearchFilters(paths=("/docs/manual.pdf",))
    store = FakeStore(knows_everything=True)
    gate = RelevanceGate(store=store, embed=embed)
    question = Question(request_id="1", text="How is the air filter cleaned?", k=3, filters=one)
    (searched,) = gate.search([question])  # chunks 0-7: filler only
    gated = gate.judge(question, searched)
    assert not gated.found and [h.chunk.ordinal for h in gated.hits] == [0, 1, 2]


def test_an_embedder_of_one_language_reads_a_translated_question_as_translated() -> None:
    def sentence_embed(texts: list[str]) -> np.ndarray:
        """An embedder of one language: the German question is like no sentence."""
        rows = []
        for t in texts:
            if "filter" in t.lower():
                rows.append([1.0, 0.0, 0.0])
            elif "luftsieb" in t.lower():
                rows.append([0.0, 0.0, 1.0])
            else:
                rows.append([0.0, 1.0, 0.0])
        return np.array(rows, np.float32)

    german = "Wie reinige ich das Luftsieb?"
    asked = [Question(request_id="1", text=german, k=5)]
    translated = [
        Question(request_id="1", text=german, k=5, translated="How is the air filter cleaned?")
    ]
    # The bundled MiniLM's scale: it reads no other language.
    one_language = gated_retrieve_batch(
        store=FakeStore(), embed=embed, reranker=FilterFirst(), sentence_embed=sentence_embed
    )
    assert not one_language(asked)[0].found
    (found,) = one_language(translated)
    assert found.found and "warm water" in found.extract.text
    # An embedder that reads both languages reads the question as asked.
    many = gated_retrieve_batch(
        store=FakeStore(),
        embed=embed,
        reranker=FilterFirst(),
        sentence_embed=sentence_embed,
        sentence_scale=lambda: SemanticScale(unrelated=0.2, translated=0.9),
    )
    assert not many(translated)[0].found
