"""The engine's batch functions: core's relevance gate on every retrieved question,
then the model (or the extractive quotes) for those that pass.

The gate is the one `Engine.ask_stream` always had: a model handed unrelated passages
invents an answer, so a question is answered only when its best chunk is similar
enough (NOT_FOUND_SIMILARITY) and the extractive answerer finds a sentence that
answers it. The check runs in the retrieval worker, right after the batch's search
(RelevanceGate: `search`, then `judge` per question); a question that fails it
finishes there (`settled`) and is answered by no model.

With a model, reading the sentences takes time the first token would wait for (most
of a follow-up's retrieval: the prefix cache makes its prefill short). So a question
the gate has to read (`may_pass`) goes to the generation queue as soon as it is
searched, with the hits the verdict keeps (the prompt is the same), and the model may
start on it; what it writes is held until the verdict, and a refusal stops it
(engine/rag/pipeline/workers.py, `judge`; RequestHandle.hold / release).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import PurePath
from typing import TYPE_CHECKING

from engine.rag.answer.extractive import (
    BEYOND_CHARS,
    DEFAULT_MIN_SCORE,
    NOT_FOUND_TEXT,
    ExtractiveAnswer,
    ExtractiveAnswerer,
)
from engine.rag.answer.passages import Passage
from engine.rag.answer.refusal import MIN_CHUNKS, held, refused, unknown_words
from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.answer.sentence_memo import SentenceMemo
from engine.rag.answer.word_languages import Ordinary
from engine.rag.pipeline.adapters import (
    Embed,
    Stream,
    TaggedEmbed,
    generate_rows,
    passages_of,
    store_retrieve_batch,
)
from engine.rag.pipeline.page_order import distinct_pages_first
from engine.rag.pipeline.requests import Piece, Question
from engine.rag.pipeline.stages import DONE, GenerationJob, Incoming
from engine.rag.store.records import SearchHit
from engine.rag.store.search import ACROSS_BEST, NOT_FOUND_SIMILARITY

if TYPE_CHECKING:
    from engine.rag.answer.generative import GenerativeAnswerer
    from engine.rag.answer.reranker import CandidateRanker
    from engine.rag.store.lance_store import LanceStore
    from engine.wire import IngestProgress


NOT_FOUND_ANSWER = (
    "Not found in your documents: nothing in them answers this, so I will not guess. "
    "Try other words, or add the documents that cover it."
)
_RELATED = 3  # closest sources named in a refusal
# A question of one document (ask each) is asked of a text mostly about something
# else: the passage that states its answer (a footnote, a title block) seldom ranks
# among the document's first k as a whole chunk. The gate reads this many of the
# document's passages, and the answer is given the k led by the one whose sentence
# answers. Reading more costs sentence embeddings; on the set's tuning half 5 to 12
# found the same statements (docs/benchmarks-history.md, "Ask each document").
ONE_DOCUMENT_READ = 8


def refusal_text(*, hits: Sequence[SearchHit], unknown: Sequence[str] = ()) -> str:
    """The refusal, naming the closest sources as "may be related": offered to look
    at, not quoted as an answer (they did not pass the gate); and the question's
    words no document holds, which tell the user why."""
    names: list[str] = []
    for hit in hits:
        name = PurePath(hit.chunk.path.replace("\\", "/")).name
        if hit.chunk.page is not None:
            name += f", page {hit.chunk.page}"
        if name not in names:
            names.append(name)
        if len(names) == _RELATED:
            break
    text = NOT_FOUND_ANSWER
    if unknown:
        text += f"\n\nYour documents never mention: {', '.join(unknown)}."
    if names:
        text += f"\n\nMay be related (they do not answer it): {'; '.join(names)}."
    return text


def still_adding_note(*, unfinished: Sequence[IngestProgress]) -> str | None:
    """What a refusal adds while ingestion jobs have files left to read: the answer
    may be in a file not read yet (a question asked right after adding a folder).
    A job not started, or still finding its files, has no count yet."""
    left = [p for p in unfinished if p.files_total == 0 or p.files_done < p.files_total]
    if not left:
        return None
    state = "paused" if all(p.paused for p in left) else "still being added"
    if all(p.files_total for p in left):
        read = (
            f"{sum(p.files_done for p in left)} of {sum(p.files_total for p in left)} "
            "files read so far"
        )
    else:
        read = "some files are not read yet"
    return f"Documents are {state}: {read}, so the answer may be in one not read yet. " + (
        "Ask again when they are in."
    )


@dataclass(frozen=True, kw_only=True)
class GatedHits:
    """One question's retrieval, with the relevance gate's verdict."""

    hits: tuple[SearchHit, ...]
    extract: ExtractiveAnswer | None  # None: no chunk was similar enough to check
    unknown: tuple[str, ...] = ()  # the question's words no chunk holds
    history_changed: bool = False  # SearchResult.history_changed

    @property
    def found(self) -> bool:
        return self.extract is not None and self.extract.found

    @property
    def passages(self) -> list[Passage]:
        return passages_of(self.hits)


@dataclass(frozen=True, kw_only=True)
class Searched:
    """One question's search, before the relevance gate's verdict: its hits are the
    ones the verdict keeps, so a prompt made from them is the answer's prompt."""

    hits: tuple[SearchHit, ...]
    large: bool  # of MIN_CHUNKS chunks or more: absent words read as refusal.py says
    leaned: float = 0.0  # how much the conversation's earlier turn weighed (SearchResult)
    history_changed: bool = False  # SearchResult.history_changed
    # A question of one document: `hits` are the passages the gate reads, more than the
    # answer is given (ONE_DOCUMENT_READ); the verdict picks which.
    one_document: bool = False

    @property
    def passages(self) -> list[Passage]:
        return passages_of(self.hits)


def settled(hits: GatedHits) -> bool:
    """The pipeline's `Stages.settled`: nothing relevant, nothing to generate."""
    return not hits.found


def may_pass(searched: Searched) -> bool:
    """The pipeline's `Stages.speculate`: the gate has to read this question's sentences,
    so its verdict takes time, and the model may start on the question meanwhile.
    A question nothing relates to is refused at once (no sentence read). Not a
    question of one document: its verdict chooses the passages the model is given."""
    return not searched.one_document and _checked(searched.hits)


def _checked(hits: Sequence[SearchHit], *, one_document: bool = False) -> bool:
    # Sentence-level scores separate "answered here" from "unrelated" far better
    # than whole-chunk similarity does; the similarity only spares the check for
    # questions nothing relates to. Not for a question of one document (ask each):
    # its answer is one sentence in a text about something else, whose chunks all
    # score low as a whole.
    if one_document:
        return bool(hits)
    return bool(hits) and max(h.similarity for h in hits) >= NOT_FOUND_SIMILARITY


class RelevanceGate:
    """Retrieval in two steps, so that the model can start on a question while its
    verdict is read (engine/rag/pipeline/workers.py, `judge`): `search` is the batch's one
    embedding call and batched search (and the reranker), `judge` the gate on one
    question's hits, which reads the sentences of its passages."""

    def __init__(
        self,
        *,
        store: LanceStore,
        embed: Embed,
        tagged: TaggedEmbed | None = None,
        reranker: CandidateRanker | None = None,
        min_score: float = DEFAULT_MIN_SCORE,
        memo: SentenceMemo | None = None,
        sentence_embed: Embed | None = None,
        sentence_scale: Callable[[], SemanticScale] | None = None,
        ordinary_word: Ordinary | None = None,
        small_ordinary: Ordinary | None = None,
    ) -> None:
        """`sentence_embed` scores the passages' sentences (default: `embed`): the
        engine gives the bundled embedder's when another one, English only, indexes
        the collection (engine/rag/ingest/embedder.py, `scores_sentences`);
        `sentence_scale` puts its cosines on the scale the gate was set on
        (engine/rag/answer/semantic_scale.py); `ordinary_word` tells a word of some
        language from a name (engine/rag/answer/refusal.py), and `small_ordinary` does
        in a collection under MIN_CHUNKS chunks (None: no absent word counts there)."""
        self._ordinary = ordinary_word
        self._small_ordinary = small_ordinary
        self._sentence_scale = sentence_scale or (lambda: IDENTITY)
        self._store = store
        self._search = store_retrieve_batch(store=store, embed=embed, tagged=tagged)
        self._reranker = reranker
        self._min_score = min_score
        self._extractive = ExtractiveAnswerer(
            embed=sentence_embed or embed, min_score=min_score, memo=memo, scale=sentence_scale
        )

    def search(self, questions: Sequence[Question]) -> list[Searched]:
        store, reranker = self._store, self._reranker
        asked = [replace(q, k=_read(q)) if _read(q) > q.k else q for q in questions]
        if reranker is not None:
            asked = [replace(q, k=max(q.k, reranker.candidates)) for q in asked]
        results = self._search(asked)
        large = bool(questions) and store.counts()[1] >= MIN_CHUNKS
        out: list[Searched] = []
        for question, result in zip(questions, results, strict=True):
            hits = tuple(result.hits)
            if reranker is not None:
                # The ranker's order, then distinct pages first within it; a follow-up
                # is read with the earlier question it leans on, as the gate reads it.
                asked_text = _gate_text(question, leaned=result.leaned)
                ranked = reranker.rerank(question=asked_text, hits=hits, k=len(hits))
                hits = tuple(distinct_pages_first(ranked)[: _read(question)])
            out.append(
                Searched(
                    hits=hits,
                    large=large,
                    leaned=result.leaned,
                    history_changed=result.history_changed,
                    one_document=_one_document(question),
                )
            )
        return out

    def unknown(self, *, question: str, searched: Searched) -> tuple[str, ...]:
        """The question's words no chunk of the collection holds (engine/rag/answer/refusal.py),
        read with the small collection's test under MIN_CHUNKS chunks, and not at all
        there without one."""
        ordinary = self._ordinary if searched.large else self._small_ordinary
        if not searched.large and (ordinary is None or not searched.hits):
            return ()
        store = self._store
        answering = frozenset(h.chunk.path for h in searched.hits)
        return tuple(
            unknown_words(
                question=question,
                texts=[h.chunk.text for h in searched.hits],
                holds=lambda word: held(store.word_documents(word), answering=answering),
                holds_form=lambda word, fixed: held(
                    store.form_documents(word, fixed=fixed), answering=answering
                ),
                holds_phrase=self._store.holds_phrase,
                ordinary=ordinary,
            )
        )

    def judge(self, question: Question, searched: Searched) -> GatedHits:
        hits, min_score = searched.hits, self._min_score
        extract = None
        unknown: tuple[str, ...] = ()
        one_document = _one_document(question)
        if _checked(hits, one_document=one_document):
            asked = _gate_text(question, leaned=searched.leaned)
            read = question.text
            if question.translated and not self._sentence_scale().reads_across():
                # An embedder of one language reads the question only as translated into
                # the documents' (engine/rag/answer/translation.py). One that reads both
                # reads it as asked: taking the better of the two let through unanswerable
                # questions (docs/benchmarks.md).
                asked = read = question.translated
            across = self._store.asked_across(
                question=read, doc_ids=[h.chunk.doc_id for h in hits[:ACROSS_BEST]]
            )
            following = self._store.following_text(
                chunks=[h.chunk for h in hits], chars=BEYOND_CHARS
            )
            extract = self._extractive.answer(
                question=asked, passages=passages_of(hits, following=following), across=across
            )
            if one_document and len(hits) > question.k:
                hits = _led_by(hits, extract=extract, k=question.k)
                if extract.found:
                    # Read again as the answer is given them: the [n] markers number these.
                    extract = self._extractive.answer(
                        question=asked,
                        passages=passages_of(hits, following=following),
                        across=across,
                    )
            unknown = self.unknown(question=question.text, searched=searched)
            if extract.found and refused(score=extract.score, unknown=unknown, min_score=min_score):
                extract = ExtractiveAnswer(
                    text=NOT_FOUND_TEXT, used_indices=[], found=False, score=extract.score
                )
        return GatedHits(
            hits=hits,
            extract=extract,
            unknown=unknown,
            history_changed=searched.history_changed,
        )


def _one_document(question: Question) -> bool:
    filters = question.filters
    return filters is not None and len(filters.paths) == 1


def _read(question: Question) -> int:
    """How many passages the gate reads for `question` (its k, or more of one document)."""
    return max(question.k, ONE_DOCUMENT_READ) if _one_document(question) else question.k


def _led_by(
    hits: Sequence[SearchHit], *, extract: ExtractiveAnswer, k: int
) -> tuple[SearchHit, ...]:
    """The k passages an answer of one document is given: the one whose sentence answers
    (`extract`, read over every hit) first, then the best of the rest in their order.
    Without an answer sentence, the first k (what a refusal names as related)."""
    if not extract.found or not 1 <= extract.passage <= len(hits):
        return tuple(hits[:k])
    lead = hits[extract.passage - 1]
    return (lead, *[h for h in hits if h is not lead][: k - 1])


def gated_retrieve_batch(
    *,
    store: LanceStore,
    embed: Embed,
    tagged: TaggedEmbed | None = None,
    reranker: CandidateRanker | None = None,
    min_score: float = DEFAULT_MIN_SCORE,
    memo: SentenceMemo | None = None,
    sentence_embed: Embed | None = None,
    sentence_scale: Callable[[], SemanticScale] | None = None,
    ordinary_word: Ordinary | None = None,
    small_ordinary: Ordinary | None = None,
) -> Callable[[Sequence[Question]], list[GatedHits]]:
    """One embedding call and one batched search for the batch (per-question k and
    folder / type filters, see store_retrieve_batch), then the gate per question:
    RelevanceGate's two steps in one call. With a `reranker`, each question's top
    `reranker.candidates` are re-ordered by it (a cross-encoder, or the language
    model) and cut to its k. A question naming
    words no chunk holds needs a better answer sentence to pass
    (engine/rag/answer/refusal.py). `memo` keeps the sentence vectors the gate computed
    (engine/rag/answer/sentence_memo.py)."""
    gate = RelevanceGate(
        store=store,
        embed=embed,
        tagged=tagged,
        reranker=reranker,
        min_score=min_score,
        memo=memo,
        sentence_embed=sentence_embed,
        sentence_scale=sentence_scale,
        ordinary_word=ordinary_word,
        small_ordinary=small_ordinary,
    )

    def retrieve(questions: Sequence[Question]) -> list[GatedHits]:
        searched = gate.search(questions)
        return [gate.judge(q, s) for q, s in zip(questions, searched, strict=True)]

    return retrieve


# A question judged standalone is checked with the earlier question too once the
# earlier turn weighs at least this much in its ranking (`lean`).
GATE_LEAN = 0.5


def _gate_text(question: Question, *, leaned: float = 0.0) -> str:
    """What the gate (and an extractive answer) checks the passages against: a
    follow-up's words alone ("and the second one?") match no sentence, so the earlier
    question it leans on goes first; a question judged standalone too when the
    earlier question helped its search (`leaned`), and alone otherwise."""
    conversation = question.conversation
    context = getattr(conversation, "context", "")
    if not getattr(conversation, "dependent", True) and leaned < GATE_LEAN:
        return question.text
    return f"{context} {question.text}" if context else question.text


def gated_generate_batch(
    *, answerer: GenerativeAnswerer | None, model_lock: threading.Lock
) -> Callable[[Sequence[GenerationJob]], Stream]:
    """The model's answers for a batch of questions that passed the gate, as one
    batched run; without a model, each question's extractive quote. `model_lock` is
    the engine's: profiling samples and answers without retrieval take it too, so
    nothing else runs the model while a batch does."""

    def extractive(jobs: Sequence[GenerationJob], incoming: Incoming | None = None) -> Stream:
        # Quotes take no time to write: nothing joins, the next batch takes the rest.
        for job in jobs:
            if job.cancel.is_set():
                continue
            gated = job.hits
            text = gated.extract.text if isinstance(gated, GatedHits) and gated.extract else ""
            yield job.request_id, Piece(text=text)
            yield job.request_id, DONE

    def generative(jobs: Sequence[GenerationJob], incoming: Incoming | None = None) -> Stream:
        assert answerer is not None
        # A model server runs its own batches: nothing here to keep from running twice.
        lock = contextlib.nullcontext() if getattr(answerer, "remote", False) else model_lock
        with lock:
            yield from generate_rows(
                answerer=answerer,
                jobs=[j for j in jobs if not j.cancel.is_set()],
                passages=lambda job: (
                    job.hits.passages if isinstance(job.hits, GatedHits | Searched) else []
                ),
                incoming=incoming,
            )

    return extractive if answerer is None else generative
