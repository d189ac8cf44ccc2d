"""One pipeline stage's worker (RAGDoll §4.1): a thread with its own queue, its own
lock and its own batch-size model (eq. 4–8, batching.py); members of a batch are
chosen by value (scheduler.py). A placement change takes the worker's lock, so it lands
between two batches and never inside one. workers.py joins two of them into the
Pipeline.
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from engine.rag.pipeline.batching import (
    BatchChoice,
    BatchModel,
    FixedBatch,
    choose_batch,
    observe,
)
from engine.rag.pipeline.requests import Finished, RequestHandle
from engine.rag.pipeline.scheduler import Pending, SchedulerPolicy, select
from engine.rag.pipeline.status import BatchRecord, WorkerStatus
from engine.runtime.planner.placement import Placement
from engine.runtime.planner.profiling import PowerLawFit
from engine.wire import Priority

_IDLE_POLL_S = 0.05  # how often an idle worker looks for cancelled requests
HISTORY = 64  # batches kept per worker for the status timeline
ApplyPlacement = Callable[[Placement], None]


class BatchFailed(Exception):
    """Raised by a `run_batch` that failed and has already told each of its requests
    (some may have gone on to another stage): the worker only counts the failure."""


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
        after_batch: Callable[[], None] | None = None,
        cap: int,
        cap_of: Callable[[Placement], int],
        apply_placement: ApplyPlacement | None,
        policy: SchedulerPolicy,
        clock: Callable[[], float],
        fixed_batch: FixedBatch | None = None,  # None: eq. 4-8 from the batch model
        defer: Callable[[float, int], float] | None = None,
    ) -> None:
        """`defer(waited, waiting)`: how many seconds more the next batch may wait
        for company, given how long its oldest request has waited and how many wait
        (0 or less: form it now). `after_batch`: called once a batch is recorded, in
        this worker's thread, outside its lock."""
        self.name = name
        self._after_batch = after_batch
        self._defer = defer
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
        self._held = False  # `hold`: no new batch, the queue kept for a hand-over
        self._thread: threading.Thread | None = None
        self._running = 0
        self._choice: BatchChoice | None = None
        self._last: tuple[int, float] | None = None
        self._batches = 0
        self._placements = 0
        self._placement_waiting = 0  # set_placement calls waiting for the lock
        self._history: deque[BatchRecord] = deque(maxlen=HISTORY)

    # -- queue -------------------------------------------------------------------

    def enqueue(self, handle: RequestHandle, *, priority: Priority | None = None) -> None:
        """`priority`: the class it is scheduled as here (None: its question's)."""
        q = handle.question
        entry = _Entry(
            handle=handle,
            pending=Pending(
                request_id=q.request_id,
                priority=priority or q.priority,
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
        """Form and run one batch now, in this thread. False when nothing waits
        (or the worker is held)."""
        with self._lock:
            with self._cond:
                self._drop_cancelled()
                if not self._waiting or self._held:
                    return False
                if self._fixed_batch is not None:
                    choice = choose_batch(
                        n=len(self._waiting), cap=self._fixed_batch.size, fit=None
                    )
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
            except BatchFailed:
                failed = True
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
        if self._after_batch is not None:
            self._after_batch()
        return True

    @property
    def placements_waiting(self) -> int:
        """`set_placement` calls waiting for the batch in flight to end."""
        with self._cond:
            return self._placement_waiting

    def set_placement(self, placement: Placement) -> None:
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
            if not self._waiting or self._placement_waiting or self._stopping or self._held:
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
                if not self._waiting or self._placement_waiting or self._held:
                    self._cond.wait(_IDLE_POLL_S)
                    continue
                waiting = len(self._waiting)
                waited = self._clock() - min(e.pending.enqueued_at for e in self._waiting)
            # Asked outside the queue's lock: `defer` looks at the other worker.
            slack = self._defer(waited, waiting) if self._defer is not None else 0.0
            if slack > 0:
                with self._cond:
                    self._cond.wait(min(slack, _IDLE_POLL_S))  # an arrival wakes it
                continue
            self.run_once()

    def predict_s(self, *, batch: int) -> float | None:
        """T(batch) by this worker's batch model; None before it has a fit."""
        with self._cond:
            fit = self._model.fit
        return fit.predict(batch=batch) if fit is not None else None

    def queued_s(self) -> float | None:
        """Seconds of whole batches waiting behind the one in flight, each of the
        size eq. 4–8 (or the fixed ablation) would take now: a request queued now
        starts no sooner (0 while the next batch would take every waiting one).
        None before the worker has a fit."""
        with self._cond:
            fit, waiting, cap = self._model.fit, len(self._waiting), self._cap
            if fit is None:
                return None
            if not waiting:
                return 0.0
            if self._fixed_batch is not None:
                size = min(self._fixed_batch.size, cap)
            else:
                size = self._model.choose(n=waiting + self._running, cap=cap).size
        return (waiting // max(1, size)) * fit.predict(batch=size)

    def hold(self) -> None:
        """Start no new batch (the one in flight ends) and keep what waits, and what
        arrives, for `stop(hand_to=...)`: a model change holds the old pipelines at
        once, then hands over on another thread, which a loaded machine may start
        late (the old model answered meanwhile)."""
        with self._cond:
            self._held = True
            self._cond.notify_all()

    def stop(
        self,
        *,
        timeout: float | None = None,
        hand_to: Callable[[RequestHandle], None] | None = None,
    ) -> int:
        """Stop taking batches. What still waits goes to `hand_to` (another worker
        takes it over), else is told it was cancelled; the batch in flight ends here.
        Returns how many were handed over."""
        with self._cond:
            self._stopping = True
            left, self._waiting = self._waiting, []
            self._cond.notify_all()
        for e in left:
            if hand_to is not None:
                hand_to(e.handle)
            else:
                e.handle.emit(Finished(status="cancelled", error="the pipeline has stopped"))
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout)
        return len(left) if hand_to is not None else 0

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
