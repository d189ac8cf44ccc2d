"""`ragdoll bench pipeline`: RAGDoll's serving loop against serial RAG, side by side.

The paper's workload (§6.1) scaled to this machine (pipeline_workload.py): questions
about a generated corpus ingested into LanceDB on disk with the real MiniLM embedder,
top-5 chunks, a fixed output length, Poisson arrivals over four intervals of rising rate.
The rates follow from an active-profiling step (the executor's generation time at a few
batch sizes, which also gives the T(B) = a·B^c fit the adaptive batch sizes start from):
the last interval arrives `--load` times faster than one request at a time can be served.

The four systems (pipeline_systems.py) share the model (a random-weight Llama with every
other layer on disk, the page cache dropped after each read, as in `bench offload`), the
memory budget, the store and the arrivals. Reported per system: mean, p50, p95, p99 and
max end-to-end latency, the waiting / retrieval / generation breakdown (Table 1), and two
PNGs (Figure 7, Figure 9; pipeline_plots.py). Mean-latency ratios give the speedups.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from engine.answer.generative import GenerativeAnswerer
from engine.bench import offload_systems as offload
from engine.bench.pipeline_plots import latency_plot, schedule_plot
from engine.bench.pipeline_systems import (
    SYSTEMS,
    Setup,
    SystemRun,
    bench_answerer,
    run_no_pipeline,
    run_pipeline,
    run_serial_accelerate,
)
from engine.bench.pipeline_workload import Fact, ingest, schedule, write_corpus
from engine.executor.weights import checkpoint_files, evict_page_cache, index_checkpoint, layer_unit
from engine.hardware.profile import synthetic_profile
from engine.pipeline.adapters import executor_generate_batch, store_retrieve_batch
from engine.pipeline.requests import new_question
from engine.pipeline.workers import DONE, GenerationJob
from engine.planner.model_spec import load_model_spec
from engine.planner.profiling import PowerLawFit, fit_power_law

FULL = offload.Size(layers=8, hidden=512, intermediate=1408, heads=8, kv_heads=2)
QUICK = offload.Size(layers=4, hidden=256, intermediate=704, heads=4, kv_heads=2)
TOP_K = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--requests", type=int, help="expected arrivals (default 30; full 140): sets the window"
    )
    parser.add_argument(
        "--window", type=float, help="seconds of arrivals, all four intervals (overrides)"
    )
    parser.add_argument(
        "--load",
        type=float,
        default=2.5,
        help="last interval's rate × one request's service time (default 2.5: an overload)",
    )
    parser.add_argument("--output-tokens", type=int, help="tokens written per answer")
    parser.add_argument("--context", type=int, help="prompt + answer tokens (sources are cut)")
    parser.add_argument("--docs", type=int, help="documents in the generated corpus")
    parser.add_argument("--fixed-batch", type=int, help="the fixed-batch ablation's size")
    parser.add_argument(
        "--drain", type=float, help="seconds a system may take after the last arrival"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--seed", type=int, default=6, help="corpus, questions and arrivals")
    parser.add_argument(
        "--plots",
        type=Path,
        help="folder for the PNGs (default: the folder of --out, else a temp folder)",
    )
    parser.add_argument("--model-folder", type=Path, help="where the random model is written once")


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    size = QUICK if quick else FULL
    requests = args.requests or (30 if quick else 140)
    max_window = 20.0 if quick else 180.0
    output_tokens = args.output_tokens or (6 if quick else 16)
    context = args.context or (256 if quick else 320)
    docs = args.docs or (4 if quick else 24)
    plots = _plots_folder(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_at_start = _load()
    model_dir = offload.write_model(
        dtype="float32",
        folder=args.model_folder
        or Path(tempfile.gettempdir())
        / f"ragdoll-bench-pipeline-{size.layers}x{size.hidden}x{size.intermediate}",
        size=size,
    )
    tiers = ["cpu" if i % 2 == 0 else "disk" for i in range(size.layers)]
    sources = index_checkpoint(model_dir)
    disk_sources = [s for i, t in enumerate(tiers) if t == "disk" for s in sources[layer_unit(i)]]
    placement = offload.forced_placement(
        hardware=synthetic_profile(
            gpu_bytes=0, ram_bytes=64 * offload.GIB, disk_bytes=1000 * offload.GIB
        ),
        spec=load_model_spec(source=model_dir),
        layer_tiers=tiers,  # type: ignore[arg-type]
        depth=3,
    )
    root = Path(tempfile.mkdtemp(prefix="ragdoll-bench-pipeline-"))
    answerer: GenerativeAnswerer | None = None
    store: Any = None
    try:
        from engine.ingest.embedder import Embedder

        embedder = Embedder()
        facts = write_corpus(folder=root / "corpus", docs=docs, facts_per_doc=6, seed=args.seed)
        started = time.perf_counter()
        store, corpus = ingest(root=root, corpus=root / "corpus", embedder=embedder)
        corpus |= {"ingest_s": round(time.perf_counter() - started, 2), "questions": len(facts)}
        retrieve = store_retrieve_batch(store=store, embed=embedder.embed)
        answerer = bench_answerer(model_dir=model_dir, placement=placement)
        answerer.context_length = min(answerer.context_length, context)
        say(
            f"corpus: {corpus['documents']} documents, {corpus['chunks']} chunks "
            f"(ingested in {corpus['ingest_s']} s); model: random Llama {size.layers} x "
            f"{size.hidden}, layers {[i for i, t in enumerate(tiers) if t == 'disk']} on disk; "
            f"torch threads {torch.get_num_threads()}; load average {load_at_start}"
        )
        profile = _profile(
            facts=facts,
            retrieve=retrieve,
            answerer=answerer,
            output_tokens=output_tokens,
            batches=(1, 2) if quick else (1, 2, 4),
            repeats=1 if quick else 2,
        )
        service_1 = profile["retrieval_s"] + profile["generation_s"][1]
        last_rate = args.load / service_1
        # Expected arrivals over the four intervals: (1+2+3+4)/4 · last_rate · window/4.
        window = args.window or min(max_window, requests / (0.625 * last_rate))
        drain = args.drain if args.drain is not None else (30.0 if quick else 0.5 * window)
        plan = schedule(facts=facts, last_rate_per_s=last_rate, window_s=window, seed=args.seed)
        fixed = args.fixed_batch or max(2, plan.accelerate_batches[1])
        say(
            f"profile: retrieval {profile['retrieval_s']:.2f} s (B=1), generation "
            + ", ".join(f"B={b}: {t:.2f} s" for b, t in profile["generation_s"].items())
            + f" → T(B) = {profile['fit'].a:.2f}·B^{profile['fit'].c:.2f}; "
            f"{len(plan.arrivals)} requests over {window:.0f} s at "
            + ", ".join(f"{r * 60:.1f}" for r in plan.rates_per_s)
            + f" per minute; 4λ batches {plan.accelerate_batches}; fixed batch {fixed}"
        )
        setup = Setup(
            schedule=plan,
            retrieve=retrieve,
            answerer=answerer,
            placement=placement,
            generation_fit=profile["fit"],
            output_tokens=output_tokens,
            k=TOP_K,
            drain_s=drain,
        )
        runs = _run_systems(
            setup=setup,
            model_dir=model_dir,
            tiers=tiers,
            disk_sources=disk_sources,
            fixed=fixed,
            root=root,
            say=say,
        )
        prefix = _prefix_reuse(model_dir=model_dir, quick=quick)
    finally:
        if answerer is not None:
            answerer.close()
        if store is not None:
            store.close()  # its index maintainer thread must not outlive the folder
        shutil.rmtree(root, ignore_errors=True)
        evict_page_cache(files=checkpoint_files(model_dir))
    paths = [
        latency_plot(runs=runs, schedule=plan, path=plots / "pipeline-latency.png"),
        schedule_plot(runs=runs, schedule=plan, path=plots / "pipeline-schedule.png"),
    ]
    figures = _figures(runs=runs)
    figures |= {
        "ttft_speedup_prefix_reuse": prefix.get("ttft_speedup_prefix_reuse"),
        "prefix_reuse": prefix,
        "plots": [str(p) for p in paths],
        "workload": {
            "requests": len(plan.arrivals),
            "window_s": window,
            "interval_s": plan.interval_s,
            "rates_per_minute": [round(r * 60, 2) for r in plan.rates_per_s],
            "accelerate_batches": list(plan.accelerate_batches),
            "fixed_batch": fixed,
            "top_k": TOP_K,
            "output_tokens": output_tokens,
            "context_tokens": answerer.context_length if answerer else context,
            "load": args.load,
            "drain_s": drain,
            "seed": args.seed,
            **corpus,
        },
        "profile": {
            "retrieval_s_b1": profile["retrieval_s"],
            "generation_s": {str(b): t for b, t in profile["generation_s"].items()},
            "fit_a": profile["fit"].a,
            "fit_c": profile["fit"].c,
        },
        "model": {
            "architecture": "llama",
            "layers": size.layers,
            "hidden_size": size.hidden,
            "intermediate_size": size.intermediate,
            "disk_layers": [i for i, t in enumerate(tiers) if t == "disk"],
            "checkpoint_bytes": sum(f.stat().st_size for f in checkpoint_files(model_dir)),
            "max_batch": int(placement.max_batch),
        },
        "quick": quick,
        "torch_threads": torch.get_num_threads(),
        "machine": {
            "platform": f"{platform.system()} {platform.machine()}",
            "cpus": os.cpu_count(),
            "load_average_start": load_at_start,
            "load_average_end": _load(),
        },
    }
    _report(figures, say=say)
    return figures


def _plots_folder(args: argparse.Namespace) -> Path:
    """--plots, else where --out goes (a folder given as --out gets pipeline.json), else
    a temp folder."""
    folder = args.plots
    out = getattr(args, "out", None)
    if folder is None and out is not None:
        if out.is_dir() or not out.suffix:
            folder = out
            args.out = out / "pipeline.json"  # the dispatcher writes the JSON here
        else:
            folder = out.parent
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="ragdoll-bench-pipeline-plots-"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _profile(
    *,
    facts: list[Fact],
    retrieve: Any,
    answerer: GenerativeAnswerer,
    output_tokens: int,
    batches: tuple[int, ...],
    repeats: int,
) -> dict[str, Any]:
    """Active profiling: one retrieval and the executor's generation at a few batch
    sizes (a first call warms up), T(B) = a·B^c fitted on the generation times; each
    size `repeats` times, interleaved, the mean kept (the machine may be shared)."""
    generate_batch = executor_generate_batch(answerer=answerer)
    questions = [
        new_question(text=f.question, k=TOP_K, max_new_tokens=output_tokens)
        for f in facts[: max(batches)]
    ]
    started = time.perf_counter()
    hits = list(retrieve(questions[:1]))
    retrieval_s = time.perf_counter() - started
    hits = list(retrieve(questions))
    samples: dict[int, list[float]] = {b: [] for b in batches}
    for b in (batches[0], *(batches * repeats)):  # the first run is a warm-up
        jobs = [
            GenerationJob(request_id=str(i), question=q, hits=h, cancel=_never())
            for i, (q, h) in enumerate(zip(questions[:b], hits[:b], strict=True))
        ]
        started = time.perf_counter()
        done = sum(1 for _, piece in generate_batch(jobs) if piece is DONE)
        samples[b].append(time.perf_counter() - started)
        if done != b:
            raise RuntimeError(f"profiling: {done} of {b} answers finished")
    times = {b: statistics.fmean(ts[1:] if b == batches[0] else ts) for b, ts in samples.items()}
    fit: PowerLawFit = fit_power_law(samples=list(times.items()))
    return {"retrieval_s": retrieval_s, "generation_s": times, "fit": fit}


def _never() -> Any:
    import threading

    return threading.Event()


def _run_systems(
    *,
    setup: Setup,
    model_dir: Path,
    tiers: list[str],
    disk_sources: list[Any],
    fixed: int,
    root: Path,
    say: Callable[[str], None],
) -> list[SystemRun]:
    runs: list[SystemRun] = []
    for name in ("serial_accelerate", "no_pipeline", "fixed_batch", "ragdoll"):
        evict_page_cache(files=checkpoint_files(model_dir))
        # Every system starts cold: the systems share one answerer, and KV that an
        # earlier system (or the profiling step) left in the prefix cache would
        # otherwise serve the later ones' identical prompts.
        cache = setup.answerer.prefix_cache
        if cache is not None:
            cache.clear()
        before = cache.stats() if cache is not None else None
        say(f"running {name}…")
        if name == "serial_accelerate":
            hf = offload.load_hf(
                system="accelerate",
                model_dir=model_dir,
                tiers=tiers,  # type: ignore[arg-type]
                disk_sources=disk_sources,
                offload_folder=root / "accelerate-offload",
                device=torch.device("cpu"),
                dtype=torch.float32,
            )
            try:
                run = run_serial_accelerate(setup=setup, hf=hf)
            finally:
                del hf
        elif name == "no_pipeline":
            run = run_no_pipeline(setup=setup)
        elif name == "fixed_batch":
            run = run_pipeline(setup=setup, name=name, fixed_batch=fixed)
        else:
            run = run_pipeline(setup=setup, name=name)
        if cache is not None and before is not None and name != "serial_accelerate":
            after = cache.stats()
            run = dataclasses.replace(
                run,
                notes=(
                    *run.notes,
                    f"prefix cache: {after.hits - before.hits} of "
                    f"{after.lookups - before.lookups} prompts reused a start, "
                    f"{after.tokens_reused - before.tokens_reused} prompt tokens not prefilled",
                ),
            )
        done = sum(1 for r in run.requests if r.status == "done")
        say(f"  {name}: {done}/{len(run.requests)} finished in {run.wall_s:.1f} s")
        for note in run.notes:
            say(f"    {note}")
        runs.append(run)
    return sorted(runs, key=lambda r: SYSTEMS.index(r.name))


def summarize(run: SystemRun) -> dict[str, Any]:
    """Latency figures over every request (one past the drain limit counts until the
    stop, so the figure is then a lower bound) and the breakdown over the finished."""
    lat = [
        (r.finished if r.finished is not None else run.stopped_at) - r.submitted
        for r in run.requests
    ]
    done = [r for r in run.requests if r.status == "done"]
    waits = [
        (r.retrieval_started - r.submitted) + (r.generation_started - r.retrieved)  # type: ignore[operator]
        for r in done
    ]
    retr = [r.retrieved - r.retrieval_started for r in done]  # type: ignore[operator]
    gen = [r.finished - r.generation_started for r in done]  # type: ignore[operator]
    sizes = [b.size for b in run.batches if b.worker == "generation"]
    arr = np.asarray(lat, dtype=float)
    return {
        "requests": len(run.requests),
        "finished": len(done),
        "unfinished": len(run.requests) - len(done),
        "not_found": sum(1 for r in run.requests if r.not_found),
        "mean_latency_s": float(arr.mean()),
        "p50_latency_s": float(np.percentile(arr, 50)),
        "p95_latency_s": float(np.percentile(arr, 95)),
        "p99_latency_s": float(np.percentile(arr, 99)),
        "max_latency_s": float(arr.max()),
        "mean_latency_finished_s": statistics.fmean(
            r.finished - r.submitted
            for r in done  # type: ignore[operator]
        )
        if done
        else None,
        "waiting_s": statistics.fmean(waits) if waits else None,
        "retrieval_s": statistics.fmean(retr) if retr else None,
        "generation_s": statistics.fmean(gen) if gen else None,
        "generation_batches": len(sizes),
        "mean_generation_batch": statistics.fmean(sizes) if sizes else None,
        "max_generation_batch": max(sizes) if sizes else None,
        "wall_s": run.wall_s,
        "per_request": [
            {
                "index": r.index,
                "interval": r.interval,
                "submitted_s": round(r.submitted, 3),
                "latency_s": round(x, 3),
                "status": r.status,
            }
            for r, x in zip(run.requests, lat, strict=True)
        ],
        "batches": [
            {
                "worker": b.worker,
                "started_s": round(b.started, 3),
                "seconds": round(b.seconds, 3),
                "size": b.size,
                "backlog": b.backlog,
                "cap": b.cap,
            }
            for b in run.batches
        ],
        "notes": list(run.notes),
    }


def _figures(*, runs: list[SystemRun]) -> dict[str, Any]:
    systems = {run.name: summarize(run) for run in runs}
    mean = {name: s["mean_latency_s"] for name, s in systems.items()}

    def ratio(other: str) -> float | None:
        if other not in mean or "ragdoll" not in mean or mean["ragdoll"] <= 0:
            return None
        return mean[other] / mean["ragdoll"]

    return {
        "systems": systems,
        "mean_latency_s": mean,
        "speedup_vs_serial_accelerate": ratio("serial_accelerate"),
        "speedup_vs_no_pipeline": ratio("no_pipeline"),
        "speedup_vs_fixed_batch": ratio("fixed_batch"),
        "all_finished": all(s["unfinished"] == 0 for s in systems.values()),
    }


def _prefix_reuse(*, model_dir: Path, quick: bool) -> dict[str, Any]:
    """TTFT with and without the prefix cache, from engine/bench/prefix_reuse.py when
    that module exists (another branch); null and a note until then."""
    try:
        from engine.bench.prefix_reuse import measure_ttft_prefix_reuse
    except ImportError as e:
        return {"ttft_speedup_prefix_reuse": None, "note": f"not measured: {e}"}
    try:
        return dict(measure_ttft_prefix_reuse(model_dir=model_dir, quick=quick))
    except Exception as e:  # a failure there must not lose the pipeline figures
        return {"ttft_speedup_prefix_reuse": None, "note": f"not measured: {type(e).__name__}: {e}"}


def _report(f: dict[str, Any], *, say: Callable[[str], None]) -> None:
    say(
        f"{'system':>18} | {'mean':>7} {'p50':>7} {'p95':>7} {'p99':>7} {'max':>7} | "
        f"{'wait':>7} {'retr':>6} {'gen':>6} | batches (mean gen B) | done"
    )

    def cell(s: dict[str, Any], key: str, width: int = 7) -> str:
        v = s[key]
        return f"{v:{width}.2f}" if v is not None else f"{'—':>{width}}"

    for name, s in f["systems"].items():
        say(
            f"{name:>18} | {cell(s, 'mean_latency_s')} {cell(s, 'p50_latency_s')} "
            f"{cell(s, 'p95_latency_s')} {cell(s, 'p99_latency_s')} {cell(s, 'max_latency_s')} | "
            f"{cell(s, 'waiting_s')} {cell(s, 'retrieval_s', 6)} {cell(s, 'generation_s', 6)} | "
            f"{s['generation_batches']:>4} ({s['mean_generation_batch'] or 0:.1f}) | "
            f"{s['finished']}/{s['requests']}"
        )

    def x(key: str) -> str:
        v = f[key]
        return f"{v:.2f}×" if v is not None else "not measured"

    say(
        "mean-latency speedup of ragdoll: vs serial Accelerate "
        f"{x('speedup_vs_serial_accelerate')}, "
        f"vs no pipeline {x('speedup_vs_no_pipeline')}, vs fixed batch "
        f"{x('speedup_vs_fixed_batch')}; TTFT speedup of prefix reuse "
        f"{x('ttft_speedup_prefix_reuse')}"
        + (
            ""
            if f["prefix_reuse"].get("ttft_speedup_prefix_reuse")
            else f" ({f['prefix_reuse'].get('note', '')})"
        )
    )
    say(f"plots: {', '.join(f['plots'])}; load average {f['machine']['load_average_end']}")


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
