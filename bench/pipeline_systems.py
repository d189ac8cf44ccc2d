"""The four systems of `ragdoll bench pipeline`, each fed the same arrivals.

- `ragdoll`: engine/rag/pipeline's Pipeline, retrieval and generation workers decoupled,
  each stage's batch size by eq. 4–8 (its profiled fit, refitted online), the
  layer-streaming executor under the planner's Placement;
- `serial_accelerate` (the paper's AccRAG): one loop takes up to 4λ waiting requests in
  arrival order, retrieves them as a batch, then generates them as a batch with
  transformers + Accelerate disk offloading of the same layers; no overlap;
- `no_pipeline` (the paper's "without pipelined design"): the same executor and
  adaptive batch sizes, but retrieval and generation serial in one loop (one batch size
  for both stages, chosen on the two stages' time in series);
- `fixed_batch` (the paper's "without dynamic batch size"): the Pipeline with a static
  generation batch size, min(waiting, size).

Every system retrieves with the same store and embedder, builds the same prompts and
writes exactly `output_tokens` tokens per request (no stop tokens), so the work is equal.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from bench.pipeline_workload import Arrival, Schedule
from engine.rag.answer.generative import GenerativeAnswerer
from engine.rag.pipeline.adapters import executor_generate_batch, hits_of, passages_of
from engine.rag.pipeline.batching import BatchModel, FixedBatch, observe
from engine.rag.pipeline.policies import Fits, Placing, Scheduling
from engine.rag.pipeline.requests import Question, new_question
from engine.rag.pipeline.stages import DONE, GenerationJob, RetrieveBatch, Stages
from engine.rag.pipeline.workers import Pipeline
from engine.rag.store.records import SearchResult
from engine.runtime.executor.generate import left_pad
from engine.runtime.planner.placement import Placement
from engine.runtime.planner.profiling import PowerLawFit

SYSTEMS = ("ragdoll", "serial_accelerate", "no_pipeline", "fixed_batch")
_POLL_S = 0.2  # how often the pipeline's status is sampled for the timeline


def bench_answerer(
    *, model_dir: Path, placement: Placement, dtype: str = "float32"
) -> GenerativeAnswerer:
    """The product's answerer under `placement`, with the disk layers dropped from the
    page cache after each read (as the Accelerate baseline is made to) and no stop
    tokens, so every answer has the fixed length."""
    from engine.rag.answer.in_use import open_model

    return open_model(
        model_path=model_dir,
        placement=placement,
        dtype=dtype,
        evict_after_read=True,
        stop_at_eos=False,
    ).answerer


def prompt_ids(
    *, answerer: GenerativeAnswerer, question: Question, hits: Any, output_tokens: int
) -> tuple[int, ...]:
    """The prompt the pipelines build for this question, as token ids."""
    return answerer.prompt_request(
        question=question.text,
        passages=passages_of(hits_of(hits)),
        max_new_tokens=output_tokens,
    ).prompt_ids


@dataclass(frozen=True, kw_only=True)
class Setup:
    """What every system shares: arrivals, retrieval, model and limits."""

    schedule: Schedule
    retrieve: RetrieveBatch
    answerer: GenerativeAnswerer
    placement: Placement
    generation_fit: PowerLawFit | None
    output_tokens: int
    k: int
    drain_s: float  # after the last arrival, how long a system may take to finish
    retrieval_fit: PowerLawFit | None = None  # None: the retrieval worker takes all waiting
    cycle_fit: PowerLawFit | None = None  # retrieval + generation in series (no_pipeline)
    retrieval_waits: bool = True  # the Pipeline's retrieval waits for company (the default)


@dataclass(frozen=True, kw_only=True)
class RequestRecord:
    """Seconds after the workload's start; stages not reached are None."""

    index: int
    interval: int
    submitted: float
    retrieval_started: float | None
    retrieved: float | None
    generation_started: float | None
    finished: float | None
    status: str  # "done", "unfinished" (past the drain limit), "error", "cancelled"
    not_found: bool = False


@dataclass(frozen=True, kw_only=True)
class BatchPoint:
    worker: str  # "retrieval" or "generation"
    started: float  # seconds after the workload's start
    seconds: float
    size: int
    backlog: int
    cap: int


@dataclass(frozen=True, kw_only=True)
class SystemRun:
    name: str
    requests: tuple[RequestRecord, ...]
    batches: tuple[BatchPoint, ...]
    wall_s: float
    stopped_at: float  # seconds after the start when the run ended (unfinished censored here)
    notes: tuple[str, ...] = ()


def drive(*, arrivals: Sequence[Arrival], t0: float, submit: Callable[[Arrival], None]) -> None:
    """Submit each arrival at its time (late ones at once: the clock is the arrival)."""
    for a in arrivals:
        delay = t0 + a.at_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        submit(a)


# -- the Pipeline systems ------------------------------------------------------------------


def run_pipeline(*, setup: Setup, name: str, fixed_batch: int | None = None) -> SystemRun:
    pipe = Pipeline(
        stages=Stages(
            retrieve=setup.retrieve,
            generate=executor_generate_batch(answerer=setup.answerer),
        ),
        scheduling=Scheduling(
            generation_batch=FixedBatch(size=fixed_batch) if fixed_batch is not None else None,
            retrieval_waits_for_company=setup.retrieval_waits,
        ),
        placing=Placing(placement=setup.placement),
        fits=Fits(retrieval=setup.retrieval_fit, generation=setup.generation_fit),
    )
    t0 = time.monotonic()
    seen: dict[tuple[str, float], BatchPoint] = {}
    polling = threading.Event()

    def collect() -> None:
        status = pipe.status()
        for worker in (status.retrieval, status.generation):
            for r in worker.recent:
                seen[(worker.name, r.started)] = BatchPoint(
                    worker=worker.name,
                    started=r.started - t0,
                    seconds=r.seconds,
                    size=r.size,
                    backlog=r.backlog,
                    cap=r.cap,
                )

    def poll() -> None:
        # `recent` keeps the last 64 batches: sampled often enough to miss none, and
        # once more after the workers stopped, for the batches that ended last.
        while not polling.wait(_POLL_S):
            collect()
        collect()

    poller = threading.Thread(target=poll, name="bench-pipeline-status", daemon=True)
    poller.start()
    handles: list[tuple[Arrival, Any]] = []
    try:
        drive(
            arrivals=setup.schedule.arrivals,
            t0=t0,
            submit=lambda a: handles.append(
                (
                    a,
                    pipe.submit(
                        question=a.question,
                        priority="interactive",
                        k=setup.k,
                        max_new_tokens=setup.output_tokens,
                        request_id=f"r{a.index}",
                    ),
                )
            ),
        )
        deadline = time.monotonic() + setup.drain_s
        for _, h in handles:
            h.wait(timeout=max(0.0, deadline - time.monotonic()))
        stopped = time.monotonic() - t0
    finally:
        pipe.close(timeout=60.0)
        polling.set()
        poller.join()
    records = []
    for a, h in handles:
        t = h.times()
        outcome = h.outcome
        done = outcome is not None and outcome.status == "done" and t.finished is not None
        records.append(
            RequestRecord(
                index=a.index,
                interval=a.interval,
                submitted=t.submitted - t0,
                retrieval_started=_rel(t.retrieval_started, t0),
                retrieved=_rel(t.retrieved, t0),
                generation_started=_rel(t.generation_started, t0),
                finished=_rel(t.finished, t0) if done else None,
                status="done" if done else "unfinished",
                not_found=isinstance(h.hits, SearchResult) and h.hits.not_found,
            )
        )
    return SystemRun(
        name=name,
        requests=tuple(records),
        batches=tuple(sorted(seen.values(), key=lambda b: (b.started, b.worker))),
        wall_s=time.monotonic() - t0,
        stopped_at=stopped,
    )


def _rel(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


# -- the serial loops --------------------------------------------------------------------


@dataclass(kw_only=True)
class _Waiting:
    arrival: Arrival
    question: Question
    submitted: float
    stamps: dict[str, float] = field(default_factory=dict)
    not_found: bool = False


# (batch, hits per member) -> {request index: finished time (monotonic)}
GenerateLoopBatch = Callable[[list[_Waiting], list[Any]], dict[int, float]]


def run_serial(
    *,
    setup: Setup,
    name: str,
    batch_size: Callable[[int, float], tuple[int, int]],
    generate: GenerateLoopBatch,
    observe_batch: Callable[[int, float], None] = lambda _b, _s: None,
) -> SystemRun:
    """One loop: take a batch of waiting requests in arrival order, retrieve it, then
    generate it; `batch_size(backlog, now) -> (size, cap)` picks how many."""
    cond = threading.Condition()
    waiting: list[_Waiting] = []
    done: list[_Waiting] = []
    batches: list[BatchPoint] = []
    stop = threading.Event()
    t0 = time.monotonic()
    total = len(setup.schedule.arrivals)

    def loop() -> None:
        while not stop.is_set():
            with cond:
                if not waiting:
                    cond.wait(0.05)
                    continue
                backlog = len(waiting)
                size, cap = batch_size(backlog, time.monotonic() - t0)
                batch, waiting[:] = waiting[:size], waiting[size:]
            start = time.monotonic()
            for w in batch:
                w.stamps["retrieval_started"] = start
            results = list(setup.retrieve([w.question for w in batch]))
            retrieved = time.monotonic()
            for w, hits in zip(batch, results, strict=True):
                w.stamps["retrieved"] = w.stamps["generation_started"] = retrieved
                w.not_found = isinstance(hits, SearchResult) and hits.not_found
            finished = generate(batch, results)
            end = time.monotonic()
            for w in batch:
                if w.arrival.index in finished:
                    w.stamps["finished"] = finished[w.arrival.index]
            observe_batch(len(batch), end - start)
            batches.append(
                BatchPoint(
                    worker="retrieval",
                    started=start - t0,
                    seconds=retrieved - start,
                    size=len(batch),
                    backlog=backlog,
                    cap=cap,
                )
            )
            batches.append(
                BatchPoint(
                    worker="generation",
                    started=retrieved - t0,
                    seconds=end - retrieved,
                    size=len(batch),
                    backlog=backlog,
                    cap=cap,
                )
            )
            with cond:
                done.extend(batch)
                cond.notify_all()

    worker = threading.Thread(target=loop, name=f"bench-{name}", daemon=True)
    worker.start()
    submitted: list[_Waiting] = []

    def submit(a: Arrival) -> None:
        w = _Waiting(
            arrival=a,
            question=new_question(text=a.question, k=setup.k, max_new_tokens=setup.output_tokens),
            submitted=time.monotonic(),
        )
        with cond:
            submitted.append(w)
            waiting.append(w)
            cond.notify_all()

    drive(arrivals=setup.schedule.arrivals, t0=t0, submit=submit)
    deadline = time.monotonic() + setup.drain_s
    with cond:
        while len(done) < total and time.monotonic() < deadline:
            cond.wait(min(1.0, max(0.0, deadline - time.monotonic())))
    stopped = time.monotonic() - t0
    stop.set()
    worker.join(timeout=120.0)
    records = []
    for w in submitted:
        s = w.stamps
        fin = s.get("finished")
        records.append(
            RequestRecord(
                index=w.arrival.index,
                interval=w.arrival.interval,
                submitted=w.submitted - t0,
                retrieval_started=_rel(s.get("retrieval_started"), t0),
                retrieved=_rel(s.get("retrieved"), t0),
                generation_started=_rel(s.get("generation_started"), t0),
                finished=_rel(fin, t0) if fin is not None and fin - t0 <= stopped else None,
                status="done" if fin is not None and fin - t0 <= stopped else "unfinished",
                not_found=w.not_found,
            )
        )
    return SystemRun(
        name=name,
        requests=tuple(records),
        batches=tuple(batches),
        wall_s=time.monotonic() - t0,
        stopped_at=stopped,
    )


def run_no_pipeline(*, setup: Setup) -> SystemRun:
    """The executor and eq. 4–8 batch sizes in one serial loop: one batch size for both
    stages, from the profiled fit of the two in series (generation's alone when none was
    profiled), refitted online over whole cycles, since a cycle is this loop's service
    time."""
    model = [BatchModel(profiled=setup.cycle_fit or setup.generation_fit)]
    cap = max(1, int(setup.placement.max_batch))
    generate_batch = executor_generate_batch(answerer=setup.answerer)

    def size(backlog: int, _now: float) -> tuple[int, int]:
        return model[0].choose(n=backlog, cap=cap).size, cap

    def observe_batch(batch: int, seconds: float) -> None:
        model[0] = observe(model[0], batch=batch, seconds=seconds)

    def generate(batch: list[_Waiting], results: list[Any]) -> dict[int, float]:
        jobs = [
            GenerationJob(
                request_id=str(w.arrival.index),
                question=w.question,
                hits=hits,
                cancel=threading.Event(),
            )
            for w, hits in zip(batch, results, strict=True)
        ]
        finished: dict[int, float] = {}
        for request_id, piece in generate_batch(jobs):
            if piece is DONE:
                finished[int(request_id)] = time.monotonic()
        return finished

    return run_serial(
        setup=setup,
        name="no_pipeline",
        batch_size=size,
        generate=generate,
        observe_batch=observe_batch,
    )


def run_serial_accelerate(*, setup: Setup, hf: Any) -> SystemRun:
    """The paper's AccRAG: batches of 4λ(t) in arrival order, transformers `generate`
    over the Accelerate-offloaded model, retrieval and generation one after the other."""
    schedule = setup.schedule
    answerer = setup.answerer
    pad = answerer.pad_token_id

    def size(backlog: int, now: float) -> tuple[int, int]:
        cap = schedule.accelerate_batches[schedule.interval_at(now)]
        return min(backlog, cap), cap

    def generate(batch: list[_Waiting], results: list[Any]) -> dict[int, float]:
        rows = [
            (
                w,
                prompt_ids(
                    answerer=answerer,
                    question=w.question,
                    hits=hits,
                    output_tokens=setup.output_tokens,
                ),
            )
            for w, hits in zip(batch, results, strict=True)
            if not (isinstance(hits, SearchResult) and hits.not_found)
        ]
        finished = {w.arrival.index: time.monotonic() for w in batch if w.not_found}
        if rows:
            ids, mask = left_pad([p for _, p in rows], pad=pad)
            with torch.inference_mode():
                out = hf.generate(
                    input_ids=ids.to(hf.device),
                    attention_mask=mask.to(hf.device),
                    max_new_tokens=setup.output_tokens,
                    min_new_tokens=setup.output_tokens,
                    do_sample=False,
                    pad_token_id=pad,
                )
            if out.shape[1] - ids.shape[1] != setup.output_tokens:
                raise RuntimeError(
                    f"Accelerate wrote {out.shape[1] - ids.shape[1]} tokens, "
                    f"not {setup.output_tokens}"
                )
            now = time.monotonic()
            finished |= {w.arrival.index: now for w, _ in rows}
        return finished

    return run_serial(setup=setup, name="serial_accelerate", batch_size=size, generate=generate)
