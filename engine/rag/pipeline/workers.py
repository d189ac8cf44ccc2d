"""The two decoupled pipelines (RAGDoll §4.1): a retrieval worker and a generation
worker, each a thread with its own queue, its own lock and its own batch-size model.

A question waits in the retrieval queue; the retrieval worker takes a batch (size by
eq. 4–8 from its own fit, members by value — scheduler.py), runs the search once for
the whole batch, then the verdict per question, and hands each question to the
generation queue as soon as its own verdict is in. The generation worker forms its own
batches the same way from what is waiting there and streams each request's pieces to
its handle. A follow-up the model rewrites starts in the generation queue instead: its
rewrite is a row of those batches, and at its end the question goes on to retrieval
(`_rewritten`). Which queue holds a request is its stage; nothing outside the two
workers waits on one.

A placement change (`set_placement`) takes each worker's lock in turn, so it lands
between two batches of that worker and never inside one; the queues are not touched,
so no request is lost, and the other worker keeps serving meanwhile (§4.2's separate
locks).

The work itself is injected as the stages (stages.py: the search, the verdict, the
generation), with the policies the workers consult (policies.py); serving.py builds
the engine's, tests pass fakes.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import Generic

from engine.rag.answer.conversation import FollowUp
from engine.rag.pipeline.batch_worker import BatchFailed, BatchWorker
from engine.rag.pipeline.batching import BatchModel
from engine.rag.pipeline.follow_up import after_rewrite, after_translation
from engine.rag.pipeline.policies import Fits, Placing, Scheduling
from engine.rag.pipeline.requests import (
    Event,
    Finished,
    H,
    Piece,
    Question,
    RequestHandle,
    Retrieved,
    S,
    new_question,
)
from engine.rag.pipeline.stages import GenerationJob, RowFailed, Stages, _Done
from engine.rag.pipeline.status import PipelineStatus, RequestRecord
from engine.rag.store.records import SearchFilters
from engine.runtime.heap import give_back_freed_memory
from engine.runtime.planner.placement import Placement
from engine.runtime.planner.profiling import PowerLawFit
from engine.wire import Priority

# Without a placement, the batch caps: retrieval is cheap to batch (one embedding
# call, one search), generation holds KV per row.
DEFAULT_RETRIEVAL_CAP = 64
DEFAULT_GENERATION_CAP = 8
REQUEST_HISTORY = 256  # finished requests kept for the status (latency over time)
# The longest a question waits in the retrieval queue for others to batch with
# (bounded waiting, whatever the estimates say).
MAX_RETRIEVAL_DEFER_S = 10.0
TOKEN_RATE_WINDOW_S = 30.0  # tokens/s is measured over this much recent time
# The longest the generation worker waits for the verdict on a question it finished
# before the relevance gate had read it (a bound, not an expected time: the gate
# reads a few sentences).
VERDICT_WAIT_S = 60.0


class Pipeline(Generic[S, H]):
    """Retrieval → generation, each its own BatchWorker. `submit` returns a handle."""

    def __init__(
        self,
        *,
        stages: Stages[S, H],
        scheduling: Scheduling | None = None,
        placing: Placing | None = None,
        fits: Fits | None = None,
        model_name: str | None = None,  # the model answering here (handles say so)
        clock: Callable[[], float] = time.monotonic,
        start: bool = True,
    ) -> None:
        scheduling = scheduling or Scheduling()
        placing = placing or Placing()
        fits = fits or Fits()
        placement = placing.placement
        self._stages = stages
        # Speculation is about the verdict: without one there is nothing to wait for.
        self._speculate = stages.speculate if stages.judge is not None else None
        self._scheduling = scheduling
        self.model_name = model_name
        self._clock = clock
        # The batch the caps are sized for (the status says it); the placement itself
        # is its owner's (engine/runtime/planner/owner.py), which reports the one in force.
        self._placement_batch = placement.batch if placement is not None else None
        self._placement_lock = threading.Lock()  # one placement change at a time
        self._counts_lock = threading.Lock()
        self._submitted = 0
        self._finished = 0
        self._live: set[str] = set()  # request ids not finished yet
        self._placements = 0
        self._records: deque[RequestRecord] = deque(maxlen=REQUEST_HISTORY)
        self._token_times: deque[tuple[float, int]] = deque()  # (clock, tokens) per piece
        self._started = clock()
        self._successor: Pipeline[S, H] | None = None  # who took over (`hand_over`)
        self.retrieval = BatchWorker(
            name="retrieval",
            run_batch=self._retrieve,
            model=BatchModel(profiled=fits.retrieval),
            cap=_retrieval_cap(placement),
            cap_of=_retrieval_cap,
            apply_placement=placing.apply_to_store,
            policy=scheduling.order,
            clock=clock,
            defer=self.retrieval_slack if scheduling.retrieval_waits_for_company else None,
        )
        self.generation = BatchWorker(
            name="generation",
            run_batch=self._generate,
            after_batch=self._between_answers,
            model=BatchModel(profiled=fits.generation),
            cap=scheduling.generation_cap or _generation_cap(placement),
            cap_of=_generation_cap,
            apply_placement=placing.apply_to_executor,
            policy=scheduling.order,
            clock=clock,
            fixed_batch=scheduling.generation_batch,
        )
        if start:
            self.start()

    def start(self) -> None:
        self.retrieval.start()
        self.generation.start()

    def retrieval_slack(self, waited: float, waiting: int) -> float:
        """How much longer the retrieval worker may wait for more questions to
        batch with (RAGDoll §4.4 batches only what already waits; when T_retr(B)
        is nearly flat, a larger batch is almost free). While the generation
        queue holds whole batches that will take longer than retrieving what
        waits now, a question retrieved now would only wait there. Never past
        MAX_RETRIEVAL_DEFER_S of the oldest question's wait; never without both
        workers' fits."""
        ahead = self.generation.queued_s()
        retrieve = self.retrieval.predict_s(batch=waiting + 1)
        if ahead is None or retrieve is None:
            return 0.0
        return min(ahead - retrieve, MAX_RETRIEVAL_DEFER_S - waited)

    def submit(
        self,
        *,
        question: str,
        priority: Priority = "interactive",
        k: int = 5,
        max_new_tokens: int = 256,
        cost_s: float = 0.0,
        filters: SearchFilters | None = None,
        request_id: str | None = None,
        on_event: Callable[[Event[H]], None] | None = None,
        conversation: FollowUp | None = None,
        rewrite: bool = False,
        translate_to: str | None = None,
        cancel: threading.Event | None = None,
    ) -> RequestHandle[S, H]:
        """Queue a question for retrieval, or, with `rewrite` (a follow-up, see
        follow_up.py), for its rewrite first, or with `translate_to` (a language code,
        engine/rag/answer/translation.py), for its translation first; ValueError on an
        empty question or bad limits. A follow-up's reader hears how it is searched
        (`Resolved`), a translated question's its translation (`Translated`), before its
        retrieval. Once `cancel` is set the request leaves whichever queue holds it, or its
        generation batch at the next decode step, and finishes "cancelled"."""
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
            filters=filters,
            request_id=request_id,
            conversation=conversation,
            rewrite=rewrite,
            translate_to=translate_to,
        )

        def counted(event: Event[H]) -> None:
            self._count(handle, event)
            if on_event is not None:
                on_event(event)

        handle: RequestHandle[S, H] = RequestHandle(
            question=q, submitted=self._clock(), on_event=counted, cancel=cancel
        )
        handle.served_by = self.model_name
        with self._counts_lock:
            if q.request_id in self._live:
                raise ValueError(f"request {q.request_id!r} is already in the pipeline")
            self._live.add(q.request_id)
            self._submitted += 1
        if q.conversation is not None and not q.rewrite:
            handle.resolved(question=q)  # searched as resolved from the history
        self._enqueue(handle, retrieved=False)
        return handle

    def _enqueue(self, handle: RequestHandle[S, H], *, retrieved: bool) -> None:
        """Into the queue of the request's next stage (a rewrite or a translation is a
        generation row)."""
        if _rewritten_first(handle.question):
            self.generation.enqueue(handle, priority=self._scheduling.rewrite_priority)
        else:
            (self.generation if retrieved else self.retrieval).enqueue(handle)

    def _count(self, handle: RequestHandle[S, H], event: Event[H]) -> None:
        if isinstance(event, Finished):
            self._record(handle, event)
        elif isinstance(event, Piece) and event.tokens:
            self._count_tokens(event.tokens)

    def hold(self) -> None:
        """Both workers start no new batch; `hand_over` then moves what waits."""
        self.retrieval.hold()
        self.generation.hold()

    def hand_over(self, *, to: Pipeline[S, H], timeout: float | None = 10.0) -> int:
        """Stop this pipeline and let `to` finish what it has not begun (a model
        change): questions waiting for retrieval join `to`'s retrieval queue, those
        already retrieved its generation queue (their sources stay valid); a batch
        in flight ends here. Returns how many requests moved."""
        # A rewrite that ends in a batch still in flight sends its question on to `to`.
        self._successor = to
        # The retrieval batch in flight is waited for (no timeout: its questions
        # must reach the generation queue below before that is handed over too).
        moved = self.retrieval.stop(
            timeout=None, hand_to=lambda h: to.adopt(handle=h, retrieved=False)
        )
        moved += self.generation.stop(
            timeout=timeout, hand_to=lambda h: to.adopt(handle=h, retrieved=True)
        )
        return moved

    def adopt(self, *, handle: RequestHandle[S, H], retrieved: bool) -> None:
        """Take over a request another pipeline queued (`hand_over`)."""
        handle.also_notify(lambda event: self._count(handle, event))
        handle.served_by = self.model_name
        with self._counts_lock:
            self._live.add(handle.request_id)
            self._submitted += 1
        self._enqueue(handle, retrieved=retrieved)

    def set_placement(self, placement: Placement) -> None:
        """Each worker takes the placement between two of its batches, retrieval first
        (each through its hook: the owner's `apply_to_store` / `apply_to_executor`);
        nothing queued or in flight is dropped."""
        with self._placement_lock:
            self.retrieval.set_placement(placement)
            self.generation.set_placement(placement)
            with self._counts_lock:
                self._placement_batch = placement.batch
                self._placements += 1

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
            placement_batch = self._placement_batch
        return PipelineStatus(
            retrieval=self.retrieval.status(),
            generation=self.generation.status(),
            placement_batch=placement_batch,
            submitted=submitted,
            finished=finished,
            placements_applied=placements,
            tokens_per_s=rate,
            requests=records,
        )

    def _record(self, handle: RequestHandle[S, H], outcome: Finished) -> None:
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

    def _retrieve(self, batch: list[RequestHandle[S, H]]) -> None:
        now = self._clock()
        for h in batch:
            h.mark(retrieval_started=now)
        searched = list(self._stages.retrieve([h.question for h in batch]))
        if len(searched) != len(batch):
            raise RuntimeError(
                f"retrieve returned {len(searched)} results for {len(batch)} questions"
            )
        judge = self._stages.judge
        if judge is None:
            for h, s in zip(batch, searched, strict=True):
                self._hand_on(h, s)  # type: ignore[arg-type]  # no verdict: S is H
            return
        if self._speculate is not None:
            for h, s in zip(batch, searched, strict=True):
                if not h.cancelled and self._speculate(s):
                    h.hold(searched=s)
                    self.generation.enqueue(h)
        # Each question goes on as soon as its own verdict is in: generation starts on
        # the first while the gate reads the rest (a run over many documents would
        # otherwise leave the model idle for the whole batch's verdicts).
        for n, (h, s) in enumerate(zip(batch, searched, strict=True)):
            try:
                hits = judge(h.question, s)
            except Exception as e:
                # Those handed on already go on; this one and the rest fail here.
                failed = Finished(status="error", error=f"{type(e).__name__}: {e}")
                for rest in batch[n:]:
                    if rest.held:
                        rest.release(retrieved=None, finish=failed)
                    else:
                        rest.emit(failed)
                raise BatchFailed(str(e)) from e
            self._hand_on(h, hits)

    def _hand_on(self, h: RequestHandle[S, H], hits: H) -> None:
        """A question with its verdict: to generation, finished (settled or cancelled),
        or, begun already (held), released."""
        h.mark(retrieved=self._clock())
        if h.held:
            self._release(h, hits)
            return
        h.emit(Retrieved(hits=hits))
        if h.cancelled:
            h.emit(Finished(status="cancelled"))
        elif self._settled(hits):
            h.emit(Finished(status="done"))
        else:
            self.generation.enqueue(h)

    def _settled(self, hits: H) -> bool:
        return self._stages.settled is not None and self._stages.settled(hits)

    def _release(self, h: RequestHandle[S, H], hits: H) -> None:
        """A held question's verdict: what its generation wrote so far is delivered
        (the first piece of text is its first token), or, when the verdict settles it
        (or it was cancelled), its generation stops and it finishes as it would have."""
        finish = None
        if h.cancelled:
            finish = Finished(status="cancelled")
        elif self._settled(hits):
            finish = Finished(status="done")
        delivered = h.release(retrieved=Retrieved(hits=hits), finish=finish)
        text = any(isinstance(e, Piece) and e.text for e in delivered)
        if text and h.times().first_token is None:
            h.mark(first_token=self._clock())

    def _generate(self, batch: list[RequestHandle[S, H]]) -> int:
        """One generation batch: answers, and follow-ups' rewrites (the rewrite stage:
        what such a row writes is kept, not delivered, and at its end the question goes
        on to retrieval). Returns how many rows joined the batch in flight."""
        members = list(batch)  # grows when requests join the batch in flight
        by_id = {h.request_id: h for h in members}
        rewriting: dict[str, list[str]] = {}  # a rewrite row's text so far
        moved: set[str] = set()  # rewrites over: their questions went on to retrieval
        joined = 0

        def job_of(h: RequestHandle[S, H]) -> GenerationJob[S, H]:
            if _rewritten_first(h.question):
                rewriting[h.request_id] = []
                return GenerationJob(
                    request_id=h.request_id, question=h.question, hits=None, cancel=h.cancel_event
                )
            h.mark(generation_started=self._clock())
            # Before its verdict, a held question starts from its search's hits.
            hits = h.hits if h.hits is not None else h.searched
            return GenerationJob(
                request_id=h.request_id, question=h.question, hits=hits, cancel=h.cancel_event
            )

        def over(h: RequestHandle[S, H]) -> bool:
            return h.done or h.cancelled or h.request_id in moved

        def rewritten(h: RequestHandle[S, H], text: str | None) -> None:
            rewriting.pop(h.request_id, None)
            moved.add(h.request_id)
            self._rewritten(h, text=text)

        def incoming() -> list[GenerationJob[S, H]]:
            nonlocal joined
            alive = sum(1 for h in members if not over(h))
            new = self.generation.take(running=alive)
            for h in new:
                members.append(h)
                by_id[h.request_id] = h
            joined += len(new)
            return [job_of(h) for h in new]

        jobs = [job_of(h) for h in members]
        generate = self._stages.generate
        stream = (
            generate(jobs, incoming=incoming)  # type: ignore[call-arg]
            if self._scheduling.join_running_batch
            else generate(jobs)
        )
        try:
            for request_id, piece in stream:
                _finish_cancelled([h for h in members if h.request_id not in moved])
                h = by_id.get(request_id)
                if h is None or h.done or request_id in moved:
                    continue
                if request_id in rewriting:
                    if isinstance(piece, _Done):
                        rewritten(h, "".join(rewriting[request_id]))
                    elif isinstance(piece, RowFailed):
                        rewritten(h, None)
                    else:
                        event = piece if isinstance(piece, Piece) else Piece(text=piece)
                        rewriting[request_id].append(event.text)
                        if event.tokens:  # the machine's tokens/s counts them too
                            self._count_tokens(event.tokens)
                elif isinstance(piece, _Done):
                    # A question begun before its verdict and finished already: its
                    # answer's KV is stored when the stream goes on, unless the
                    # verdict stopped it first (a refusal stores no answer).
                    h.wait_released(timeout=VERDICT_WAIT_S)
                    h.emit(Finished(status="done"))  # its record marks the finish
                elif isinstance(piece, RowFailed):
                    h.emit(Finished(status="error", error=piece.message))
                elif h.cancelled:
                    h.emit(Finished(status="cancelled"))
                else:
                    event = piece if isinstance(piece, Piece) else Piece(text=piece)
                    # A held question's first token is the one its verdict releases.
                    if h.emit(event) and event.text and h.times().first_token is None:
                        h.mark(first_token=self._clock())
                if all(over(x) for x in members):
                    break  # nobody is listening any more: free the batch now
        except Exception as e:
            # Every row hears it here, those that joined on the way too; a follow-up
            # whose rewrite failed is searched history-aware, as after a failed row.
            for h in members:
                if h.request_id in rewriting and not h.cancelled:
                    rewritten(h, None)
                elif not h.done and h.request_id not in moved:
                    h.emit(Finished(status="error", error=f"{type(e).__name__}: {e}"))
            raise BatchFailed(str(e)) from e
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        for h in members:
            if h.request_id in moved:
                continue
            if h.cancelled:
                h.emit(Finished(status="cancelled"))
            elif h.request_id in rewriting:
                rewritten(h, None)  # the stream ended without the rewrite's end
            elif not h.done:
                h.emit(Finished(status="error", error="generation ended without an answer"))
        return joined

    def _between_answers(self) -> None:
        """After a generation batch is recorded: with nothing else in flight, the
        answers' working memory goes back to the system (not timed as the batch's)."""
        if self.idle():
            give_back_freed_memory()

    def _rewritten(self, h: RequestHandle[S, H], *, text: str | None) -> None:
        """A follow-up's rewrite is over (`text`: what the model wrote, None when it
        failed): the question goes on to retrieval with its search query, here or, after
        a hand-over (a model change), in the pipelines that took this one's work."""
        question = h.question
        if question.translate_to:
            h.resolved(question=after_translation(question=question, text=text))
        else:
            h.resolved(question=after_rewrite(question=question, text=text))
        successor = self._successor
        if successor is not None:
            successor.adopt(handle=h, retrieved=False)
        else:
            self.retrieval.enqueue(h)


def _rewritten_first(question: Question) -> bool:
    """Whether the question's first stage is a generation row: a follow-up's rewrite or
    a translation."""
    return question.rewrite or question.translate_to is not None


def _finish_cancelled(members: Sequence[RequestHandle[S, H]]) -> None:
    """A request cancelled while others of its batch go on finishes now (its row
    leaves the batch at this step), not when the batch ends. A held one hears its
    verdict first (`_release`)."""
    for h in members:
        if h.cancelled and not h.done and not h.held:
            h.emit(Finished(status="cancelled"))


def _retrieval_cap(placement: Placement | None) -> int:
    if placement is None:
        return DEFAULT_RETRIEVAL_CAP
    return max(1, int(placement.max_retrieval_batch))


def _generation_cap(placement: Placement | None) -> int:
    if placement is None:
        return DEFAULT_GENERATION_CAP
    return max(1, int(placement.max_batch))
