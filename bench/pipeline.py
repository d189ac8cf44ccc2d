"""`ragdoll bench pipeline`: RAGDoll's serving loop against serial RAG, side by side.

The paper's workload (§6.1) scaled to this machine (pipeline_workload.py): questions
about a generated corpus ingested into LanceDB on disk with the real MiniLM embedder,
top-5 chunks, a fixed output length, Poisson arrivals over four intervals of rising rate.

The store (pipeline_store.py) is in the paper's regime by default: the corpus plus
`--store-rows` synthetic filler chunks in the same table, searched through the store's
IVF view of `--store-partitions` partitions (32, the paper's count) with
`--store-resident` of them in memory and the rest read from the disk at every retrieval
batch, so that retrieving a batch costs the same order as generating one (the profile
prints both; docs/benchmarks-history.md, runs 7-8). `--store-rows 0` is the small regime (the
corpus alone, 60 chunks in RAM, retrieval ~10× cheaper than generation: pipelining has
little to hide there).

An active-profiling step runs first: retrieval and generation at a few batch sizes, each
timed as the runs time them. It gives the T(B) = a·B^c fits the adaptive batch sizes
start from (retrieval, generation, and the two in series for the no-pipeline loop) and
the arrival rates: the last interval arrives `--load` times faster than one request at
a time can be served end to end (retrieval + generation at B = 1).

The four systems (pipeline_systems.py) share the model (a random-weight Llama with every
other layer on disk, the page cache dropped after each read, as in `bench offload`), the
memory budget, the store and, within a repeat, the arrivals:
- `ragdoll`: the Pipeline, retrieval and generation workers decoupled, each batch size by
  eq. 4–8 from its own profiled fit (refitted online);
- `serial_accelerate`, the paper's AccRAG: batches of 4λ in arrival order, retrieved, then
  generated with transformers + Accelerate disk offloading of the same layers;
- `no_pipeline`, the paper's "without pipelined design" (§6.4, Table 2): every other
  technique kept (the executor, eq. 4–8 batch sizes, the placement) but retrieval and
  generation one after the other in one loop, so both stages take the same batch; its
  profiled fit is the two stages' time in series, what one cycle of that loop costs;
- `fixed_batch`, the paper's "without dynamic batch size": the Pipeline with one static
  generation batch for the whole run (min(waiting, size): it never waits to fill a batch,
  the kinder reading). The paper's static sizes are 4λ of an interval (8B: 64 = 4 × 16,
  the last; 70B: 32 = 4 × 8, the second); here the second interval's 4λ, unless
  `--fixed-batch` says otherwise. Nothing is tuned to one input.

`--repeats R` runs the four side by side R times on the same store, model and profile,
each repeat with its own seed (arrivals and questions); every system within a repeat
sees the same arrivals and starts from the same state (an empty prefix cache, the
store's resident partitions released). Reported per repeat and system: mean, p50, p95,
p99 and max end-to-end latency, the waiting / retrieval / generation breakdown (Table 1)
and ragdoll's mean-latency speedups; the headline keys are the medians over the repeats,
with the per-run values in `<key>_runs`. Two PNGs (Figure 7, Figure 9;
pipeline_plots.py) show the first repeat.
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

import torch

from bench import offload_systems as offload
from bench.pipeline_model import DEVICES, BenchModel, bench_model
from bench.pipeline_plots import latency_plot, schedule_plot
from bench.pipeline_report import over_repeats, report, side_by_side, table
from bench.pipeline_store import BenchStore, scale_store
from bench.pipeline_systems import (
    SYSTEMS,
    Setup,
    SystemRun,
    bench_answerer,
    run_no_pipeline,
    run_pipeline,
    run_serial_accelerate,
)
from bench.pipeline_workload import Fact, ingest, schedule, write_corpus
from engine.environ import EngineEnviron
from engine.rag.answer.generative import GenerativeAnswerer
from engine.rag.pipeline.adapters import executor_generate_batch
from engine.rag.pipeline.requests import new_question
from engine.rag.pipeline.stages import DONE, GenerationJob
from engine.runtime.executor.checkpoint import checkpoint_files
from engine.runtime.executor.page_cache import evict_page_cache
from engine.runtime.planner.profiling import PowerLawFit, fit_power_law

TOP_K = 5
FULL_STORE_ROWS = 1_000_000
QUICK_STORE_ROWS = 20_000
# The paper's store is 32 partitions (§6.1), a query loading several of them from disk:
# loading outweighs searching (§6.5), and a batch of questions shares the loads.
FULL_STORE_PARTITIONS = 32


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--requests",
        type=int,
        help="expected arrivals per repeat (default 30; full 50): sets the window",
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
    parser.add_argument(
        "--store-rows",
        type=int,
        help=f"synthetic filler chunks beside the corpus (default {FULL_STORE_ROWS:,}; "
        f"quick {QUICK_STORE_ROWS:,}); 0: the small regime, the corpus alone",
    )
    parser.add_argument(
        "--store-resident",
        type=float,
        default=0.05,
        help="share of the store's IVF view kept in memory (default 0.05)",
    )
    parser.add_argument(
        "--store-partitions",
        type=int,
        help=f"partitions of the store's IVF view (default {FULL_STORE_PARTITIONS}, the "
        "paper's 32 of 8 GB; quick 0); 0: the product's rows per partition",
    )
    parser.add_argument(
        "--repeats", type=int, help="side-by-side runs, one seed each (default 3; quick 1)"
    )
    parser.add_argument("--output-tokens", type=int, help="tokens written per answer")
    parser.add_argument("--context", type=int, help="prompt + answer tokens (sources are cut)")
    parser.add_argument("--docs", type=int, help="documents in the generated corpus")
    parser.add_argument("--fixed-batch", type=int, help="the fixed-batch ablation's size")
    parser.add_argument(
        "--retrieval-waits",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="the pipelines' retrieval waits for company while generation is backed up "
        "(the product's default; --no-retrieval-waits for comparison)",
    )
    parser.add_argument(
        "--drain", type=float, help="seconds a system may take after the last arrival"
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument(
        "--device",
        choices=DEVICES,
        default="cpu",
        help="where generation computes (default cpu; cuda: the paper's setting, an 8B-shaped "
        "model with layers on GPU / pinned RAM / disk, retrieval on the CPU)",
    )
    parser.add_argument(
        "--seed", type=int, default=6, help="corpus, filler and the first repeat's arrivals"
    )
    parser.add_argument(
        "--plots",
        type=Path,
        help="folder for the PNGs (default: the folder of --out, else a temp folder)",
    )
    parser.add_argument("--model-folder", type=Path, help="where the random model is written once")


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    requests = args.requests or (30 if quick else 50)
    max_window = 20.0 if quick else 90.0
    output_tokens = args.output_tokens or (6 if quick else 16)
    context = args.context or (256 if quick else 320)
    docs = args.docs or (4 if quick else 24)
    store_rows = (
        args.store_rows
        if args.store_rows is not None
        else (QUICK_STORE_ROWS if quick else FULL_STORE_ROWS)
    )
    repeats = args.repeats or (1 if quick else 3)
    if repeats < 1:
        raise ValueError("--repeats must be at least 1")
    plots = _plots_folder(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    load_at_start = _load()
    started_all = time.perf_counter()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("ragdoll bench pipeline --device cuda: torch sees no CUDA device")
    model = bench_model(device=args.device, quick=quick, folder=args.model_folder)
    model_dir, placement = model.model_dir, model.placement
    root = Path(tempfile.mkdtemp(prefix="ragdoll-bench-pipeline-"))
    answerer: GenerativeAnswerer | None = None
    store: Any = None
    try:
        from engine.rag.ingest.embedder import Embedder

        embedder = Embedder(environ=EngineEnviron.from_environ())
        facts = write_corpus(folder=root / "corpus", docs=docs, facts_per_doc=6, seed=args.seed)
        started = time.perf_counter()
        store, corpus = ingest(root=root, corpus=root / "corpus", embedder=embedder)
        corpus |= {"ingest_s": round(time.perf_counter() - started, 2), "questions": len(facts)}
        say(
            f"corpus: {corpus['documents']} documents, {corpus['chunks']} chunks "
            f"(ingested in {corpus['ingest_s']} s)"
        )
        bench_store = scale_store(
            store=store,
            embed=embedder.embed,
            placement=placement,
            filler_rows=store_rows,
            resident_share=args.store_resident,
            seed=args.seed,
            say=say,
            partitions=args.store_partitions
            if args.store_partitions is not None
            else (0 if quick else FULL_STORE_PARTITIONS),
        )
        placement = bench_store.placement
        say(
            f"regime: {bench_store.figures['regime']} store"
            + (
                " (the paper's: most of the index on disk)"
                if bench_store.figures["regime"] == "scaled"
                else " (the corpus alone, in RAM; --store-rows 0)"
            )
            + f"; model: {model.describe()}; torch threads "
            f"{torch.get_num_threads()}; load average {load_at_start}"
        )
        answerer = bench_answerer(model_dir=model_dir, placement=placement, dtype=model.dtype)
        answerer.context_length = min(answerer.context_length, context)
        profile = _profile(
            facts=facts,
            bench_store=bench_store,
            answerer=answerer,
            output_tokens=output_tokens,
            batches=(1, 2) if quick else (1, 2, 4),
            repeats=1 if quick else 3,
        )
        service_1 = profile["retrieval_s"][1] + profile["generation_s"][1]
        last_rate = args.load / service_1
        # Expected arrivals over the four intervals: (1+2+3+4)/4 · last_rate · window/4.
        window = args.window or min(max_window, requests / (0.625 * last_rate))
        drain = args.drain if args.drain is not None else (30.0 if quick else 0.5 * window)
        say(
            "profile (seconds per batch): retrieval "
            + ", ".join(f"B={b}: {t:.2f}" for b, t in profile["retrieval_s"].items())
            + "; generation "
            + ", ".join(f"B={b}: {t:.2f}" for b, t in profile["generation_s"].items())
            + f"; T_retr(B) = {_fit(profile['retrieval_fit'])}, T_gen(B) = "
            f"{_fit(profile['generation_fit'])}, in series {_fit(profile['cycle_fit'])}; "
            f"retrieval / generation at B=1: "
            f"{profile['retrieval_s'][1] / profile['generation_s'][1]:.2f}"
            + (
                f" (each retrieval batch includes {bench_store.figures['evict_s'] * 1000:.0f} ms "
                "of dropping the store's files from the page cache)"
                if "evict_s" in bench_store.figures
                else ""
            )
        )
        plans = [
            schedule(facts=facts, last_rate_per_s=last_rate, window_s=window, seed=args.seed + r)
            for r in range(repeats)
        ]
        fixed = args.fixed_batch or max(2, plans[0].accelerate_batches[1])
        say(
            f"workload: {repeats} repeat(s) of about {requests} requests over {window:.0f} s at "
            + ", ".join(f"{r * 60:.1f}" for r in plans[0].rates_per_s)
            + f" per minute; 4λ batches {plans[0].accelerate_batches}; fixed batch {fixed}"
        )
        results: list[dict[str, Any]] = []
        first_runs: list[SystemRun] = []
        for r, plan in enumerate(plans):
            setup = Setup(
                schedule=plan,
                retrieve=bench_store.retrieve,
                answerer=answerer,
                placement=placement,
                generation_fit=profile["generation_fit"],
                retrieval_fit=profile["retrieval_fit"],
                cycle_fit=profile["cycle_fit"],
                retrieval_waits=args.retrieval_waits,
                output_tokens=output_tokens,
                k=TOP_K,
                drain_s=drain,
            )
            say(f"repeat {r + 1}/{repeats}: seed {args.seed + r}, {len(plan.arrivals)} requests")
            runs = _run_systems(
                setup=setup,
                bench_store=bench_store,
                model=model,
                fixed=fixed,
                root=root,
                rotate=r,
                say=say,
            )
            result = side_by_side(runs=runs) | {
                "seed": args.seed + r,
                "requests": len(plan.arrivals),
                "order": list(_order(r)),
            }
            table(result, say=say)
            results.append(result)
            if r == 0:
                first_runs = runs
        store_figures = bench_store.figures | {
            "view_in_use": bench_store.view_in_use(),
            "resident_bytes_end": store.resident_bytes(),
        }
        prefix = _prefix_reuse(model_dir=model_dir, quick=quick)
    finally:
        if answerer is not None:
            answerer.close()
        if store is not None:
            store.close()  # its index maintainer thread must not outlive the folder
        shutil.rmtree(root, ignore_errors=True)
        evict_page_cache(files=checkpoint_files(model_dir))
    paths = [
        latency_plot(runs=first_runs, schedule=plans[0], path=plots / "pipeline-latency.png"),
        schedule_plot(runs=first_runs, schedule=plans[0], path=plots / "pipeline-schedule.png"),
    ]
    figures = over_repeats(results)
    figures |= {
        "ttft_speedup_prefix_reuse": prefix.get("ttft_speedup_prefix_reuse"),
        "prefix_reuse": prefix,
        "repeats": results,
        "plots": [str(p) for p in paths],
        "store": store_figures,
        "workload": {
            "requests": len(plans[0].arrivals),
            "requests_per_repeat": [len(p.arrivals) for p in plans],
            "repeats": repeats,
            "seeds": [args.seed + r for r in range(repeats)],
            "window_s": window,
            "interval_s": plans[0].interval_s,
            "rates_per_minute": [round(r * 60, 2) for r in plans[0].rates_per_s],
            "accelerate_batches": list(plans[0].accelerate_batches),
            "fixed_batch": fixed,
            "top_k": TOP_K,
            "output_tokens": output_tokens,
            "context_tokens": answerer.context_length if answerer else context,
            "load": args.load,
            "retrieval_waits": args.retrieval_waits,
            "drain_s": drain,
            "seed": args.seed,
            **corpus,
        },
        "profile": {
            "retrieval_s_b1": profile["retrieval_s"][1],
            "retrieval_s": {str(b): t for b, t in profile["retrieval_s"].items()},
            "generation_s": {str(b): t for b, t in profile["generation_s"].items()},
            "retrieval_over_generation_b1": profile["retrieval_s"][1] / profile["generation_s"][1],
            "fit_a": profile["generation_fit"].a,
            "fit_c": profile["generation_fit"].c,
            "retrieval_fit_a": profile["retrieval_fit"].a,
            "retrieval_fit_c": profile["retrieval_fit"].c,
            "cycle_fit_a": profile["cycle_fit"].a,
            "cycle_fit_c": profile["cycle_fit"].c,
        },
        "model": {
            "architecture": "llama",
            "layers": model.size.layers,
            "hidden_size": model.size.hidden,
            "intermediate_size": model.size.intermediate,
            "dtype": model.dtype,
            "device": str(model.device),
            "gpu_name": torch.cuda.get_device_name(model.device)
            if model.device.type == "cuda"
            else None,
            "ram_layers": model.layers_on("cpu") if model.device.type == "cuda" else [],
            "disk_layers": model.layers_on("disk"),
            "checkpoint_bytes": sum(f.stat().st_size for f in checkpoint_files(model_dir)),
            "max_batch": int(placement.max_batch),
        },
        "quick": quick,
        "torch_threads": torch.get_num_threads(),
        "total_s": round(time.perf_counter() - started_all, 1),
        "machine": {
            "platform": f"{platform.system()} {platform.machine()}",
            "cpus": os.cpu_count(),
            "load_average_start": load_at_start,
            "load_average_end": _load(),
        },
    }
    report(figures, say=say)
    return figures


def _fit(fit: PowerLawFit) -> str:
    return f"{fit.a:.2f}·B^{fit.c:.2f}"


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
    bench_store: BenchStore,
    answerer: GenerativeAnswerer,
    output_tokens: int,
    batches: tuple[int, ...],
    repeats: int,
) -> dict[str, Any]:
    """Active profiling: retrieval of a batch (through the store as the runs use it,
    page cache dropped first in the scaled regime) then the executor's generation of
    it, at a few batch sizes; a first round warms up, then each size `repeats` times,
    interleaved, the median kept (the machine is shared: one slow round must not set
    the rates or the fits). The questions rotate over
    the corpus so that no batch finds the previous one's partitions. T(B) = a·B^c is
    fitted for retrieval, for generation, and for the two in series."""
    generate_batch = executor_generate_batch(answerer=answerer)
    rotation = [f.question for f in facts]
    taken = 0
    retrieval: dict[int, list[float]] = {b: [] for b in batches}
    generation: dict[int, list[float]] = {b: [] for b in batches}
    bench_store.reset()
    for round_, b in enumerate((batches[0], *(batches * repeats))):
        texts = [rotation[(taken + i) % len(rotation)] for i in range(b)]
        taken += b
        questions = [new_question(text=t, k=TOP_K, max_new_tokens=output_tokens) for t in texts]
        started = time.perf_counter()
        hits = list(bench_store.retrieve(questions))
        retrieved = time.perf_counter()
        jobs = [
            GenerationJob(request_id=str(i), question=q, hits=h, cancel=_never())
            for i, (q, h) in enumerate(zip(questions, hits, strict=True))
        ]
        done = sum(1 for _, piece in generate_batch(jobs) if piece is DONE)
        if done != b:
            raise RuntimeError(f"profiling: {done} of {b} answers finished")
        if round_ > 0:  # the first is the warm-up
            retrieval[b].append(retrieved - started)
            generation[b].append(time.perf_counter() - retrieved)
    r_mean = {b: statistics.median(ts) for b, ts in retrieval.items()}
    g_mean = {b: statistics.median(ts) for b, ts in generation.items()}
    return {
        "retrieval_s": r_mean,
        "generation_s": g_mean,
        "retrieval_fit": fit_power_law(samples=list(r_mean.items())),
        "generation_fit": fit_power_law(samples=list(g_mean.items())),
        "cycle_fit": fit_power_law(samples=[(b, r_mean[b] + g_mean[b]) for b in batches]),
    }


def _never() -> Any:
    import threading

    return threading.Event()


def _order(rotate: int) -> tuple[str, ...]:
    """The systems in the order repeat `rotate` runs them: rotated at each repeat, so
    that a burst of load from elsewhere on a shared machine does not fall on the same
    system every time."""
    order = ("serial_accelerate", "no_pipeline", "fixed_batch", "ragdoll")
    return order[rotate % 4 :] + order[: rotate % 4]


def _run_systems(
    *,
    setup: Setup,
    bench_store: BenchStore,
    model: BenchModel,
    fixed: int,
    root: Path,
    rotate: int,
    say: Callable[[str], None],
) -> list[SystemRun]:
    runs: list[SystemRun] = []
    for name in _order(rotate):
        evict_page_cache(files=checkpoint_files(model.model_dir))
        bench_store.reset()
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
                model_dir=model.model_dir,
                tiers=model.tiers,
                disk_sources=model.disk_sources,
                offload_folder=root / "accelerate-offload",
                device=model.device,
                dtype=model.torch_dtype,
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


def _prefix_reuse(*, model_dir: Path, quick: bool) -> dict[str, Any]:
    """TTFT with and without the prefix cache, from bench/prefix_reuse.py when
    that module exists (another branch); null and a note until then."""
    try:
        from bench.prefix_reuse import measure_ttft_prefix_reuse
    except ImportError as e:
        return {"ttft_speedup_prefix_reuse": None, "note": f"not measured: {e}"}
    try:
        return dict(measure_ttft_prefix_reuse(model_dir=model_dir, quick=quick))
    except Exception as e:  # a failure there must not lose the pipeline figures
        return {"ttft_speedup_prefix_reuse": None, "note": f"not measured: {type(e).__name__}: {e}"}


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
