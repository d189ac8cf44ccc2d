"""The two workers with fake batch functions: batch sizes, ordering, hand-over,
streams, cancellation, faults, and placement changes between batches."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import pytest

from engine.rag.pipeline.batching import choose_batch
from engine.rag.pipeline.policies import Fits, Placing, Scheduling
from engine.rag.pipeline.requests import Finished, Piece, Question, RequestHandle, Retrieved
from engine.rag.pipeline.stages import DONE, GenerationJob, Stages
from engine.rag.pipeline.workers import MAX_RETRIEVAL_DEFER_S, Pipeline
from engine.runtime.planner.profiling import PowerLawFit


@dataclass(frozen=True, kw_only=True)
class FakePlacement:
    batch: int
    max_batch: int
    max_retrieval_batch: int
    resident_partition_bytes: int = 0


class FakeClock:
    def __init__(self) -> None:
        self.now = 0.0
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            return self.now

    def advance(self, seconds: float) -> None:
        with self._lock:
            self.now += seconds


def law(a: float, c: float) -> PowerLawFit:
    return PowerLawFit(a=a, c=c, r2=1.0, samples=())


class Fakes:
    """retrieve_batch / generate_batch that record their batches and take T(B) on the clock."""

    def __init__(self, *, clock: FakeClock, retrieval: PowerLawFit, generation: PowerLawFit):
        self.clock = clock
        self.retrieval = retrieval
        self.generation = generation
        self.retrieval_batches: list[list[str]] = []
        self.generation_batches: list[list[str]] = []
        self.pieces = 3

    def retrieve(self, questions: Sequence[Question]) -> list[str]:
        self.retrieval_batches.append([q.text for q in questions])
        self.clock.advance(self.retrieval.predict(batch=len(questions)))
        return [f"hits({q.text})" for q in questions]

    def generate(self, jobs: Sequence[GenerationJob]) -> Iterator[tuple[str, object]]:
        self.generation_batches.append([j.question.text for j in jobs])
        step = self.generation.predict(batch=len(jobs)) / self.pieces
        for i in range(self.pieces):
            self.clock.advance(step)
            for j in jobs:
                if not j.cancel.is_set():
                    yield j.request_id, f"{j.question.text}:{i} "
        for j in jobs:
            yield j.request_id, DONE


RETRIEVAL_FIT = law(0.1, 0.2)
GENERATION_FIT = law(1.0, 0.5)


def manual(
    *,
    retrieval: PowerLawFit = RETRIEVAL_FIT,
    generation: PowerLawFit = GENERATION_FIT,
    placement: FakePlacement | None = None,
) -> tuple[Pipeline, Fakes, FakeClock]:
    clock = FakeClock()
    fakes = Fakes(clock=clock, retrieval=retrieval, generation=generation)
    pipe = Pipeline(
        stages=Stages(
            retrieve=fakes.retrieve,
            generate=fakes.generate,
        ),
        placing=Placing(
            placement=placement,
        ),
        fits=Fits(
            retrieval=retrieval,
            generation=generation,
        ),
        clock=clock,
        start=False,
    )
    return pipe, fakes, clock


def test_each_worker_batches_by_its_own_fit_and_hands_over_at_once() -> None:
    # Retrieval: c = 0.2 → one batch of everything waiting (eq. 8).
    # Generation: c = 0.9 → batches of one.
    pipe, fakes, _ = manual(retrieval=law(0.1, 0.2), generation=law(1.0, 0.9))
    handles = [pipe.submit(question=f"q{i}") for i in range(8)]
    assert pipe.status().retrieval.queue_length == 8
    assert pipe.retrieval.run_once()
    assert fakes.retrieval_batches == [[f"q{i}" for i in range(8)]]
    status = pipe.status()
    assert (status.retrieval.queue_length, status.generation.queue_length) == (0, 8)
    assert status.retrieval.last_batch_size == 8
    assert all(isinstance(next(h.events(timeout=1)), Retrieved) for h in handles)
    assert pipe.generation.run_once()
    assert [len(b) for b in fakes.generation_batches] == [1]
    assert pipe.status().generation.batch_size == choose_batch(n=8, cap=8, fit=law(1.0, 0.9)).size


def test_generation_batch_size_matches_eq_4_8_and_placement_cap() -> None:
    pipe, fakes, _ = manual(
        generation=law(1.0, 0.7),
        placement=FakePlacement(batch=4, max_batch=16, max_retrieval_batch=64),
    )
    for i in range(8):
        pipe.submit(question=f"q{i}")
    pipe.retrieval.run_once()
    pipe.generation.run_once()
    # c = 0.7, n = 8: k = 2 minimises (k+1)/2·T(n/k)
    assert [len(b) for b in fakes.generation_batches] == [4]
    pipe.set_placement(FakePlacement(batch=2, max_batch=2, max_retrieval_batch=64))
    pipe.generation.run_once()
    assert [len(b) for b in fakes.generation_batches] == [4, 2]
    assert pipe.status().generation.cap == 2
    assert pipe.status().placement_batch == 2


def test_interactive_overtakes_queued_background_work() -> None:
    pipe, fakes, clock = manual(
        placement=FakePlacement(batch=1, max_batch=1, max_retrieval_batch=1)
    )
    for i in range(3):
        pipe.submit(question=f"bg{i}", priority="background")
    clock.advance(2.0)
    pipe.submit(question="chat", priority="interactive")
    while pipe.retrieval.run_once():
        pass
    assert fakes.retrieval_batches[0] == ["chat"]
    while pipe.generation.run_once():
        pass
    assert fakes.generation_batches[0] == ["chat"]


def test_background_is_served_within_the_bound_under_a_stream_of_chats() -> None:
    from engine.rag.pipeline.scheduler import SchedulerPolicy

    clock = FakeClock()
    fakes = Fakes(clock=clock, retrieval=law(1.0, 1.0), generation=law(1.0, 1.0))
    pipe = Pipeline(
        stages=Stages(
            retrieve=fakes.retrieve,
            generate=fakes.generate,
        ),
        scheduling=Scheduling(
            order=SchedulerPolicy(max_wait_s=5.0, weights={"interactive": 1e6, "background": 1.0}),
        ),
        placing=Placing(
            placement=FakePlacement(batch=1, max_batch=1, max_retrieval_batch=1),
        ),
        clock=clock,
        start=False,
    )
    bg = pipe.submit(question="bg", priority="background")
    for i in range(20):  # a chat arrives for every second of retrieval work
        pipe.submit(question=f"chat{i}")
        pipe.retrieval.run_once()
        pipe.generation.run_once()
    started = bg.times().retrieval_started
    assert started is not None and started <= 5.0 + 1.0  # the bound, plus the batch in flight
    assert bg.times().generation_started is not None


def test_pieces_stream_in_order_and_text_joins_them() -> None:
    pipe, _, _ = manual()
    seen: list[object] = []
    h = pipe.submit(question="alpha", on_event=seen.append)
    pipe.retrieval.run_once()
    pipe.generation.run_once()
    assert h.text(timeout=1) == "alpha:0 alpha:1 alpha:2 "
    assert isinstance(seen[0], Retrieved) and seen[0].hits == "hits(alpha)"
    assert [e.text for e in seen if isinstance(e, Piece)] == ["alpha:0 ", "alpha:1 ", "alpha:2 "]
    assert seen[-1] == Finished(status="done")
    t = h.times()
    assert t.submitted <= t.retrieval_started <= t.retrieved <= t.generation_started <= t.finished  # type: ignore[operator]


def test_cancel_while_queued_and_while_generating() -> None:
    pipe, fakes, _ = manual(generation=law(1.0, 0.2))
    queued = pipe.submit(question="never")
    queued.cancel()
    assert not pipe.retrieval.run_once()  # the only request left: nothing to run
    assert queued.outcome == Finished(status="cancelled")
    assert fakes.retrieval_batches == []

    a = pipe.submit(question="a")
    mine: list[RequestHandle] = []

    def cancel_after_first_piece(event: object) -> None:
        if isinstance(event, Piece):
            mine[0].cancel()

    b = pipe.submit(question="b", on_event=cancel_after_first_piece)
    mine.append(b)
    pipe.retrieval.run_once()
    pipe.generation.run_once()
    assert a.text(timeout=1) == "a:0 a:1 a:2 "
    assert b.outcome == Finished(status="cancelled")
    with pytest.raises(RuntimeError, match="cancelled"):
        b.text(timeout=1)


def test_a_failing_batch_fails_its_requests_and_the_worker_goes_on() -> None:
    clock = FakeClock()
    calls = {"n": 0}

    def flaky(questions: Sequence[Question]) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("disk went away")
        return ["hits"] * len(questions)

    fakes = Fakes(clock=clock, retrieval=law(1, 1), generation=law(1, 1))
    pipe = Pipeline(
        stages=Stages(
            retrieve=flaky,
            generate=fakes.generate,
        ),
        placing=Placing(
            placement=FakePlacement(batch=1, max_batch=1, max_retrieval_batch=1),
        ),
        clock=clock,
        start=False,
    )
    bad = pipe.submit(question="first")
    good = pipe.submit(question="second")
    pipe.retrieval.run_once()
    pipe.retrieval.run_once()
    pipe.generation.run_once()
    assert bad.outcome is not None and bad.outcome.status == "error"
    assert "disk went away" in bad.outcome.error
    assert good.text(timeout=1) == "second:0 second:1 second:2 "
    assert pipe.status().finished == 2


def test_wrong_number_of_results_is_an_error_not_a_hang() -> None:
    pipe = Pipeline(
        stages=Stages(
            retrieve=lambda qs: [],
            generate=lambda jobs: iter(()),
        ),
        start=False,
    )
    h = pipe.submit(question="x")
    pipe.retrieval.run_once()
    assert h.outcome is not None and h.outcome.status == "error"


def test_empty_question_is_refused() -> None:
    pipe, _, _ = manual()
    with pytest.raises(ValueError):
        pipe.submit(question="  ")
    with pytest.raises(ValueError):
        pipe.submit(question="ok", priority="urgent")  # type: ignore[arg-type]


def test_close_tells_waiting_requests() -> None:
    pipe, _, _ = manual()
    h = pipe.submit(question="left behind")
    pipe.close()
    assert h.outcome is not None and h.outcome.status == "cancelled"
    late = pipe.submit(question="after close")
    assert late.outcome is not None and late.outcome.status == "cancelled"


def test_hand_over_moves_waiting_questions_to_the_new_pipeline() -> None:
    """A model change: what the old pipeline had not begun to generate is answered
    by the new one (retrieved questions keep their sources), and both count it."""
    old, old_fakes, _ = manual(retrieval=law(0.1, 0.2), generation=law(1.0, 0.9))
    new, new_fakes, _ = manual(retrieval=law(0.1, 0.2), generation=law(1.0, 0.9))
    retrieved = [old.submit(question=f"r{i}") for i in range(3)]
    assert old.retrieval.run_once()  # these three wait for generation now
    waiting = [old.submit(question=f"w{i}") for i in range(2)]  # still before retrieval

    assert old.hand_over(to=new) == 5
    assert new.status().generation.queue_length == 3
    assert new.status().retrieval.queue_length == 2
    while new.retrieval.run_once() or new.generation.run_once():
        pass
    for h in retrieved + waiting:
        assert h.outcome is not None and h.outcome.status == "done", h.request_id
        assert h.text().startswith(h.question.text + ":0")
    assert old_fakes.generation_batches == []
    assert sorted(q for b in new_fakes.retrieval_batches for q in b) == ["w0", "w1"]
    assert sorted(q for b in new_fakes.generation_batches for q in b) == [
        "r0",
        "r1",
        "r2",
        "w0",
        "w1",
    ]
    assert new.idle() and old.idle()
    assert new.status().finished == 5
    late = old.submit(question="after the change")
    assert late.outcome is not None and late.outcome.status == "cancelled"


def test_placement_changes_mid_run_lose_no_request_and_land_between_batches() -> None:
    """Threads, the real clock: requests arrive from several threads while placements
    change; every request finishes with its own answer, and no placement hook ran
    while its worker had a batch in flight."""
    in_batch = {"retrieval": 0, "generation": 0}
    violations: list[str] = []
    applied: dict[str, list[int]] = {"retrieval": [], "generation": []}
    guard = threading.Lock()

    def retrieve(questions: Sequence[Question]) -> list[str]:
        with guard:
            in_batch["retrieval"] += 1
        time.sleep(0.004)
        with guard:
            in_batch["retrieval"] -= 1
        return [q.text.upper() for q in questions]

    def generate(jobs: Sequence[GenerationJob]) -> Iterator[tuple[str, object]]:
        with guard:
            in_batch["generation"] += 1
        try:
            for j in jobs:
                time.sleep(0.001)
                yield j.request_id, f"{j.question.text}->{j.hits}"
                yield j.request_id, DONE
        finally:
            with guard:
                in_batch["generation"] -= 1

    def hook(name: str):  # type: ignore[no-untyped-def]
        def apply(placement: FakePlacement) -> None:
            with guard:
                if in_batch[name]:
                    violations.append(name)
            applied[name].append(placement.max_batch)

        return apply

    pipe = Pipeline(
        stages=Stages(
            retrieve=retrieve,
            generate=generate,
        ),
        placing=Placing(
            placement=FakePlacement(batch=4, max_batch=4, max_retrieval_batch=8),
            apply_to_store=hook("retrieval"),
            apply_to_executor=hook("generation"),
        ),
    )
    handles = []
    handles_lock = threading.Lock()

    def client(c: int) -> None:
        for i in range(10):
            h = pipe.submit(question=f"c{c}q{i}", priority="background" if c % 2 else "interactive")
            with handles_lock:
                handles.append(h)
            time.sleep(0.002)

    try:
        clients = [threading.Thread(target=client, args=(c,)) for c in range(4)]
        for t in clients:
            t.start()
        for size in (1, 8, 2, 16, 3):
            pipe.set_placement(FakePlacement(batch=size, max_batch=size, max_retrieval_batch=size))
            time.sleep(0.01)
        for t in clients:
            t.join()
        for h in handles:
            assert h.wait(timeout=20), h.request_id
        assert len(handles) == 40
        for h in handles:
            assert h.text(timeout=1) == f"{h.question.text}->{h.question.text.upper()}"
        assert violations == []
        assert applied["retrieval"] == applied["generation"] == [1, 8, 2, 16, 3]
        status = pipe.status()
        assert status.submitted == status.finished == 40
        assert status.retrieval.placements_applied == status.generation.placements_applied == 5
        assert status.generation.cap == 3
    finally:
        pipe.close()


def test_observed_batch_times_refit_the_curve_and_change_the_choice() -> None:
    # Profiled: c = 0.2 (take the whole backlog). The machine really runs linearly.
    clock = FakeClock()
    fakes = Fakes(clock=clock, retrieval=law(0.5, 1.0), generation=law(1.0, 0.5))
    pipe = Pipeline(
        stages=Stages(
            retrieve=fakes.retrieve,
            generate=fakes.generate,
        ),
        fits=Fits(
            retrieval=law(0.5, 0.2),
        ),
        clock=clock,
        start=False,
    )
    for n in (1, 2, 4, 8):
        for i in range(n):
            pipe.submit(question=f"warm{n}-{i}")
        pipe.retrieval.run_once()
    assert [len(b) for b in fakes.retrieval_batches] == [1, 2, 4, 8]
    status = pipe.status().retrieval
    assert status.fit_online
    assert status.fit_c == pytest.approx(1.0)
    assert status.fit_a == pytest.approx(0.5)
    for i in range(8):
        pipe.submit(question=f"late{i}")
    pipe.retrieval.run_once()
    assert len(fakes.retrieval_batches[-1]) == 1  # c = 1: batches of one minimise the mean


def test_duplicate_live_request_id_is_refused_and_a_failing_listener_cancels_only_its_own() -> None:
    pipe, _, _ = manual()
    pipe.submit(question="one", request_id="r1")
    with pytest.raises(ValueError, match="already"):
        pipe.submit(question="two", request_id="r1")

    def broken(event: object) -> None:
        raise RuntimeError("listener gone")

    bad = pipe.submit(question="bad", on_event=broken)
    pipe.retrieval.run_once()
    pipe.generation.run_once()
    assert bad.outcome == Finished(status="cancelled")
    assert pipe.status().finished == 2
    again = pipe.submit(question="one again", request_id="r1")  # r1 finished: free again
    assert again.request_id == "r1"


def test_retrieval_waits_for_company_only_while_generation_is_backed_up() -> None:
    # Generation cap 2, T_gen(2) = 2^0.5 s; retrieval T(B) = 0.1·B^0.2 s.
    placement = FakePlacement(batch=2, max_batch=2, max_retrieval_batch=64)
    pipe, _, clock = manual(placement=placement)
    assert pipe.retrieval_slack(0.0, 1) <= 0  # nothing queued for generation: go now
    for i in range(5):
        pipe.submit(question=f"q{i}")
    assert pipe.retrieval.run_once()  # five retrieved: two whole batches wait to generate
    ahead = 2 * GENERATION_FIT.predict(batch=2)
    assert pipe.generation.queued_s() == pytest.approx(ahead)
    slack = pipe.retrieval_slack(0.0, 1)
    assert slack == pytest.approx(ahead - RETRIEVAL_FIT.predict(batch=2))
    # Bounded: the oldest question never waits past MAX_RETRIEVAL_DEFER_S.
    assert pipe.retrieval_slack(MAX_RETRIEVAL_DEFER_S, 1) <= 0
    assert pipe.generation.run_once()  # one batch of two leaves: one whole batch waits
    assert pipe.retrieval_slack(0.0, 1) == pytest.approx(
        GENERATION_FIT.predict(batch=2) - RETRIEVAL_FIT.predict(batch=2)
    )
    # Without a fit there is no estimate, and no waiting.
    blind = Pipeline(
        stages=Stages(
            retrieve=lambda qs: [None] * len(qs),
            generate=lambda jobs: iter(()),
        ),
        clock=clock,
        start=False,
    )
    assert blind.retrieval_slack(0.0, 1) == 0.0


def test_a_deferring_worker_forms_one_batch_of_those_that_came_meanwhile() -> None:
    # The worker's thread: while `defer` says wait, arrivals join the next batch.
    batches: list[int] = []
    done = threading.Event()

    def retrieve(questions: Sequence[Question]) -> list[None]:
        batches.append(len(questions))
        done.set()
        return [None] * len(questions)

    pipe = Pipeline(
        stages=Stages(
            retrieve=retrieve,
            generate=lambda jobs: iter([(j.request_id, DONE) for j in jobs]),
        ),
        scheduling=Scheduling(
            retrieval_waits_for_company=False,
        ),
        fits=Fits(
            retrieval=law(0.1, 0.1),
        ),
    )
    try:
        pipe.retrieval._defer = lambda waited, waiting: 5.0 if waiting < 3 else 0.0
        for i in range(3):
            pipe.submit(question=f"q{i}")
            time.sleep(0.12)  # longer than the idle poll: the worker looked meanwhile
        assert done.wait(5.0)
        assert batches == [3]
        assert pipe.status().retrieval.queue_length == 0
    finally:
        pipe.close(timeout=5.0)


def test_generation_queue_is_counted_in_batches_of_the_size_eq_4_8_would_take() -> None:
    # c = 0.9: eq. 4-8 take one request at a time, so with the cap at 8 and four
    # waiting, a question queued now starts after four batches of one.
    placement = FakePlacement(batch=8, max_batch=8, max_retrieval_batch=64)
    pipe, _, _ = manual(generation=law(1.0, 0.9), placement=placement)
    for i in range(4):
        pipe.submit(question=f"q{i}")
    assert pipe.retrieval.run_once()
    assert pipe.generation.queued_s() == pytest.approx(4 * law(1.0, 0.9).predict(batch=1))
