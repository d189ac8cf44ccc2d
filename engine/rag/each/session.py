"""A per-document run set up from the engine's parts: the scope read, how the
documents are answered (for the reuse key), then engine/rag/each/run.py."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.each.memo import AnsweredHow, EachMemo
from engine.rag.each.run import EachJob, Submitter, each_events
from engine.rag.each.scope import documents_in
from engine.rag.each.whole import WholeFit
from engine.rag.store.records import DocumentRecord
from engine.wire import IngestProgress, WatchedFolder
from engine.wire_each import EachEvent, EachRequest

MAX_QUESTION_CHARS = 8000


def ask_each(
    *,
    request: EachRequest,
    folders: Sequence[WatchedFolder],
    documents: Sequence[DocumentRecord],
    pipeline: Callable[[], Submitter],
    model: str | None,
    embedder: str,
    reranker: str | None,
    memo: EachMemo | None,
    whole: Callable[[DocumentRecord], WholeFit] | None = None,
    cancel: threading.Event | None = None,
    unfinished: Callable[[], Sequence[IngestProgress]] = list,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    scale: SemanticScale = IDENTITY,
) -> Iterator[EachEvent]:
    """Checks the request now (ScopeError, ValueError: nothing has been asked), then
    returns the run's events. `model`: the language model answering (None:
    extractive); `pipeline()` gives the pipelines to submit to; `whole` how a document
    fits the model's context (whole-document questions)."""
    question = " ".join(request.question.split())
    if not question:
        raise ValueError("the question is empty")
    if len(question) > MAX_QUESTION_CHARS:
        raise ValueError(f"the question is longer than {MAX_QUESTION_CHARS:,} characters")
    if not 1 <= request.k <= 50:
        raise ValueError("k must be between 1 and 50")
    if not 1 <= request.max_new_tokens <= 4096:
        raise ValueError("max_new_tokens must be between 1 and 4096")
    if request.whole_document and (model is None or whole is None):
        raise ValueError(
            "whole-document questions need a language model: choose one, or ask from passages"
        )
    docs = documents_in(scope=request.scope, folders=folders, documents=documents)
    how = AnsweredHow(
        question=question,
        k=request.k,
        whole_document=request.whole_document,
        answerer=f"{model}:{request.max_new_tokens}" if model else "extractive",
        embedder=embedder,
        reranker=reranker or "",
    )
    job = EachJob(
        question=question,
        documents=docs,
        how=how,
        mode="generative" if model else "extractive",
        reuse=request.reuse,
        max_new_tokens=request.max_new_tokens,
        fit=whole if request.whole_document else None,
    )
    return each_events(
        job=job,
        pipeline=pipeline(),
        memo=memo,
        cancel=cancel,
        unfinished=unfinished,
        embed=embed,
        scale=scale,
    )
