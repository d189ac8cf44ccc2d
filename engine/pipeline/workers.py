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

import contextlib
import dataclasses
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
from engine.pipeline.status import BatchRecord, PipelineStatus, RequestRecord, WorkerStatus
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
REQUEST_HISTORY = 256  # finished requests kept for the status (latency over time)
TOKEN_RATE_WINDOW_S = 30.0  # tokens/s is measured over this much recent time


@dataclass(frozen=True, kw_only=True)
class GenerationJob:
    request_id: str
    question: Question
    hits: Any
    cancel: threading.Event  # set when the caller cancelled; stop this row


RetrieveBatch = Callable[[Sequence[Question]], Sequence[Any]]
# A piece is plain text, or a Piece when the function counts the tokens behind it.
GenerateBatch = Callable[[Sequence[GenerationJob]], Iterator[tuple[str, "str | Piece | _Done"]]]
ApplyPlacement = Callable[[Any], None]


@dataclass(kw_only=True)
class _Entry:
    handle: RequestHandle
    pending: Pending


class BatchWorker:
    """A queue, a lock and a batch model; `run_batch` does one batch's work and
    returns how many requests joined the batch while it ran (`take`), if any."""

    def __init__(
        self,
        *,
        name: str,
        run_batch: Callable[[list[RequestHandle]], int | None],
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
                batch = self._select(size=choice.size)
                self._choice = choice
                self._running = len(batch)
                placements = self._placements
            start = self._clock()
            failed = False
            joined = 0
            try:
                joined = self._run_batch(batch) or 0
            except Exception as e:  # one bad batch must not stop the worker
                failed = True
                for handle in batch:
                    handle.emit(Finished(status="error", error=f"{type(e).__name__}: {e}"))
            finally:
                elapsed = self._clock() - start
                # A failure's time says nothing about T(B), nor does a batch that
                # grew on the way (its rows did not share the whole run).
                if not failed and not joined:
                    self._model = observe(self._model, batch=len(batch), seconds=elapsed)
                with self._cond:
                    self._running = 0
                    self._last = (len(batch) + joined, elapsed)
                    self._history.append(
                        BatchRecord(
                            started=start,
                            seconds=elapsed,
                            size=len(batch) + joined,
                            backlog=choice.backlog,
                            cap=choice.cap,
                            placements=placements,
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

    def take(self, *, running: int) -> list[RequestHandle]:
        """For the batch in flight (this worker's own thread, inside `run_batch`): the
        waiting requests that should join it now, `running` rows being still alive.
        As many as eq. 4–8 would have put in one batch with the rows in flight, within
        the cap; none while a placement change waits (it would wait for ever) or the
        worker stops."""
        with self._cond:
            self._drop_cancelled()
            if not self._waiting or self._placement_waiting or self._stopping:
                return []
            n = running + len(self._waiting)
            room = self._model.choose(n=n, cap=self._cap).size - running
            if room < 1:
                return []
            joining = self._select(size=room)
            self._running += len(joining)
            return joining

    def _select(self, *, size: int) -> list[RequestHandle]:
        """Under self._cond: the scheduler's best `size` waiting requests leave the queue."""
        chosen, _ = select(
            [e.pending for e in self._waiting], size=size, now=self._clock(), policy=self._policy
        )
        # By identity: the scheduler returns the very Pending objects it was given.
        by_pending = {id(e.pending): e for e in self._waiting}
        taken = {id(p) for p in chosen}
        self._waiting = [e for e in self._waiting if id(e.pending) not in taken]
        return [by_pending[id(p)].handle for p in chosen]

    @property
    def cap(self) -> int:
        with self._cond:
            return self._cap

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Hold the worker between two batches (the batch in flight ends first); what
        arrives meanwhile waits and forms the next batch when this exits."""
        with self._lock:
            yield

    def set_profiled_fit(self, fit: PowerLawFit | None) -> None:
        """A new profiled T(B) (active profiling finished); observed batches still win
        once there are enough of them."""
        with self._cond:
            self._model = dataclasses.replace(self._model, profiled=fit)

    @property
    def backlog(self) -> int:
        """Requests waiting for this worker plus those in its batch now."""
        with self._cond:
            return len(self._waiting) + self._running

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
        answered_at_retrieval: Callable[[Any], bool] | None = None,
        join_running_batch: bool = False,
        fixed_generation_batch: int | None = None,  # the fixed-batch ablation (bench)
    ) -> None:
        """`answered_at_retrieval(hits)`: True for a question whose retrieval already
        settled it (nothing relevant found): it finishes there, without taking a place
        in a generation batch. `join_running_batch`: `generate_batch` is called as
        `generate_batch(jobs, incoming=...)`, and `incoming()` (asked at each decode
        step) returns the waiting jobs that join the batch in flight."""
        policy = policy or SchedulerPolicy()
        self._retrieve_batch = retrieve_batch
        self._generate_batch = generate_batch
        self._answered_at_retrieval = answered_at_retrieval
        self._join = join_running_batch
        self._clock = clock
        self._placement = placement
        self._placement_lock = threading.Lock()  # one placement change at a time
        self._counts_lock = threading.Lock()
        self._submitted = 0
        self._finished = 0
        self._live: set[str] = set()  # request ids not finished yet
        self._placements = 0
        self._records: deque[RequestRecord] = deque(maxlen=REQUEST_HISTORY)
        self._token_times: deque[tuple[float, int]] = deque()  # (clock, tokens) per piece
        self._started = clock()
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
                self._record(handle, event)
            elif isinstance(event, Piece) and event.tokens:
                self._count_tokens(event.tokens)
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
            with self._counts_lock:
                self._placements += 1

    @property
    def placement(self) -> Any:
        """The placement in force (the last one applied to both workers)."""
        return self._placement

    def idle(self) -> bool:
        """Nothing submitted is unfinished."""
        with self._counts_lock:
            return not self._live

    def set_generation_fit(self, fit: PowerLawFit | None) -> None:
        self.generation.set_profiled_fit(fit)

    def status(self) -> PipelineStatus:
        with self._counts_lock:
            submitted, finished = self._submitted, self._finished
            placements, records = self._placements, tuple(self._records)
            rate = self._token_rate()
        placement = self._placement
        return PipelineStatus(
            retrieval=self.retrieval.status(),
            generation=self.generation.status(),
            placement_batch=int(placement.batch) if placement is not None else None,
            submitted=submitted,
            finished=finished,
            placements_applied=placements,
            tokens_per_s=rate,
            requests=records,
        )

    def _record(self, handle: RequestHandle, outcome: Finished) -> None:
        if handle.times().finished is None:
            handle.mark(finished=self._clock())
        record = RequestRecord(
            request_id=handle.request_id,
            priority=handle.question.priority,
            status=outcome.status,
            times=handle.times(),
            tokens=handle.tokens,
        )
        with self._counts_lock:
            self._finished += 1
            self._live.discard(handle.request_id)
            self._records.append(record)

    def _count_tokens(self, tokens: int) -> None:
        with self._counts_lock:
            self._token_times.append((self._clock(), tokens))
            self._prune_tokens()

    def _prune_tokens(self) -> None:
        """Under _counts_lock."""
        horizon = self._clock() - TOKEN_RATE_WINDOW_S
        while self._token_times and self._token_times[0][0] < horizon:
            self._token_times.popleft()

    def _token_rate(self) -> float:
        """Under _counts_lock: tokens over the window, or over the time since the
        pipeline started when that is shorter (a fresh engine is not 30 s old)."""
        self._prune_tokens()
        span = min(TOKEN_RATE_WINDOW_S, self._clock() - self._started)
        if span <= 0 or not self._token_times:
            return 0.0
        return sum(n for _, n in self._token_times) / span

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
        settled = self._answered_at_retrieval
        for h, hits in zip(batch, results, strict=True):
            h.mark(retrieved=done)
            h.emit(Retrieved(hits=hits))
            if h.cancelled:
                h.emit(Finished(status="cancelled"))
            elif settled is not None and settled(hits):
                h.emit(Finished(status="done"))
            else:
                self.generation.enqueue(h)

    def _generate(self, batch: list[RequestHandle]) -> int:
        members = list(batch)  # grows when requests join the batch in flight
        by_id = {h.request_id: h for h in members}
        joined = 0

        def job_of(h: RequestHandle) -> GenerationJob:
            h.mark(generation_started=self._clock())
            return GenerationJob(
                request_id=h.request_id, question=h.question, hits=h.hits, cancel=h.cancel_event
            )

        def incoming() -> list[GenerationJob]:
            nonlocal joined
            alive = sum(1 for h in members if not (h.done or h.cancelled))
            new = self.generation.take(running=alive)
            for h in new:
                members.append(h)
                by_id[h.request_id] = h
            joined += len(new)
            return [job_of(h) for h in new]

        jobs = [job_of(h) for h in members]
        stream = (
            self._generate_batch(jobs, incoming=incoming)  # type: ignore[call-arg]
            if self._join
            else self._generate_batch(jobs)
        )
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
                    event = piece if isinstance(piece, Piece) else Piece(text=piece)
                    if event.text and h.times().first_token is None:
                        h.mark(first_token=self._clock())
                    h.emit(event)
                if all(x.done or x.cancelled for x in members):
                    break  # nobody is listening any more: free the batch now
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        for h in members:
            if h.cancelled:
                h.emit(Finished(status="cancelled"))
            elif not h.done:
                h.emit(Finished(status="error", error="generation ended without an answer"))
        return joined


def _retrieval_cap(placement: Any) -> int:
    if placement is None:
        return DEFAULT_RETRIEVAL_CAP
    return max(1, int(placement.max_retrieval_batch))


def _generation_cap(placement: Any) -> int:
    if placement is None:
        return DEFAULT_GENERATION_CAP
    return max(1, int(placement.max_batch))
