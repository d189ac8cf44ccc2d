"""`ragdoll bench product_ttft`: issue #39's product target, side by side in one run.

RAGDoll's engine, with a local GGUF model chosen as a user chooses it (`ragdoll model`:
PUT /v1/settings/model), answers questions over real manuals through its
OpenAI-compatible API, streamed, one at a time, after one warm-up question reported
apart; its time to first token is timed at the client, as an application sees it. A
moment after each answer, llama.cpp (llama-cpp-python, in a process of its own beside the
idle engine, the model loaded before any timing, a fresh context per prompt, the engine's
thread count) prefills the very prompt ids the engine fed its model (rebuilt by the
engine's own prompt builder from the sources the answer cites and checked against the
length the engine reported: bench/product_ttft_prompt.py), so that both sides of a
question meet the same load of a shared machine. Per question: TTFT − llama.cpp's
prefill; the target is a median ≤ 1 s. The engine's own split of each request
(waiting, retrieval with the relevance gate, the rest up to the first token) comes from
its status (GET /v1/status, the pipeline's recent requests).

Needs the model (`python -m bench.real_models`), the documents
(`python -m bench.real_docs`) and, for llama.cpp's side, llama-cpp-python
(`pip install -e '.[bench-peers]'`; without it RAGDoll's side is still measured).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from bench.offload_systems import load_average
from bench.product_ttft_report import (
    EngineSplit,
    QuestionTiming,
    as_json,
    report_lines,
    shared_start,
    summarise,
)
from bench.server import DEFAULT_DOCS, QUESTIONS

DEFAULT_MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"
TIMED = 5
WARM_UP_QUESTION = QUESTIONS[-1]  # not among the timed ones: nothing of it is reused


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--model", default=DEFAULT_MODEL, help="a GGUF file, or a model of bench/real_models.py"
    )
    parser.add_argument("--timed", type=int, default=TIMED, help="questions timed one at a time")
    parser.add_argument(
        "--max-tokens", type=int, default=8, help="tokens each answer writes (TTFT needs one)"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="llama.cpp's threads (default: torch's count here, which the engine uses)",
    )
    parser.add_argument(
        "--home",
        type=Path,
        default=None,
        help="the engine's home, kept (a rerun reuses its index and the model's repack)",
    )
    parser.add_argument(
        "--skip-profiling",
        action="store_true",
        help="skip the engine's first-start machine timing (the window's Skip) instead of "
        "waiting for it before the questions",
    )
    parser.add_argument(
        "--ask-while-timing",
        action="store_true",
        help="ask the first question as soon as the first-start machine timing is measuring "
        "(it should give way within a decode step) instead of waiting for it to end",
    )
    parser.add_argument(
        "--n-ctx", type=int, default=8192, help="llama.cpp's context (longer than any prompt)"
    )
    parser.add_argument(
        "--profiling-wait-s", type=float, default=1200.0, help="longest wait for machine timing"
    )


@dataclass(frozen=True, kw_only=True)
class Asked:
    """One question's answer as the client saw it."""

    question: str
    ttft_s: float | None
    text: str
    citations: list[dict[str, Any]]
    prompt_tokens: int | None
    split: EngineSplit | None
    engine_cpu_s: float | None  # the engine process's CPU seconds up to the first token


def _model_path(name: str) -> Path:
    from bench.real_models import fetch_hint, find_real_model

    given = Path(name).expanduser()
    if given.is_file():
        return given.resolve()
    found = find_real_model(name)
    if found is None:
        raise SystemExit(fetch_hint(name))
    return found


def run(args: argparse.Namespace) -> dict[str, Any]:
    import torch

    from bench.offload_llama import unavailable_reason
    from bench.real_docs import find_real_docs

    gguf = _model_path(args.model)
    corpus = find_real_docs()
    if corpus is None:
        raise SystemExit("the real documents are not here: python -m bench.real_docs")
    if args.quick:
        args.timed = min(args.timed, 2)
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    threads = args.threads or torch.get_num_threads()
    llama_missing = unavailable_reason()
    if llama_missing:
        say(f"llama.cpp: skipped: {llama_missing}")
    root = Path(tempfile.mkdtemp(prefix="ragdoll-bench-ttft-"))
    figures: dict[str, Any] = {
        "model": str(gguf),
        "docs": list(DEFAULT_DOCS),
        "max_tokens": args.max_tokens,
        "threads": threads,
        "cpus": os.cpu_count(),
        "load_before": os.getloadavg(),
        "llama_skipped": llama_missing,
    }
    say(f"model {gguf.name}; llama.cpp threads {threads}; load {load_average()}")
    try:
        timings = _measure(
            args=args,
            gguf=gguf,
            corpus=corpus,
            home=args.home or root / "home",
            threads=None if llama_missing else threads,
            figures=figures,
            say=say,
        )
    finally:
        figures["load_after"] = os.getloadavg()
        shutil.rmtree(root, ignore_errors=True)
    warm, timed = timings[0], timings[1:]
    summary = summarise(timings=timed)
    say("")
    for line in report_lines(warm_up=warm, timings=timed, summary=summary):
        say(line)
    say(f"load average before {figures['load_before']}, after {figures['load_after']}")
    figures.update(as_json(warm_up=warm, timings=timed, summary=summary))
    return figures


def _measure(
    *,
    args: argparse.Namespace,
    gguf: Path,
    corpus: Path,
    home: Path,
    threads: int | None,
    figures: dict[str, Any],
    say: Callable[[str], None],
) -> list[QuestionTiming]:
    """The engine on the manuals with the model chosen; then each question asked through
    the API and, a moment later, its prompt prefilled by llama.cpp (`threads` None: not)."""
    from bench.offload_real import _home
    from bench.product_ttft_llama import LlamaPrefiller
    from bench.product_ttft_prompt import PromptRebuilder
    from bench.server import _engine
    from engine.runtime.models.resolve import resolve_model_path

    # In the kept home when there is one: the same paths again are a rescan, not copies.
    docs = home / "bench-manuals"
    docs.mkdir(parents=True, exist_ok=True)
    for name in DEFAULT_DOCS:
        shutil.copy(corpus / name, docs / name)
    with _engine(home=home) as client:
        started = time.perf_counter()
        job = client.add_paths(paths=[str(docs)])
        for _ in client.ingest_events(job_id=job.job_id):
            pass
        figures["ingest_s"] = round(time.perf_counter() - started, 1)
        say(
            f"indexed {len(DEFAULT_DOCS)} manuals in {figures['ingest_s']} s; load {load_average()}"
        )
        started = time.perf_counter()
        client.set_model(model=str(gguf))
        figures["model_load_s"] = round(time.perf_counter() - started, 1)
        say(f"model chosen and loaded in {figures['model_load_s']} s; load {load_average()}")
        figures["profiling"] = _profiling(client, args=args, say=say)
        with _home(home):  # the GGUF's companion folder (tokenizer, config), the engine's
            rebuilder = PromptRebuilder(model_folder=resolve_model_path(model=str(gguf)))
        with contextlib.ExitStack() as stack:
            llama = None
            if threads is not None:
                llama = stack.enter_context(
                    LlamaPrefiller(gguf=gguf, threads=threads, n_ctx=args.n_ctx)
                )
                figures["llama_load_s"] = round(llama.load_s or 0.0, 2)
                say(f"llama.cpp loaded in {figures['llama_load_s']} s ({threads} threads)")
            out: list[QuestionTiming] = []
            last: tuple[int, ...] = ()
            for i, question in enumerate([WARM_UP_QUESTION, *QUESTIONS[: args.timed]]):
                asked = _ask(client, question=question, args=args)
                timing, ids = _side_by_side(
                    asked=asked, rebuilder=rebuilder, llama=llama, args=args, last=last
                )
                out.append(timing)
                last = ids or last
                say(_progress(out[-1], label="warm-up" if i == 0 else f"question {i}"))
                if i == 0 and args.ask_while_timing:
                    after = client.status().profiling
                    figures["profiling"]["after_first_question"] = (
                        after.state if after is not None else None
                    )
                    say(f"machine timing after the first answer: {after}")
    return out


def _side_by_side(
    *, asked: Asked, rebuilder: Any, llama: Any, args: argparse.Namespace, last: tuple[int, ...]
) -> tuple[QuestionTiming, tuple[int, ...]]:
    """One question's two sides, and the prompt ids (empty: no model answer)."""
    prompt = None
    if asked.citations and asked.ttft_s is not None:
        prompt = rebuilder.rebuild(
            question=asked.question,
            citations=asked.citations,
            max_new_tokens=args.max_tokens,
            engine_prompt_tokens=asked.prompt_tokens,
        )
    note = ""
    if prompt is None:
        note = "no model answer (refused or no text): not compared"
    elif not prompt.checked:
        note = f"rebuilt prompt {len(prompt.ids)} tokens, the engine's {asked.prompt_tokens}"
    prefill, llama_cpu = (
        llama.prefill(list(prompt.ids)) if llama is not None and prompt else (None, None)
    )
    ids = prompt.ids if prompt is not None else ()
    timing = QuestionTiming(
        question=asked.question,
        ttft_s=asked.ttft_s,
        prompt_tokens=asked.prompt_tokens or 0,
        prompt_checked=prompt is not None and prompt.checked,
        llama_prefill_s=prefill,
        split=asked.split,
        shared_start_tokens=shared_start(ids, last),
        engine_cores=_per_second(asked.engine_cpu_s, asked.ttft_s),
        llama_cores=_per_second(llama_cpu, prefill),
        note=note,
    )
    return timing, ids


def _per_second(cpu_s: float | None, wall_s: float | None) -> float | None:
    return None if cpu_s is None or not wall_s else cpu_s / wall_s


def _progress(timing: QuestionTiming, *, label: str) -> str:
    return (
        f"{label}: RAGDoll first token after {_fmt(timing.ttft_s)} s, llama.cpp prefill "
        f"{_fmt(timing.llama_prefill_s)} s, prompt {timing.prompt_tokens} tokens; "
        f"load {load_average()}"
    )


def _profiling(client: Any, *, args: argparse.Namespace, say: Callable[[str], None]) -> Any:
    """The engine times the machine with a newly chosen model (its profiler looks every
    CHECK_INTERVAL_S while idle). A question asked meanwhile stops it within a decode
    step (`--ask-while-timing` measures that); otherwise it is waited for (or skipped, as
    the window's Skip does) before the warm-up, so that no question is timed beside it,
    and its length reported apart."""
    from engine.service.profiling.auto_profile import CHECK_INTERVAL_S

    if args.ask_while_timing:
        return _timing_started(client, args=args, say=say)
    if args.skip_profiling:
        client.skip_profiling()  # stores the defaults for this model: nothing runs
    started = time.perf_counter()
    seen_running = False
    state = None
    while time.perf_counter() - started < args.profiling_wait_s:
        profiling = client.status().profiling
        state = profiling.state if profiling is not None else None
        if state == "running":
            seen_running = True
        elif seen_running or time.perf_counter() - started > CHECK_INTERVAL_S + 5:
            break  # it ran, or none was due within a check of the profiler
        time.sleep(1.0)
    waited = round(time.perf_counter() - started, 1)
    say(
        f"machine timing: {state} (ran: {seen_running}) after a wait of {waited} s; "
        f"load {load_average()}"
    )
    return {
        "state": state,
        "ran": seen_running,
        "waited_s": waited,
        "skipped_by_bench": args.skip_profiling,
    }


def _timing_started(client: Any, *, args: argparse.Namespace, say: Callable[[str], None]) -> Any:
    """Waits until the machine timing is timing (its samplers built), so that the
    warm-up question is asked during it: the person's first question on a first start."""
    started = time.perf_counter()
    message = state = None
    while time.perf_counter() - started < args.profiling_wait_s:
        profiling = client.status().profiling
        state = profiling.state if profiling is not None else None
        message = profiling.message if profiling is not None else None
        if state == "running" and (message or "").startswith("timing"):
            break
        if state in ("done", "skipped", "failed"):
            break
        time.sleep(0.2)
    waited = round(time.perf_counter() - started, 1)
    say(f"machine timing: {state} ({message}) after {waited} s: asking now; load {load_average()}")
    return {"state": state, "message": message, "waited_s": waited, "asked_while_timing": True}


def _ask(client: Any, *, question: str, args: argparse.Namespace) -> Asked:
    """One question through the OpenAI-compatible API, streamed, its usage asked for."""
    before = _requests(client)
    body = {
        "model": "ragdoll",
        "messages": [{"role": "user", "content": question}],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_tokens": args.max_tokens,
    }
    engine = psutil.Process(client.status().pid)
    cpu_before = _cpu(engine)
    cpu_first: float | None = None
    asked = time.perf_counter()
    first: float | None = None
    text = ""
    citations: list[dict[str, Any]] = []
    prompt_tokens = None
    with client._http.stream("POST", "/v1/chat/completions", json=body, timeout=3600) as response:
        if response.status_code != 200:
            response.read()
            raise RuntimeError(f"the engine answered {response.status_code}: {response.text}")
        for line in response.iter_lines():
            data = line[5:].strip() if line.startswith("data:") else ""
            if not data or data == "[DONE]":
                continue
            chunk = json.loads(data)
            citations = chunk.get("citations") or citations
            if chunk.get("usage"):
                prompt_tokens = chunk["usage"].get("prompt_tokens")
            for choice in chunk.get("choices", []):
                piece = (choice.get("delta") or {}).get("content") or ""
                if piece and first is None:
                    first = time.perf_counter()
                    cpu_first = _cpu(engine)
                text += piece
    return Asked(
        question=question,
        ttft_s=None if first is None else first - asked,
        text=text,
        citations=citations,
        prompt_tokens=prompt_tokens,
        split=_split(client, before=before),
        engine_cpu_s=None if cpu_first is None else cpu_first - cpu_before,
    )


def _cpu(process: Any) -> float:
    times = process.cpu_times()
    return float(times.user + times.system)


def _requests(client: Any) -> list[Any]:
    pipeline = client.status().pipeline
    return list(pipeline.requests) if pipeline is not None else []


def _split(client: Any, *, before: list[Any]) -> EngineSplit | None:
    """The answer's own RequestPoint: the newest one, once it is there (one at a time)."""
    for _ in range(50):
        now = _requests(client)
        if len(now) > len(before) or (now and before and now[-1] != before[-1]):
            point = now[-1]
            if point.ttft_s is None:
                return None
            return EngineSplit(
                waiting_s=point.waiting_s, retrieval_s=point.retrieval_s, ttft_s=point.ttft_s
            )
        time.sleep(0.1)
    return None


def _fmt(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds:.2f}"


def main() -> None:
    import sys

    from bench.runner import kind_parser, run_kind

    module = sys.modules[__name__]
    options = kind_parser(kind="product_ttft", module=module).parse_args()
    raise SystemExit(run_kind(kind="product_ttft", module=module, options=options))


if __name__ == "__main__":
    main()
