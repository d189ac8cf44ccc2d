"""The two decoupled pipelines (RAGDoll §4.1): a retrieval worker and a generation
worker, each a thread with its own queue, its own lock and its own batch-size model.

A question waits in the retrieval queue; the retrieval worker takes a batch (size by
eq. 4–8 from its own fit, members by value — scheduler.py), runs `retrieve_batch`
once for the whole batch, and hands each question to the generation queue as soon as
that batch is done. The generation worker forms its own batches the same way from
what is waiting there and streams each request's pieces to its handle.

A placement change (`set_placement`) takes each worker's lock in turn, so it lands
between two batches of that worker and never inside one; the queues are not touched,
so no request is lost, and the other worker keeps serving meanwhile (§4.2's separate
locks).

The work itself is injected: `retrieve_batch(questions) -> list[hits]` and
`generate_batch(jobs) -> iterator of (request_id, text piece | DONE)`; adapters.py
builds the real ones, tests pass fakes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from engine.pipeline.batching import BatchChoice, BatchModel, choose_batch, observe
from engine.pipeline.requests import (
    Event,
    Finished,
    Piece,
    Question,
    RequestHandle,
    Retrieved,
    new_question,
)
from engine.pipeline.scheduler import Pending, Priority, SchedulerPolicy, select
from engine.planner.profiling import PowerLawFit


class _Done:
    def __repr__(self) -> str:
        return "DONE"


DONE: Final = _Done()  # the generate_batch marker: this request's answer is complete

# Without a placement, the batch caps: retrieval is cheap to batch (one embedding
# call, one search), generation holds KV per row.
DEFAULT_RETRIEVAL_CAP = 64
DEFAULT_GENERATION_CAP = 8
_IDLE_POLL_S = 0.05  # how often an idle worker looks for cancelled requests
HISTORY = 64  # batches kept per worker for the status timeline


@dataclass(frozen=True, kw_only=True)
class GenerationJob:
    request_id: str
    question: Question
    hits: Any
    cancel: threading.Event  # set when the caller cancelled; stop this row


RetrieveBatch = Callable[[Sequence[Question]], Sequence[Any]]
GenerateBatch = Callable[[Sequence[GenerationJob]], Iterator[tuple[str, "str | _Done"]]]
ApplyPlacement = Callable[[Any], None]


@dataclass(frozen=True, kw_only=True)
class BatchRecord:
    """One finished batch, for the batch-size / placement timeline (Figure 9)."""

    started: float  # clock seconds
    seconds: float
    size: int
    backlog: int  # requests waiting when it was formed, itself included
    cap: int


@dataclass(frozen=True, kw_only=True)
class WorkerStatus:
    name: str
    queue_length: int
    running: int  # requests in the batch being processed now
    cap: int  # the largest batch allowed by the placement in force
    batch_size: int | None  # the size chosen for the current (or last) batch
    last_batch_size: int | None
    last_batch_s: float | None
    batches: int
    fit_a: float | None
    fit_c: float | None
    fit_online: bool  # the fit in force comes from observed batches, not the profile
    placements_applied: int
    recent: tuple[BatchRecord, ...]  # the last HISTORY batches, oldest first


@dataclass(frozen=True, kw_only=True)
class PipelineStatus:
    retrieval: WorkerStatus
    generation: WorkerStatus
    placement_batch: int | None  # Placement.batch of the placement in force
    submitted: int
    finished: int


@dataclass(kw_only=True)
class _Entry:
    handle: RequestHandle
    pending: Pending


class BatchWorker:
    """A queue, a lock and a batch model; `run_batch` does one batch's work."""

    def __init__(
        self,
        *,
        name: str,
        run_batch: Callable[[list[RequestHandle]], None],
        model: BatchModel,
        cap: int,
        cap_of: Callable[[Any], int],
        apply_placement: ApplyPlacement | None,
        policy: SchedulerPolicy,
        clock: Callable[[], float],
        fixed_batch: int | None = None,  # ablation: min(waiting, fixed_batch), no model
    ) -> None:
        self.name = name
        self._fixed_batch = fixed_batch
        self._run_batch = run_batch
        self._model = model
        self._cap = max(1, cap)
        self._cap_of = cap_of
        self._apply_placement = apply_placement
        self._policy = policy
        self._clock = clock
        self._cond = threading.Condition()  # guards the queue
        self._waiting: list[_Entry] = []
        self._lock = threading.Lock()  # held for a whole batch and for a placement change
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._running = 0
        self._choice: BatchChoice | None = None
        self._last: tuple[int, float] | None = None
        self._batches = 0
        self._placements = 0
        self._placement_waiting = 0  # set_placement calls waiting for the lock
        self._history: deque[BatchRecord] = deque(maxlen=HISTORY)

    # -- queue -------------------------------------------------------------------

    def enqueue(self, handle: RequestHandle) -> None:
        q = handle.question
        entry = _Entry(
            handle=handle,
            pending=Pending(
                request_id=q.request_id,
                priority=q.priority,
                enqueued_at=self._clock(),
                cost_s=q.cost_s,
            ),
        )
        with self._cond:
            if self._stopping:
                handle.emit(Finished(status="cancelled", error="the pipeline has stopped"))
                return
            self._waiting.append(entry)
            self._cond.notify()

    def _drop_cancelled(self) -> None:
        """Under self._cond: cancelled requests leave the queue and hear so."""
        gone = [e for e in self._waiting if e.handle.cancelled]
        if gone:
            self._waiting = [e for e in self._waiting if not e.handle.cancelled]
            for e in gone:
                e.handle.emit(Finished(status="cancelled"))

    # -- batches -------------------------------------------------------------------

    def run_once(self) -> bool:
        """Form and run one batch now, in this thread. False when nothing waits."""
        with self._lock:
            with self._cond:
                self._drop_cancelled()
                if not self._waiting:
                    return False
                if self._fixed_batch is not None:
                    choice = choose_batch(n=len(self._waiting), cap=self._fixed_batch, fit=None)
                else:
                    choice = self._model.choose(n=len(self._waiting), cap=self._cap)
                chosen, _ = select(
                    [e.pending for e in self._waiting],
                    size=choice.size,
                    now=self._clock(),
                    policy=self._policy,
                )
                # By identity: the scheduler returns the very Pending objects it was given.
                by_pending = {id(e.pending): e for e in self._waiting}
                batch = [by_pending[id(p)].handle for p in chosen]
                taken = {id(p) for p in chosen}
                self._waiting = [e for e in self._waiting if id(e.pending) not in taken]
                self._choice = choice
                self._running = len(batch)
            start = self._clock()
            failed = False
            try:
                self._run_batch(batch)
            except Exception as e:  # one bad batch must not stop the worker
                failed = True
                for handle in batch:
                    handle.emit(Finished(status="error", error=f"{type(e).__name__}: {e}"))
            finally:
                elapsed = self._clock() - start
                if not failed:  # a failure's time says nothing about T(B)
                    self._model = observe(self._model, batch=len(batch), seconds=elapsed)
                with self._cond:
                    self._running = 0
                    self._last = (len(batch), elapsed)
                    self._history.append(
                        BatchRecord(
                            started=start,
                            seconds=elapsed,
                            size=len(batch),
                            backlog=choice.backlog,
                            cap=choice.cap,
                        )
                    )
                    self._batches += 1
        return True

    def set_placement(self, placement: Any) -> None:
        """Apply between two batches: waits for the batch in flight, if any, and the
        worker starts no new batch meanwhile (a plain lock is not fair: a busy worker
        could take it back before this thread woke)."""
        with self._cond:
            self._placement_waiting += 1
        try:
            with self._lock:
                if self._apply_placement is not None:
                    self._apply_placement(placement)
                cap = max(1, int(self._cap_of(placement)))
                with self._cond:
                    self._cap = cap
                    self._placements += 1
        finally:
            with self._cond:
                self._placement_waiting -= 1
                self._cond.notify_all()

    # -- thread ----------------------------------------------------------------------

    def start(self) -> None:
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._loop, name=f"pipeline-{self.name}", daemon=True
        )
        self._thread.start()

    def _loop(self) -> None:
        while True:
            with self._cond:
                self._drop_cancelled()
                if self._stopping:
                    return
                if not self._waiting or self._placement_waiting:
                    self._cond.wait(_IDLE_POLL_S)
                    continue
            self.run_once()

    def stop(self, *, timeout: float | None = None) -> None:
        """Stop taking batches; what still waits is told it was cancelled."""
        with self._cond:
            self._stopping = True
            left, self._waiting = self._waiting, []
            self._cond.notify_all()
        for e in left:
            e.handle.emit(Finished(status="cancelled", error="the pipeline has stopped"))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)

    def status(self) -> WorkerStatus:
        with self._cond:
            fit: PowerLawFit | None = self._model.fit
            return WorkerStatus(
                name=self.name,
                queue_length=len(self._waiting),
                running=self._running,
                cap=self._cap,
                batch_size=self._choice.size if self._choice else None,
                last_batch_size=self._last[0] if self._last else None,
                last_batch_s=self._last[1] if self._last else None,
                batches=self._batches,
                fit_a=fit.a if fit else None,
                fit_c=fit.c if fit else None,
                fit_online=self._model.online is not None,
                placements_applied=self._placements,
                recent=tuple(self._history),
            )


class Pipeline:
    """Retrieval → generation, each its own BatchWorker. `submit` returns a handle."""

    def __init__(
        self,
        *,
        retrieve_batch: RetrieveBatch,
        generate_batch: GenerateBatch,
        placement: Any = None,
        retrieval_fit: PowerLawFit | None = None,
        generation_fit: PowerLawFit | None = None,
        apply_retrieval_placement: ApplyPlacement | None = None,
        apply_generation_placement: ApplyPlacement | None = None,
        policy: SchedulerPolicy | None = None,
        clock: Callable[[], float] = time.monotonic,
        start: bool = True,
        fixed_generation_batch: int | None = None,  # the fixed-batch ablation (bench)
    ) -> None:
        policy = policy or SchedulerPolicy()
        self._retrieve_batch = retrieve_batch
        self._generate_batch = generate_batch
        self._clock = clock
        self._placement = placement
        self._placement_lock = threading.Lock()  # one placement change at a time
        self._counts_lock = threading.Lock()
        self._submitted = 0
        self._finished = 0
        self._live: set[str] = set()  # request ids not finished yet
        self.retrieval = BatchWorker(
            name="retrieval",
            run_batch=self._retrieve,
            model=BatchModel(profiled=retrieval_fit),
            cap=_retrieval_cap(placement),
            cap_of=_retrieval_cap,
            apply_placement=apply_retrieval_placement,
            policy=policy,
            clock=clock,
        )
        self.generation = BatchWorker(
            name="generation",
            run_batch=self._generate,
            model=BatchModel(profiled=generation_fit),
            cap=_generation_cap(placement),
            cap_of=_generation_cap,
            apply_placement=apply_generation_placement,
            policy=policy,
            clock=clock,
            fixed_batch=fixed_generation_batch,
        )
        if start:
            self.start()

    def start(self) -> None:
        self.retrieval.start()
        self.generation.start()

    def submit(
        self,
        *,
        question: str,
        priority: Priority = "interactive",
        k: int = 5,
        max_new_tokens: int = 256,
        cost_s: float = 0.0,
        payload: Any = None,
        request_id: str | None = None,
        on_event: Callable[[Event], None] | None = None,
    ) -> RequestHandle:
        """Queue a question for retrieval; ValueError on an empty question or bad limits."""
        if request_id is not None:
            with self._counts_lock:
                if request_id in self._live:
                    raise ValueError(f"request {request_id!r} is already in the pipeline")
        q = new_question(
            text=question,
            priority=priority,
            k=k,
            max_new_tokens=max_new_tokens,
            cost_s=cost_s,
            payload=payload,
            request_id=request_id,
        )

        def counted(event: Event) -> None:
            if isinstance(event, Finished):
                with self._counts_lock:
                    self._finished += 1
                    self._live.discard(q.request_id)
            if on_event is not None:
                on_event(event)

        handle = RequestHandle(question=q, submitted=self._clock(), on_event=counted)
        with self._counts_lock:
            if q.request_id in self._live:
                raise ValueError(f"request {q.request_id!r} is already in the pipeline")
            self._live.add(q.request_id)
            self._submitted += 1
        self.retrieval.enqueue(handle)
        return handle

    def set_placement(self, placement: Any) -> None:
        """Each worker takes the placement between two of its batches, retrieval first;
        nothing queued or in flight is dropped."""
        with self._placement_lock:
            self.retrieval.set_placement(placement)
            self.generation.set_placement(placement)
            self._placement = placement

    def status(self) -> PipelineStatus:
        with self._counts_lock:
            submitted, finished = self._submitted, self._finished
        placement = self._placement
        return PipelineStatus(
            retrieval=self.retrieval.status(),
            generation=self.generation.status(),
            placement_batch=int(placement.batch) if placement is not None else None,
            submitted=submitted,
            finished=finished,
        )

    def close(self, *, timeout: float | None = 10.0) -> None:
        self.retrieval.stop(timeout=timeout)
        self.generation.stop(timeout=timeout)

    # -- the two batch functions ------------------------------------------------------

    def _retrieve(self, batch: list[RequestHandle]) -> None:
        now = self._clock()
        for h in batch:
            h.mark(retrieval_started=now)
        results = list(self._retrieve_batch([h.question for h in batch]))
        if len(results) != len(batch):
            raise RuntimeError(
                f"retrieve_batch returned {len(results)} results for {len(batch)} questions"
            )
        done = self._clock()
        for h, hits in zip(batch, results, strict=True):
            h.mark(retrieved=done)
            h.emit(Retrieved(hits=hits))
            if h.cancelled:
                h.emit(Finished(status="cancelled"))
            else:
                self.generation.enqueue(h)

    def _generate(self, batch: list[RequestHandle]) -> None:
        now = self._clock()
        by_id = {h.request_id: h for h in batch}
        for h in batch:
            h.mark(generation_started=now)
        jobs = [
            GenerationJob(
                request_id=h.request_id, question=h.question, hits=h.hits, cancel=h.cancel_event
            )
            for h in batch
        ]
        stream = self._generate_batch(jobs)
        try:
            for request_id, piece in stream:
                h = by_id.get(request_id)
                if h is None or h.done:
                    continue
                if isinstance(piece, _Done):
                    h.mark(finished=self._clock())
                    h.emit(Finished(status="done"))
                elif h.cancelled:
                    h.emit(Finished(status="cancelled"))
                else:
                    h.emit(Piece(text=piece))
                if all(x.done or x.cancelled for x in batch):
                    break  # nobody is listening any more: free the batch now
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        for h in batch:
            if h.cancelled:
                h.emit(Finished(status="cancelled"))
            elif not h.done:
                h.emit(Finished(status="error", error="generation ended without an answer"))


def _retrieval_cap(placement: Any) -> int:
    if placement is None:
        return DEFAULT_RETRIEVAL_CAP
    return max(1, int(placement.max_retrieval_batch))


def _generation_cap(placement: Any) -> int:
    if placement is None:
        return DEFAULT_GENERATION_CAP
    return max(1, int(placement.max_batch))
