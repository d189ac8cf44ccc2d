"""One question of every document, through the pipelines as background work.

Every document's request is submitted at once, before any is read: the retrieval
worker then sees the whole backlog and the generation worker picks its batch sizes
from it (eq. 4-8, engine/rag/pipeline/batching.py), retrieval of one batch overlapping
generation of the last, and the window's own chat ("interactive") still goes first.
Each request's search is restricted to its document (SearchFilters.paths), so a row
can only cite its own file; the relevance gate decides "not stated in this document"
as it decides "not found" for a whole collection.

Rows are yielded as they finish. A cancel (the caller's event, or the reader
leaving) drops every request still queued or generating; rows finished stay, and the
rest come back "cancelled" when the caller still reads.
"""

from __future__ import annotations

import dataclasses
import queue
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

import numpy as np

from engine.rag.answer.semantic_scale import IDENTITY, SemanticScale
from engine.rag.each.memo import AnsweredHow, EachMemo
from engine.rag.each.whole import WholeFit
from engine.rag.pipeline.answer_stream import answer_events
from engine.rag.pipeline.requests import RequestHandle
from engine.rag.store.records import DocumentRecord, SearchFilters
from engine.wire import AnswerMode, Citation, CitationsEvent, DoneEvent, IngestProgress
from engine.wire_each import (
    NOT_STATED,
    DocumentAnswer,
    EachEvent,
    EachPlan,
    FinishedEvent,
    PlanEvent,
    RowEvent,
    RowStatus,
    summary_of,
)

READERS = 16  # threads reading finished requests; the pipeline holds the rest queued
_POLL_S = 0.05  # how often the run looks at its caller's cancel


class Submitter(Protocol):
    def submit(self, **kw: Any) -> RequestHandle: ...


@dataclasses.dataclass(frozen=True, kw_only=True)
class EachJob:
    """What one run asks, of which documents, and how it is answered."""

    question: str
    documents: Sequence[DocumentRecord]
    how: AnsweredHow
    mode: AnswerMode
    reuse: bool = True
    max_new_tokens: int = 256
    # Whole-document questions: how each document fits the model's context.
    fit: Callable[[DocumentRecord], WholeFit] | None = None


def each_events(
    *,
    job: EachJob,
    pipeline: Submitter,
    memo: EachMemo | None,
    cancel: threading.Event | None = None,
    unfinished: Callable[[], Sequence[IngestProgress]] = list,
    embed: Callable[[list[str]], np.ndarray] | None = None,
    scale: SemanticScale = IDENTITY,
    clock: Callable[[], float] = time.monotonic,
) -> Iterator[EachEvent]:
    """The plan, a row per document as it finishes, then the summary."""
    started = clock()
    docs = list(job.documents)
    yield PlanEvent(
        plan=EachPlan(question=job.question, paths=[d.path for d in docs], mode=job.mode)
    )
    rows: dict[int, DocumentAnswer] = {}
    todo: list[tuple[int, DocumentRecord]] = []
    for n, doc in enumerate(docs, start=1):
        kept = (
            memo.get(how=job.how, path=doc.path, content_hash=doc.content_hash)
            if memo is not None and job.reuse
            else None
        )
        if kept is None:
            todo.append((n, doc))
            continue
        rows[n] = dataclasses.replace(kept, number=n, reused=True)
        yield RowEvent(row=rows[n])
    passages: dict[int, int] = {}
    for n, doc in list(todo):
        fit = job.fit(doc) if job.fit is not None else None
        if fit is not None and fit.refusal:
            todo.remove((n, doc))
            rows[n] = DocumentAnswer(number=n, path=doc.path, status="failed", error=fit.refusal)
            yield RowEvent(row=rows[n])
        passages[n] = fit.k if fit is not None else job.how.k
    stop = threading.Event()  # ours: the caller's cancel, or the reader gone
    finished: queue.Queue[DocumentAnswer] = queue.Queue()
    handles = [
        (
            n,
            doc,
            pipeline.submit(
                question=job.question,
                priority="background",
                k=passages[n],
                max_new_tokens=job.max_new_tokens,
                filters=SearchFilters(paths=(doc.path,)),
                cancel=stop,
            ),
        )
        for n, doc in todo
    ]
    submitted = clock()
    pool = ThreadPoolExecutor(
        max_workers=max(1, min(READERS, len(handles))), thread_name_prefix="ragdoll-each"
    )

    def read(n: int, doc: DocumentRecord, handle: RequestHandle) -> None:
        finished.put(
            _row(
                number=n,
                doc=doc,
                handle=handle,
                stop=stop,
                unfinished=unfinished,
                embed=embed,
                scale=scale,
                clock=clock,
                started=submitted,
            )
        )

    for n, doc, handle in handles:
        pool.submit(read, n, doc, handle)
    waiting = len(handles)
    try:
        while waiting:
            if cancel is not None and cancel.is_set():
                stop.set()
                break
            try:
                row = finished.get(timeout=_POLL_S)
            except queue.Empty:
                continue
            waiting -= 1
            if row.status == "cancelled":
                continue
            rows[row.number] = row
            if memo is not None:
                memo.put(how=job.how, row=row)
            yield RowEvent(row=row)
    finally:
        if waiting:
            stop.set()  # every request still queued or generating is dropped
        pool.shutdown(wait=False, cancel_futures=True)
        if memo is not None:
            memo.flush()
    for n, doc in enumerate(docs, start=1):
        if n not in rows:
            rows[n] = DocumentAnswer(number=n, path=doc.path, status="cancelled")
            yield RowEvent(row=rows[n])
    ordered = [rows[n] for n in sorted(rows)]
    yield FinishedEvent(summary=summary_of(rows=ordered, seconds=clock() - started))


def _row(
    *,
    number: int,
    doc: DocumentRecord,
    handle: RequestHandle,
    stop: threading.Event,
    unfinished: Callable[[], Sequence[IngestProgress]],
    embed: Callable[[list[str]], np.ndarray] | None,
    scale: SemanticScale,
    clock: Callable[[], float],
    started: float,
) -> DocumentAnswer:
    citations: list[Citation] = []

    def row(status: RowStatus, **values: Any) -> DocumentAnswer:
        return DocumentAnswer(
            number=number,
            path=doc.path,
            status=status,
            citations=citations if status == "answered" else [],
            seconds=round(clock() - started, 3),
            content_hash=doc.content_hash,
            **values,
        )

    try:
        events = answer_events(
            handle=handle, cancel=stop, unfinished=unfinished, embed=embed, scale=scale
        )
        for event in events:
            if isinstance(event, CitationsEvent):
                citations = list(event.citations)
            elif isinstance(event, DoneEvent):
                outcome = handle.outcome
                if stop.is_set() and (outcome is None or outcome.status == "cancelled"):
                    return row("cancelled")
                done = event.done
                if done.mode == "none":
                    return row("not_stated", answer=NOT_STATED)
                return row("answered", answer=done.answer, mode=done.mode)
        return row("failed", error="the answer ended without a result")
    except Exception as e:  # one document's failure is its row's, not the run's
        if stop.is_set():
            return row("cancelled")
        return row("failed", error=str(e).strip() or type(e).__name__)
