"""The real batch functions the workers run: one embedding call and one batched search
for a retrieval batch; one batched executor run (or extractive quotes) for a
generation batch. engine/core.py is to build a Pipeline from these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.answer.extractive import NOT_FOUND_TEXT, ExtractiveAnswerer
from engine.answer.passages import Passage
from engine.errors import StaleVectorsError
from engine.pipeline.requests import Piece, Question
from engine.pipeline.workers import DONE, GenerationJob, _Done
from engine.store.records import SearchFilters, SearchHit, SearchResult
from engine.store.search import RRF_K

if TYPE_CHECKING:
    from engine.answer.generative import GenerativeAnswerer
    from engine.store.lance_store import LanceStore

Embed = Callable[[list[str]], np.ndarray]
# Vectors with the id of the embedder that made them (an index may swap embedders
# between a question's embedding and its search: engine/ingest/embedder_switch.py).
TaggedEmbed = Callable[[list[str]], tuple[np.ndarray, str]]
STALE_TRIES = 3  # a swap per try would take longer than any question waits
Stream = Iterator[tuple[str, "str | Piece | _Done"]]


def store_retrieve_batch(
    *, store: LanceStore, embed: Embed, tagged: TaggedEmbed | None = None
) -> Callable[[Sequence[Question]], list[SearchResult]]:
    """Embed the batch's questions in one call and search them in one search_batch.
    Questions with different k or filters share the call at the largest k and are
    cut to their own k; a question's `payload`, when a SearchFilters, filters it
    (questions with different filters are searched in separate calls). A follow-up
    of a conversation (`Question.conversation`) is searched history-aware: its
    vector blended with the earlier turn's, the pages cited before favoured.
    With `tagged`, the questions are embedded by it and searched only in the index
    of the embedder that made them: embedded again when it was swapped meanwhile."""

    def retrieve(questions: Sequence[Question]) -> list[SearchResult]:
        if not questions:
            return []
        if tagged is None:
            return search(questions, embed=embed, made_by=None)
        for attempt in range(STALE_TRIES):
            made: list[str] = []
            try:
                return search(questions, embed=_noting(tagged, made), made_by=made)
            except StaleVectorsError:
                if attempt == STALE_TRIES - 1:
                    raise
        raise AssertionError("unreachable")

    def search(
        questions: Sequence[Question], *, embed: Embed, made_by: list[str] | None
    ) -> list[SearchResult]:
        vectors = _blended_vectors(questions=questions, embed=embed)
        if made_by is not None and len(set(made_by)) > 1:  # swapped between two calls
            raise StaleVectorsError("the embedder was swapped while the batch was embedded")
        groups: dict[SearchFilters | None, list[int]] = {}
        for i, q in enumerate(questions):
            key = q.payload if isinstance(q.payload, SearchFilters) else None
            groups.setdefault(key, []).append(i)
        out: list[SearchResult | None] = [None] * len(questions)
        for filters, rows in groups.items():
            k = max(_search_k(questions[i]) for i in rows)
            results = store.search_batch(
                vectors=vectors[rows],
                texts=[questions[i].text for i in rows],
                k=k,
                filters=filters,
                **({"made_by": made_by[0]} if made_by else {}),
            )
            for i, result in zip(rows, results, strict=True):
                hits = _favour_cited(hits=result.hits, question=questions[i])
                out[i] = SearchResult(
                    hits=hits[: questions[i].k],
                    best_similarity=result.best_similarity,
                    not_found=result.not_found,
                )
        return [r for r in out if r is not None]

    return retrieve


def _noting(tagged: TaggedEmbed, made: list[str]) -> Embed:
    """`tagged` as a plain Embed, noting in `made` which embedder made each call's vectors."""

    def embed(texts: list[str]) -> np.ndarray:
        vectors, made_by = tagged(texts)
        made.append(made_by)
        return vectors

    return embed


# A follow-up's candidates: more than its k, so that a cited page ranked lower can rise.
_FOLLOW_UP_CANDIDATES = 12
# Bonuses in reciprocal-rank-fusion units (a first rank in one list is 1/61).
_SAME_PAGE_BONUS = 0.2 / (RRF_K + 1)
_SAME_FILE_BONUS = 0.2 / (RRF_K + 1)


def _search_k(question: Question) -> int:
    if getattr(question.conversation, "cited", None):
        return max(question.k, _FOLLOW_UP_CANDIDATES)
    return question.k


def _blended_vectors(*, questions: Sequence[Question], embed: Embed) -> np.ndarray:
    """The questions' embeddings, a follow-up's blended with the earlier turn's texts
    (weighted below its own) and normalised again: cosine similarity stays meaningful."""
    vectors = np.array(embed([q.text for q in questions]), dtype=np.float32)
    extra = [
        (i, text, weight)
        for i, q in enumerate(questions)
        for text, weight in getattr(q.conversation, "blend", ())
    ]
    if not extra:
        return vectors
    more = np.asarray(embed([text for _, text, _ in extra]), dtype=np.float32)
    for (i, _, weight), vector in zip(extra, more, strict=True):
        vectors[i] += weight * vector
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def _favour_cited(*, hits: Sequence[SearchHit], question: Question) -> list[SearchHit]:
    """A follow-up usually asks about the place the last answer came from: passages of
    a page (then a file) cited last turn move up, by a bonus a better match outranks."""
    cited = getattr(question.conversation, "cited", None)
    if not cited:
        return list(hits)
    files = {path for path, _ in cited}

    def score(hit: SearchHit) -> float:
        c = hit.chunk
        if (c.path, c.page) in cited:
            return hit.fused + _SAME_PAGE_BONUS
        return hit.fused + (_SAME_FILE_BONUS if c.path in files else 0.0)

    return sorted(hits, key=score, reverse=True)


def passages_of(hits: Sequence[SearchHit]) -> list[Passage]:
    return [
        Passage(index=i + 1, text=h.chunk.text, path=h.chunk.path, page=h.chunk.page)
        for i, h in enumerate(hits)
    ]


def hits_of(result: Any) -> list[SearchHit]:
    if isinstance(result, SearchResult):
        return [] if result.not_found else list(result.hits)
    return list(result or [])


def extractive_generate_batch(*, embed: Embed) -> Callable[[Sequence[GenerationJob]], Stream]:
    """Quotes the best sentences (no language model), one piece per request."""
    answerer = ExtractiveAnswerer(embed=embed)

    def generate(jobs: Sequence[GenerationJob]) -> Stream:
        for job in jobs:
            if job.cancel.is_set():
                continue
            hits = hits_of(job.hits)
            answer = answerer.answer(question=job.question.text, passages=passages_of(hits))
            yield job.request_id, answer.text if answer.found else NOT_FOUND_TEXT
            yield job.request_id, DONE

    return generate


def executor_generate_batch(
    *, answerer: GenerativeAnswerer, temperature: float = 0.0
) -> Callable[[Sequence[GenerationJob]], Stream]:
    """One batched prefill + decode on the answerer's layer-streaming executor for the
    whole batch (left-padded rows; a finished or cancelled row leaves the batch)."""

    def passages(job: GenerationJob) -> list[Passage]:
        return passages_of(hits_of(job.hits))

    def run(
        jobs: Sequence[GenerationJob],
        incoming: Callable[[], Sequence[GenerationJob]] | None = None,
    ) -> Stream:
        # Nothing relevant was found: say so rather than let the model invent an
        # answer from no sources (engine/core.py's relevance gate does the same).
        unanswerable = [j for j in jobs if isinstance(j.hits, SearchResult) and j.hits.not_found]
        for job in unanswerable:
            yield job.request_id, NOT_FOUND_TEXT
            yield job.request_id, DONE
        skipped = {j.request_id for j in unanswerable}
        yield from generate_rows(
            answerer=answerer,
            jobs=[j for j in jobs if j.request_id not in skipped],
            passages=passages,
            temperature=temperature,
            incoming=incoming,
        )

    return run


def generate_rows(
    *,
    answerer: GenerativeAnswerer,
    jobs: Sequence[GenerationJob],
    passages: Callable[[GenerationJob], list[Passage]],
    temperature: float = 0.0,
    incoming: Callable[[], Sequence[GenerationJob]] | None = None,
) -> Stream:
    """The model's answers to `jobs` as one batch: each row's text as it decodes (a
    Piece counting the tokens behind it), then DONE for that row. `incoming()`, asked
    at each decode step, gives jobs that join the batch there."""
    from engine.answer.generative import IncrementalDetokenizer

    rows: list[GenerationJob] = []  # every job seen, in the executor's numbering
    detok: list[IncrementalDetokenizer] = []
    pending: list[int] = []  # tokens decoded but not yet released as text, per row
    prompt_len: list[int] = []  # told with a row's first piece, then 0

    def admit(new: Sequence[GenerationJob]) -> list[Any]:
        rows.extend(new)
        detok.extend(IncrementalDetokenizer(tokenizer=answerer.tokenizer) for _ in new)
        pending.extend(0 for _ in new)
        made = [_request(answerer=answerer, job=job, passages=passages) for job in new]
        prompt_len.extend(len(r.prompt_ids) for r in made)
        return made

    requests = admit(jobs)
    if not requests:
        return
    events = answerer.stream_batch(
        requests=requests,
        temperature=temperature,
        cancelled=lambda i: rows[i].cancel.is_set(),
        incoming=(lambda: admit(incoming())) if incoming is not None else None,
    )
    try:
        for event in events:
            i = event.request
            job = rows[i]
            pending[i] += 1
            text = detok[i].add(event.token_id)
            if event.finished:
                text += detok[i].flush()
            if text or event.finished:
                yield (
                    job.request_id,
                    Piece(text=text, tokens=pending[i], prompt_tokens=prompt_len[i]),
                )
                pending[i] = prompt_len[i] = 0
            if event.finished:
                yield job.request_id, DONE
    finally:
        events.close()


def _request(
    *,
    answerer: GenerativeAnswerer,
    job: GenerationJob,
    passages: Callable[[GenerationJob], list[Passage]],
) -> Any:
    """A job as the executor's request: a follow-up's rewrite, or an answer (to the
    question as asked, with the conversation's earlier turns, for a follow-up)."""
    q = job.question
    conversation = q.conversation
    history = tuple(getattr(conversation, "history", ()))
    if q.rewrite:
        return answerer.rewrite_request(
            question=getattr(conversation, "question", q.text), history=history
        )
    return answerer.prompt_request(
        question=getattr(conversation, "question", q.text),
        passages=passages(job),
        max_new_tokens=q.max_new_tokens,
        history=history,
    )
