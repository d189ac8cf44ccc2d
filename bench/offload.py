"""`ragdoll bench offload`: the layer-streaming executor against Accelerate offloading.

Side by side in one run, on one random-weight Llama (a real architecture; speed does not
depend on the weight values), with the same memory budget, prompts and output length:

- `executor`: this project's executor, half the decoder layers on disk (every other
  layer, so a resident layer computes while the next disk layer loads), prefetch;
- `accelerate`: transformers + Accelerate `device_map` with the same layers on "disk"
  and an `offload_folder` (Accelerate reads them from the checkpoint's safetensors at
  every forward of the layer, with no prefetch);
- `executor_resident`: the executor with every layer in RAM (its compute time, T_comp);
- `resident`: plain transformers with everything in RAM (the upper bound, and the
  reference the greedy tokens are compared with).

This is the CPU form (`--device cpu`, the default without CUDA): the tiers are RAM and
disk. The GPU form (`--device cuda`, GPU / pinned RAM / disk) is bench/offload_gpu.py
and shares this module's systems, timing and figures. The disk layers' byte ranges are
dropped from the page cache (posix_fadvise DONTNEED) before every run and after every
read of a layer, for both offloading systems, so each decode step reads them from the
disk itself. Figures (design.md, "Measuring"):

- overlap efficiency  (T_xfer + T_comp − T) / min(T_xfer, T_comp), T_xfer the copy
  thread's busy time, T_comp the resident decode time, T the executor's decode time;
- roofline efficiency  t_bound / T, t_bound = max(T_comp, streamed bytes / disk bandwidth),
  the bandwidth measured here by a cold read of the disk layers' byte ranges;
- batch amortization  tok/s(B) / (B · tok/s(1)) of the executor's decode.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from bench.offload_figures import figures_of, report, sized
from bench.offload_peers import run_peers
from bench.offload_systems import (
    GIB,
    MIB,
    Size,
    _prompts,
    cold_read_bandwidth,
    forced_placement,
    load_average,
    run_systems,
    write_model,
)
from bench.offload_weights import parse_formats, run_weight_formats
from engine.runtime.executor.checkpoint import checkpoint_files, index_checkpoint, layer_unit
from engine.runtime.hardware.profile import synthetic_profile
from engine.runtime.planner.model_spec import load_model_spec
from engine.runtime.planner.placement import Tier

FULL = Size(layers=8, hidden=2048, intermediate=5632, heads=16, kv_heads=4)  # ≈1.4 GiB
QUICK = Size(layers=8, hidden=512, intermediate=1408, heads=8, kv_heads=2)  # ≈100 MiB
# `--peers`: Qwen2-1.5B's layer shape (1.3 B parameters in the layers, 5 GiB in float32,
# 0.7 GiB in Q4_0), so that each runtime's own code is small beside the model.
PEERS_FULL = Size(
    layers=28, hidden=1536, intermediate=8960, heads=12, kv_heads=2, architecture="qwen2"
)
PEERS_QUICK = Size(
    layers=4, hidden=256, intermediate=704, heads=4, kv_heads=2, architecture="qwen2"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--folder", type=Path, help="where the random model is written once")
    parser.add_argument("--tokens", type=int, help="decode tokens per row")
    parser.add_argument("--prompt-tokens", type=int, help="prompt length (every row)")
    parser.add_argument("--batches", help="comma-separated batch sizes, e.g. 1,8")
    parser.add_argument("--depth", type=int, default=3, help="executor decode prefetch depth")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved runs; medians")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    parser.add_argument("--layers", type=int, help="override the model's layer count")
    parser.add_argument("--hidden", type=int, help="override the hidden size")
    parser.add_argument("--intermediate", type=int, help="override the MLP size")
    parser.add_argument(
        "--weights",
        help="weight formats, e.g. f32,int8,int4,bf16 (also q8_0, q4_0, f16): the executor "
        "also runs the model in each, held compressed in RAM and on disk (CPU form)",
    )
    parser.add_argument(
        "--peers",
        help="llama.cpp,accelerate: every system in its own process and memory cgroup, "
        "fully resident and under a limit of half the Q4_0 model (bench/offload_peers.py)",
    )
    parser.add_argument(
        "--llama-cpp-source",
        type=Path,
        help="llama.cpp's source (the llama-cpp-python sdist's vendor/llama.cpp) for its "
        "convert_hf_to_gguf.py (default: $RAGDOLL_LLAMA_CPP_SOURCE)",
    )
    parser.add_argument(
        "--child-timeout", type=float, help="seconds one system may run (--peers; 1800)"
    )
    parser.add_argument(
        "--model",
        type=Path,
        help="a real GGUF file: run it through the product's loading code (beside llama.cpp "
        "with --peers llama.cpp), resident and with --limited under half the file "
        "(bench/offload_real.py)",
    )
    parser.add_argument("--thread-counts", help="--model: thread counts, e.g. 1,2 (default)")
    parser.add_argument(
        "--limited", action="store_true", help="--model: also under half the file + allowance"
    )
    parser.add_argument(
        "--agreement-prompts", type=int, help="--model: prompts checked against the reference"
    )
    parser.add_argument(
        "--device",
        choices=("cuda", "cpu"),
        help="cuda: GPU / pinned RAM / disk tiers; cpu: RAM / disk (default: cuda when "
        "torch sees a CUDA device, else cpu)",
    )


def resolve_device(*, requested: str | None, cuda_available: bool) -> str:
    """The form to run; `--device cuda` without CUDA is a clear error, not a traceback."""
    if requested is None:
        return "cuda" if cuda_available else "cpu"
    if requested == "cuda" and not cuda_available:
        raise SystemExit(
            "ragdoll bench offload --device cuda: torch sees no CUDA device on this machine "
            "(torch.cuda.is_available() is False); use --device cpu for the RAM / disk form"
        )
    return requested


def run(args: argparse.Namespace) -> dict[str, Any]:
    if getattr(args, "model", None):
        if getattr(args, "device", None) == "cuda":
            raise SystemExit(
                "ragdoll bench offload --model: the GPU form of the real-model run is not "
                "built yet (the kernel forms are the CPU's); use --device cpu"
            )
        from bench.offload_real import run_real

        return run_real(args, say=(lambda _: None) if args.json else print)
    peers = bool(getattr(args, "peers", None))
    # The peers comparison is the CPU form (RAM, disk and a memory cgroup) unless asked.
    device = resolve_device(
        requested=getattr(args, "device", None) or ("cpu" if peers else None),
        cuda_available=torch.cuda.is_available(),
    )
    if device == "cuda" and peers:
        raise SystemExit("ragdoll bench offload --peers: only the CPU form exists (--device cpu)")
    if device == "cuda":
        from bench.offload_gpu import run_gpu

        return run_gpu(args)
    quick = bool(getattr(args, "quick", False))
    if args.threads:
        torch.set_num_threads(args.threads)
    say: Callable[[str], None] = (lambda _: None) if args.json else print
    if peers:
        return _run_peers(args, quick=quick, say=say)
    size = sized(args, QUICK if quick else FULL)
    tokens = args.tokens or (8 if quick else 16)
    prompt_tokens = args.prompt_tokens or (32 if quick else 64)
    batches = [int(b) for b in (args.batches or ("1,4" if quick else "1,8")).split(",")]

    folder = args.folder or Path(tempfile.gettempdir()) / (
        f"ragdoll-bench-offload-{size.layers}x{size.hidden}x{size.intermediate}"
    )
    model_dir = write_model(folder=folder, size=size, dtype="float32")
    n = size.layers
    half: list[Tier] = ["cpu" if i % 2 == 0 else "disk" for i in range(n)]
    disk_units = [layer_unit(i) for i, t in enumerate(half) if t == "disk"]
    sources = index_checkpoint(model_dir)
    disk_sources = [s for u in disk_units for s in sources[u]]
    checkpoint_bytes = sum(f.stat().st_size for f in checkpoint_files(model_dir))
    disk_bytes = sum(s.end - s.start for s in disk_sources)
    # The best of a few cold reads: the roofline should be the disk at its fastest.
    bandwidth = max(cold_read_bandwidth(sources=disk_sources) for _ in range(2))
    say(
        f"model: random Llama, {n} layers, hidden {size.hidden}, MLP {size.intermediate}, "
        f"float32, {checkpoint_bytes / MIB:.0f} MiB; {disk_bytes / MIB:.0f} MiB on disk "
        f"(layers {', '.join(u.split('.')[1] for u in disk_units)}); prompt {prompt_tokens}, "
        f"{tokens} decode tokens, batches {batches}; torch threads {torch.get_num_threads()}; "
        f"cold disk read {bandwidth / MIB:.0f} MiB/s; load average {load_average()}"
    )

    placement = forced_placement(
        hardware=synthetic_profile(gpu_bytes=0, ram_bytes=64 * GIB, disk_bytes=1000 * GIB),
        spec=load_model_spec(source=model_dir),
        layer_tiers=half,
        depth=args.depth,
    )
    runs = run_systems(
        model_dir=model_dir,
        placement=placement,
        batches=batches,
        prompt_tokens=prompt_tokens,
        tokens=tokens,
        repeats=args.repeats,
        disk_sources=disk_sources,
        device=torch.device("cpu"),
        dtype=torch.float32,
        say=say,
    )
    # Measured again after the runs: on a shared machine the disk's speed changes; the
    # faster figure gives the tighter (more demanding) roofline.
    bandwidth = max(bandwidth, *(cold_read_bandwidth(sources=disk_sources) for _ in range(2)))

    formats = parse_formats(getattr(args, "weights", None))
    weights = run_weight_formats(
        model_dir=model_dir,
        formats=formats,
        placement=placement,
        batches=batches,
        prompts_of=lambda batch: _prompts(batch=batch, length=prompt_tokens),
        tokens=tokens,
        cache=folder.parent / f"{folder.name}-gguf-cache",
        say=say,
    )

    figures = figures_of(
        runs=runs, batches=batches, bandwidth=bandwidth, tokens=tokens, prompt_tokens=prompt_tokens
    )
    if weights:
        figures["weights"] = {
            name: {
                **w,
                "runs": {
                    b: {k: v for k, v in r.items() if k != "tokens"} for b, r in w["runs"].items()
                },
            }
            for name, w in weights.items()
        }
        figures["weights"]["f32"] = {"disk_bytes_per_token": disk_bytes}
    figures.update(
        {
            "model": {
                "architecture": "llama",
                "layers": n,
                "hidden_size": size.hidden,
                "intermediate_size": size.intermediate,
                "dtype": "float32",
                "checkpoint_bytes": checkpoint_bytes,
                "offloaded_bytes": disk_bytes,
                "offloaded_layers": [int(u.split(".")[1]) for u in disk_units],
            },
            "quick": quick,
            "prefetch_depth_decode": args.depth,
            "torch_threads": torch.get_num_threads(),
            "repeats": max(1, args.repeats),
            "device": "cpu",
            "gpu_name": None,
            "machine": {
                "platform": f"{platform.system()} {platform.machine()}",
                "cpus": os.cpu_count(),
                "load_average": load_average(),
                "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            },
        }
    )
    report(figures, say=say)
    return figures


def _run_peers(args: argparse.Namespace, *, quick: bool, say: Callable[[str], None]) -> dict:
    size = sized(args, PEERS_QUICK if quick else PEERS_FULL)
    folder = args.folder or Path(tempfile.gettempdir()) / (
        f"ragdoll-bench-peers-{size.architecture}-{size.layers}x{size.hidden}x{size.intermediate}"
    )
    figures = run_peers(
        args=args,
        size=size,
        folder=folder,
        prompt_tokens=args.prompt_tokens or (16 if quick else 32),
        tokens=args.tokens or (4 if quick else 8),
        batches=[int(b) for b in (args.batches or ("1,4" if quick else "1,8")).split(",")],
        say=say,
    )
    figures.update(
        {
            "quick": quick,
            "model": {
                "architecture": size.architecture,
                "layers": size.layers,
                "hidden_size": size.hidden,
                "intermediate_size": size.intermediate,
                "heads": size.heads,
                "kv_heads": size.kv_heads,
            },
            "machine": {
                "platform": f"{platform.system()} {platform.machine()}",
                "cpus": os.cpu_count(),
                "load_average": load_average(),
            },
        }
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    """`python -m bench.offload [--quick] [--json] [--out FILE] ...`: this benchmark
    without the `ragdoll` entry point, for a bare machine that has only its dependencies
    (torch, transformers, accelerate, safetensors, psutil, platformdirs)."""
    from bench.runner import kind_parser, run_kind

    module = sys.modules[__name__]
    options = kind_parser(kind="offload", module=module).parse_args(argv)
    return run_kind(kind="offload", module=module, options=options)


if __name__ == "__main__":
    raise SystemExit(main())
