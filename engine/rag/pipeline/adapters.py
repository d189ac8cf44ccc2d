"""The real batch functions the workers run: one embedding call and one batched search
for a retrieval batch; one batched executor run (or extractive quotes) for a
generation batch. engine/service/core.py is to build a Pipeline from these.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

import numpy as np

from engine.errors import StaleVectorsError
from engine.rag.answer.conversation import lean
from engine.rag.answer.extractive import NOT_FOUND_TEXT, ExtractiveAnswerer
from engine.rag.answer.passages import Passage
from engine.rag.pipeline.page_order import distinct_pages_first
from engine.rag.pipeline.requests import Piece, Question
from engine.rag.pipeline.stages import DONE, GenerationJob, RowFailed, Stream
from engine.rag.store.records import SearchFilters, SearchHit, SearchResult
from engine.rag.store.search import RRF_K

if TYPE_CHECKING:
    from engine.rag.answer.generative import GenerativeAnswerer
    from engine.rag.store.lance_store import LanceStore
    from engine.runtime.executor.generate import GenerationRequest

Embed = Callable[[list[str]], np.ndarray]
# Vectors with the id of the embedder that made them (an index may swap embedders
# between a question's embedding and its search: engine/rag/ingest/embedder_switch.py).
TaggedEmbed = Callable[[list[str]], tuple[np.ndarray, str]]
STALE_TRIES = 3  # a swap per try would take longer than any question waits


def store_retrieve_batch(
    *, store: LanceStore, embed: Embed, tagged: TaggedEmbed | None = None
) -> Callable[[Sequence[Question]], list[SearchResult]]:
    """Embed the batch's questions in one call and search them in one search_batch.
    Questions with different k or filters share the call at the largest k and are
    cut to their own k; a question's `filters` filter it
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
            groups.setdefault(q.filters, []).append(i)
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
                hits, leaned = _fused_with_also(
                    store=store,
                    embed=embed,
                    question=questions[i],
                    result=result,
                    k=k,
                    filters=filters,
                    made_by=made_by,
                )
                hits = _fused_with_translation(
                    store=store,
                    embed=embed,
                    question=questions[i],
                    hits=hits,
                    k=k,
                    filters=filters,
                    made_by=made_by,
                )
                hits = _favour_cited(hits=hits, question=questions[i], scale=leaned)
                hedged = getattr(questions[i].conversation, "hedged", False)
                if hedged and result.hits:
                    hits = _keeping(hits=hits, own=result.hits[0], within=_HEDGED_KEEPS_OWN)
                k_own = questions[i].k
                kept = distinct_pages_first(hits)[:k_own]
                out[i] = SearchResult(
                    hits=tuple(kept),
                    best_similarity=result.best_similarity,
                    not_found=result.not_found,
                    leaned=leaned if questions[i].conversation is not None else 0.0,
                    # The earlier turn moved a standalone-judged question's hits.
                    history_changed=hedged
                    and _ids(kept) != _ids(distinct_pages_first(result.hits)[:k_own]),
                )
        return [r for r in out if r is not None]

    return retrieve


def _ids(hits: Sequence[SearchHit]) -> list[str]:
    return [h.chunk.chunk_id for h in hits]


def _noting(tagged: TaggedEmbed, made: list[str]) -> Embed:
    """`tagged` as a plain Embed, noting in `made` which embedder made each call's vectors."""

    def embed(texts: list[str]) -> np.ndarray:
        vectors, made_by = tagged(texts)
        made.append(made_by)
        return vectors

    return embed


# A follow-up's candidates in each of its searches: more than its k, so that a page
# near the one quoted, ranked lower, can rise (tuned set: 17/23 at 20, 19/23 at 30).
_FOLLOW_UP_CANDIDATES = 30
# Bonuses in reciprocal-rank-fusion units (a first rank in one list is 1/61).
_SAME_PAGE_BONUS = 0.2 / (RRF_K + 1)
_SAME_FILE_BONUS = 0.2 / (RRF_K + 1)
# A bonus for each file in proportion to its share of the last answer's sources, and
# for pages within _NEAR_PAGES of a page the last answer quoted (its answer is often
# the next page). These and the weights of a follow-up's own search and of its other
# searches in their fusion were swept on the tuned set of `ragdoll bench conversation`
# (docs/benchmarks-history.md, "Follow-ups over real documents", first rounds): every
# combination of 0.5-1.0, 0-0.5 and 0-0.3 found 17-18 of 23.
_FILE_PRIOR = 0.5 / (RRF_K + 1)
_NEAR_PAGES = 2
_NEAR_QUOTED_BONUS = 0.3 / (RRF_K + 1)
_OWN_WEIGHT = 1.0
_ALSO_WEIGHT = 1.0
# Near a page the last answer cited without quoting it: a weaker sign than a quoted one.
_NEAR_CITED_BONUS = 0.15 / (RRF_K + 1)
# A question judged standalone keeps its own best match first whatever the history
# adds below it (tuning sets: the first questions' and quality questions' hit@1 held,
# 17 -> 18 and 38 -> 39 against leaving it anywhere or within 2 or 3; a follow-up the
# detector misses still gets the earlier subject's passages at ranks 2-3).
_HEDGED_KEEPS_OWN = 1


# A translated question's candidates in each of its two searches, so that a page one of
# them ranks below its k can rise in the fusion (as measured: docs/benchmarks.md).
_TRANSLATED_CANDIDATES = 20


def _search_k(question: Question) -> int:
    if getattr(question.conversation, "cited", None):
        return max(question.k, _FOLLOW_UP_CANDIDATES)
    if question.translated:
        return max(question.k, _TRANSLATED_CANDIDATES)
    return question.k


def _fused_with_also(
    *,
    store: LanceStore,
    embed: Embed,
    question: Question,
    result: SearchResult,
    k: int,
    filters: SearchFilters | None,
    made_by: list[str] | None = None,
) -> tuple[list[SearchHit], float]:
    """A follow-up's ranking fused (reciprocal rank) with its other searches
    (FollowUp.also: the earlier question spelled out, the quoted passage): each
    catches follow-ups the others miss, so they weigh the same as its own. A question
    judged standalone (`hedged`) was searched as asked; its history-aware searches
    count by `lean` (the first of them against its own search's best similarity),
    and not at all when the earlier question does not help: its own ranking as it was.
    Returns the ranking and how much the history weighed (1 for a follow-up).
    `made_by` (the tagged path) notes these embeddings' embedder too: a swap since
    the first search is StaleVectorsError, and the batch is searched again."""
    hits = result.hits
    also = getattr(question.conversation, "also", ())
    if not also:
        return list(hits), 1.0
    hedged = getattr(question.conversation, "hedged", False)
    asked = getattr(question.conversation, "question", question.text)
    items: list[tuple[str, tuple[tuple[str, float], ...]]] = [(asked, a.blend) for a in also]
    texts = [a.text for a in also]
    vectors = _embed_blended(items=items, embed=embed)
    if made_by is not None and len(set(made_by)) > 1:
        raise StaleVectorsError("the embedder was swapped while the follow-up was embedded")
    results = store.search_batch(
        vectors=vectors,
        texts=texts,
        k=k,
        filters=filters,
        **({"made_by": made_by[0]} if made_by else {}),
    )
    weight = _ALSO_WEIGHT
    leaned = 1.0
    if hedged:
        leaned = lean(alone=result.best_similarity, with_history=results[0].best_similarity)
        if leaned <= 0.0:
            return list(hits), 0.0
        weight *= leaned
    lists = [(list(hits), _OWN_WEIGHT)] + [(list(r.hits), weight) for r in results]
    return _reciprocal_rank(lists), leaned


def _reciprocal_rank(lists: Sequence[tuple[list[SearchHit], float]]) -> list[SearchHit]:
    """Rankings (each with its weight) fused by reciprocal rank, best first; a chunk in
    several keeps its best similarity."""
    score: dict[str, float] = {}
    best: dict[str, SearchHit] = {}
    for ranked, weight in lists:
        for rank, hit in enumerate(ranked):
            cid = hit.chunk.chunk_id
            score[cid] = score.get(cid, 0.0) + weight / (RRF_K + rank + 1)
            if cid not in best or hit.similarity > best[cid].similarity:
                best[cid] = hit
    order = sorted(score, key=lambda cid: -score[cid])
    return [replace(best[cid], fused=score[cid]) for cid in order]


def _fused_with_translation(
    *,
    store: LanceStore,
    embed: Embed,
    question: Question,
    hits: list[SearchHit],
    k: int,
    filters: SearchFilters | None,
    made_by: list[str] | None = None,
) -> list[SearchHit]:
    """A question's ranking fused (reciprocal rank, the two weighed alike) with its
    translation's (engine/rag/answer/translation.py): the translation's words meet the
    pages' in the full-text search, where the question's own meet none, and the
    question's own vector keeps what it found. `made_by` as in `_fused_with_also`."""
    if not question.translated:
        return hits
    vectors = np.asarray(embed([question.translated]), dtype=np.float32)
    if made_by is not None and len(set(made_by)) > 1:
        raise StaleVectorsError("the embedder was swapped while the translation was embedded")
    (result,) = store.search_batch(
        vectors=vectors,
        texts=[question.translated],
        k=k,
        filters=filters,
        **({"made_by": made_by[0]} if made_by else {}),
    )
    return _reciprocal_rank([(hits, 1.0), (list(result.hits), 1.0)])


def _embed_blended(
    *, items: Sequence[tuple[str, Sequence[tuple[str, float]]]], embed: Embed
) -> np.ndarray:
    """Each text's embedding plus its blend's (weighted), normalised again."""
    texts = [t for t, _ in items] + [b for _, blend in items for b, _ in blend]
    vectors = np.asarray(embed(texts), dtype=np.float32)
    out = vectors[: len(items)].copy()
    j = len(items)
    for i, (_, blend) in enumerate(items):
        for _, weight in blend:
            out[i] += weight * vectors[j]
            j += 1
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


def _blended_vectors(*, questions: Sequence[Question], embed: Embed) -> np.ndarray:
    """The questions' embeddings, a follow-up's blended with the earlier turn's texts
    (weighted below its own) and normalised again: cosine similarity stays meaningful."""
    items = [(q.text, tuple(getattr(q.conversation, "blend", ()))) for q in questions]
    if not any(blend for _, blend in items):
        return np.array(embed([q.text for q in questions]), dtype=np.float32)
    return _embed_blended(items=items, embed=embed)


def _keeping(*, hits: list[SearchHit], own: SearchHit, within: int) -> list[SearchHit]:
    """`hits` with `own` (a question's best match searched as asked) among the first
    `within`: the history may outrank it, not bury it."""
    ids = [h.chunk.chunk_id for h in hits]
    if within < 1 or own.chunk.chunk_id in ids[:within]:
        return hits
    rest = [h for h in hits if h.chunk.chunk_id != own.chunk.chunk_id]
    mine = hits[ids.index(own.chunk.chunk_id)] if own.chunk.chunk_id in ids else own
    return [*rest[: within - 1], mine, *rest[within - 1 :]]


def _favour_cited(
    *, hits: Sequence[SearchHit], question: Question, scale: float = 1.0
) -> list[SearchHit]:
    """A follow-up usually asks about the place the last answer came from: passages of
    a page (then a file) cited last turn move up, by a bonus a better match outranks.
    `scale`: how much the earlier turn weighs (`lean`, for a question judged standalone)."""
    cited = getattr(question.conversation, "cited", None)
    if not cited or scale <= 0.0:
        return list(hits)
    shares = dict(getattr(question.conversation, "files", ()))
    files = {path for path, _ in cited}

    near_quoted = _pages_by_file(getattr(question.conversation, "quoted", ()))
    near_cited = _pages_by_file(cited)

    def score(hit: SearchHit) -> float:
        c = hit.chunk
        bonus = _FILE_PRIOR * shares.get(c.path, 0.0)
        if _near(c.page, near_quoted.get(c.path, ())):
            bonus += _NEAR_QUOTED_BONUS
        elif _near(c.page, near_cited.get(c.path, ())):
            bonus += _NEAR_CITED_BONUS
        if (c.path, c.page) in cited:
            bonus += _SAME_PAGE_BONUS
        elif c.path in files:
            bonus += _SAME_FILE_BONUS
        return hit.fused + scale * bonus

    return sorted(hits, key=score, reverse=True)


def _pages_by_file(places: Iterable[tuple[str, int | None]]) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {}
    for path, page in places:
        if page is not None:
            out.setdefault(path, []).append(page)
    return out


def _near(page: int | None, pages: Sequence[int]) -> bool:
    return page is not None and any(abs(page - p) <= _NEAR_PAGES for p in pages)


def passages_of(
    hits: Sequence[SearchHit], *, following: dict[str, str] | None = None
) -> list[Passage]:
    """The hits as numbered passages; `following`: what follows each chunk on its page,
    by chunk id (`LanceStore.following_text`), for a quotation to go on into."""
    after = following or {}
    return [
        Passage(
            index=i + 1,
            text=h.chunk.text,
            path=h.chunk.path,
            page=h.chunk.page,
            after=after.get(h.chunk.chunk_id, ""),
        )
        for i, h in enumerate(hits)
    ]


def hits_of(result: SearchResult | Sequence[SearchHit] | None) -> list[SearchHit]:
    """A job's hits as these batch functions get them: a search's result, or its hits
    (a plain retrieval stage's), or none (a rewrite's)."""
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
            if job.question.rewrite or job.question.translate_to:
                # Handed over from a model's pipelines (the model was turned off): no
                # model writes it here, and the question is searched as it stands.
                yield job.request_id, RowFailed(message="no language model is in use")
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
        # answer from no sources (engine/service/core.py's relevance gate does the same).
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
    at each decode step, gives jobs that join the batch there. An answerer on a model
    server (engine/rag/answer/remote.py) streams its rows as concurrent requests instead
    (engine/rag/pipeline/remote_rows.py)."""
    from engine.rag.answer.generative import IncrementalDetokenizer

    if getattr(answerer, "remote", False):
        from engine.rag.pipeline.remote_rows import remote_rows

        yield from remote_rows(
            answerer=answerer,  # type: ignore[arg-type]
            jobs=jobs,
            passages=passages,
            request_of=lambda job: _request(answerer=answerer, job=job, passages=passages),
            incoming=incoming,
            temperature=temperature,
        )
        return

    rows: list[GenerationJob] = []  # every job seen, in the executor's numbering
    detok: list[IncrementalDetokenizer] = []
    pending: list[int] = []  # tokens decoded but not yet released as text, per row
    prompt_len: list[int] = []  # told with a row's first piece, then 0

    def admit(new: Sequence[GenerationJob]) -> list[GenerationRequest]:
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
) -> GenerationRequest:
    """A job as the executor's request: a follow-up's rewrite, or an answer (to the
    question as asked, with the conversation's earlier turns, for a follow-up)."""
    q = job.question
    conversation = q.conversation
    history = tuple(getattr(conversation, "history", ()))
    if q.rewrite:
        return answerer.rewrite_request(
            question=getattr(conversation, "question", q.text), history=history
        )
    if q.translate_to:
        return answerer.translate_request(question=q.text, language=q.translate_to)
    return answerer.prompt_request(
        question=getattr(conversation, "question", q.text),
        passages=passages(job),
        max_new_tokens=q.max_new_tokens,
        history=history,
    )
