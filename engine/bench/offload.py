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

On a machine without a GPU the tiers are RAM and disk. The disk layers' byte ranges are
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
import dataclasses
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from engine.executor.forward import StreamingModel
from engine.executor.generate import positions_of
from engine.executor.weights import (
    TensorSource,
    checkpoint_files,
    evict_page_cache,
    evict_ranges,
    index_checkpoint,
    layer_unit,
)
from engine.hardware.profile import synthetic_profile
from engine.models.synthetic import write_random_model
from engine.planner.model_spec import load_model_spec
from engine.planner.placement import Placement, StoreSpec, Tier, Workload
from engine.planner.planner import plan

GIB = 2**30
MIB = 2**20
SYSTEMS = ("executor", "accelerate", "executor_resident", "resident")


@dataclass(frozen=True, kw_only=True)
class Size:
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int


FULL = Size(layers=8, hidden=2048, intermediate=5632, heads=16, kv_heads=4)  # ≈1.4 GiB
QUICK = Size(layers=8, hidden=512, intermediate=1408, heads=8, kv_heads=2)  # ≈100 MiB


@dataclass(frozen=True, kw_only=True)
class Run:
    system: str
    batch: int
    load_s: float
    prefill_s: float
    decode_s: float
    prompt_tokens: int
    decode_tokens: int  # per row
    tokens: list[list[int]]  # greedy tokens per row (prefill's + decode's)
    streamed_bytes: int = 0  # bytes the executor fetched during decode
    copy_busy_s: float = 0.0  # the copy thread's loading time during decode
    prefetch_waits: int = 0

    @property
    def decode_tok_s(self) -> float:
        return self.batch * self.decode_tokens / self.decode_s

    @property
    def prefill_tok_s(self) -> float:
        return self.batch * self.prompt_tokens / self.prefill_s


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


def run(args: argparse.Namespace) -> dict[str, Any]:
    quick = bool(getattr(args, "quick", False))
    base = QUICK if quick else FULL
    size = dataclasses.replace(
        base,
        layers=args.layers or base.layers,
        hidden=args.hidden or base.hidden,
        intermediate=args.intermediate or base.intermediate,
    )
    if size.hidden % size.heads:
        size = dataclasses.replace(size, heads=4, kv_heads=2)
    tokens = args.tokens or (8 if quick else 16)
    prompt_tokens = args.prompt_tokens or (32 if quick else 64)
    batches = [int(b) for b in (args.batches or ("1,4" if quick else "1,8")).split(",")]
    if args.threads:
        torch.set_num_threads(args.threads)
    say: Callable[[str], None] = (lambda _: None) if args.json else print

    folder = args.folder or Path(tempfile.gettempdir()) / (
        f"ragdoll-bench-offload-{size.layers}x{size.hidden}x{size.intermediate}"
    )
    model_dir = _model(folder=folder, size=size)
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
        f"cold disk read {bandwidth / MIB:.0f} MiB/s; load average {_load()}"
    )

    runs: dict[tuple[str, int], list[Run]] = {}
    offload_root = Path(tempfile.mkdtemp(prefix="ragdoll-accelerate-offload-"))
    try:
        for _ in range(max(1, args.repeats)):
            for batch in batches:
                prompts = _prompts(batch=batch, length=prompt_tokens)
                for system in SYSTEMS:
                    evict_page_cache(files=checkpoint_files(model_dir))
                    r = _run_system(
                        system=system,
                        model_dir=model_dir,
                        tiers=half,
                        depth=args.depth,
                        prompts=prompts,
                        tokens=tokens,
                        disk_sources=disk_sources,
                        offload_folder=offload_root / f"{system}-{batch}",
                    )
                    runs.setdefault((system, batch), []).append(r)
                    say(
                        f"{system:>18} B={batch}: decode {r.decode_tok_s:7.2f} tok/s, prefill "
                        f"{r.prefill_tok_s:8.1f} tok/s, load {r.load_s:5.2f} s"
                        + (
                            f", streamed {r.streamed_bytes / MIB:.0f} MiB, copy thread busy "
                            f"{r.copy_busy_s:.2f} s of {r.decode_s:.2f} s, waits {r.prefetch_waits}"
                            if system == "executor"
                            else ""
                        )
                    )
    finally:
        shutil.rmtree(offload_root, ignore_errors=True)
        evict_page_cache(files=checkpoint_files(model_dir))
    # Measured again after the runs: on a shared machine the disk's speed changes; the
    # faster figure gives the tighter (more demanding) roofline.
    bandwidth = max(bandwidth, *(cold_read_bandwidth(sources=disk_sources) for _ in range(2)))

    figures = _figures(
        runs=runs, batches=batches, bandwidth=bandwidth, tokens=tokens, prompt_tokens=prompt_tokens
    )
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
            "machine": {
                "platform": f"{platform.system()} {platform.machine()}",
                "cpus": os.cpu_count(),
                "load_average": _load(),
                "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
            },
        }
    )
    _report(figures, say=say)
    return figures


def _figures(
    *,
    runs: dict[tuple[str, int], list[Run]],
    batches: list[int],
    bandwidth: float,
    tokens: int,
    prompt_tokens: int,
) -> dict[str, Any]:
    def med(system: str, batch: int, key: Callable[[Run], float]) -> float:
        return statistics.median(key(r) for r in runs[(system, batch)])

    per: dict[str, dict[str, dict[str, float]]] = {}
    for system in SYSTEMS:
        per[system] = {
            str(b): {
                "decode_tok_s": med(system, b, lambda r: r.decode_tok_s),
                "prefill_tok_s": med(system, b, lambda r: r.prefill_tok_s),
                "decode_s": med(system, b, lambda r: r.decode_s),
                "prefill_s": med(system, b, lambda r: r.prefill_s),
                "load_s": med(system, b, lambda r: r.load_s),
            }
            for b in batches
        }
    b1, bmax = batches[0], batches[-1]
    overlap: dict[str, float] = {}
    roofline: dict[str, float] = {}
    for b in batches:
        t = med("executor", b, lambda r: r.decode_s)
        t_comp = med("executor_resident", b, lambda r: r.decode_s)
        t_xfer = med("executor", b, lambda r: r.copy_busy_s)
        overlap[str(b)] = (t_xfer + t_comp - t) / max(min(t_xfer, t_comp), 1e-9)
        streamed = med("executor", b, lambda r: r.streamed_bytes)
        t_bound = max(t_comp, streamed / bandwidth) if bandwidth > 0 else t_comp
        roofline[str(b)] = t_bound / t
    ex = per["executor"]
    acc = per["accelerate"]
    reference = {b: runs[("resident", b)][0].tokens for b in batches}
    return {
        "systems": per,
        "batches": batches,
        "decode_tokens": tokens,
        "prompt_tokens": prompt_tokens,
        "disk_read_bytes_per_s": bandwidth,
        "speedup_vs_accelerate_b1": ex[str(b1)]["decode_tok_s"] / acc[str(b1)]["decode_tok_s"],
        "speedup_vs_accelerate_bmax": ex[str(bmax)]["decode_tok_s"]
        / acc[str(bmax)]["decode_tok_s"],
        "prefill_speedup_vs_accelerate_b1": ex[str(b1)]["prefill_tok_s"]
        / acc[str(b1)]["prefill_tok_s"],
        "fraction_of_resident_b1": ex[str(b1)]["decode_tok_s"]
        / per["resident"][str(b1)]["decode_tok_s"],
        "overlap_efficiency": overlap[str(b1)],
        "overlap_efficiency_by_batch": overlap,
        "roofline_efficiency": roofline[str(b1)],
        "roofline_efficiency_by_batch": roofline,
        "batch_amortization": ex[str(bmax)]["decode_tok_s"] / (bmax * ex[str(b1)]["decode_tok_s"]),
        "batch_speedup": ex[str(bmax)]["decode_tok_s"] / ex[str(b1)]["decode_tok_s"],
        "tokens_match_reference": all(
            r.tokens == reference[b]
            for system in ("executor", "executor_resident")
            for b in batches
            for r in runs[(system, b)]
        ),
        "accelerate_tokens_match_reference": all(
            r.tokens == reference[b] for b in batches for r in runs[("accelerate", b)]
        ),
    }


def _report(f: dict[str, Any], *, say: Callable[[str], None]) -> None:
    b1, bmax = f["batches"][0], f["batches"][-1]
    say("median decode / prefill tok/s:")
    for system, by_batch in f["systems"].items():
        cells = ", ".join(
            f"B={b}: {v['decode_tok_s']:.2f} / {v['prefill_tok_s']:.1f}"
            for b, v in by_batch.items()
        )
        say(f"{system:>18}: {cells}")
    say(
        f"executor vs accelerate decode: {f['speedup_vs_accelerate_b1']:.2f}x at B={b1}, "
        f"{f['speedup_vs_accelerate_bmax']:.2f}x at B={bmax}; prefill "
        f"{f['prefill_speedup_vs_accelerate_b1']:.2f}x at B={b1}"
    )
    say(
        f"overlap efficiency {f['overlap_efficiency']:.2f}, roofline efficiency "
        f"{f['roofline_efficiency']:.2f} (B={b1}); batch amortization "
        f"{f['batch_amortization']:.2f} (B={bmax}: {f['batch_speedup']:.2f}x the B={b1} tok/s); "
        f"tokens match the reference: {f['tokens_match_reference']} "
        f"(accelerate: {f['accelerate_tokens_match_reference']})"
    )


def cold_read_bandwidth(*, sources: list[TensorSource]) -> float:
    """Bytes/s of reading `sources`' byte ranges after dropping them from the page cache:
    what streaming those layers can get from this disk at best."""
    if not sources:
        return 0.0
    evict_ranges(sources)
    total = 0
    # One reused buffer: a fresh one per block would page-fault inside the reads and
    # measure the allocator, not the disk (the executor reuses its buffers too).
    buffer = memoryview(bytearray(8 * MIB))
    buffer[:] = bytes(len(buffer))
    start = time.perf_counter()
    for s in sorted(sources, key=lambda s: (str(s.file), s.start)):
        with s.file.open("rb", buffering=0) as f:
            f.seek(s.start)
            left = s.end - s.start
            while left > 0:
                n = f.readinto(buffer[: min(len(buffer), left)])
                if not n:
                    break
                left -= n
                total += n
    seconds = time.perf_counter() - start
    evict_ranges(sources)
    return total / seconds if seconds > 0 else 0.0


def _run_system(
    *,
    system: str,
    model_dir: Path,
    tiers: list[Tier],
    depth: int,
    prompts: torch.Tensor,
    tokens: int,
    disk_sources: list[TensorSource],
    offload_folder: Path,
) -> Run:
    start = time.perf_counter()
    if system in ("executor", "executor_resident"):
        layer_tiers = tiers if system == "executor" else ["cpu"] * len(tiers)
        model = StreamingModel(
            model_dir=model_dir,
            placement=forced_placement(model_dir=model_dir, layer_tiers=layer_tiers, depth=depth),
            dtype=torch.float32,
            evict_after_read=system == "executor",
        )
        load_s = time.perf_counter() - start
        try:
            return _timed(
                system=system,
                load_s=load_s,
                prompts=prompts,
                tokens=tokens,
                forward=_executor_forward(model),
                new_cache=model.new_cache,
                model=model,
            )
        finally:
            model.close()
    hf = _load_hf(
        system=system,
        model_dir=model_dir,
        tiers=tiers,
        disk_sources=disk_sources,
        offload_folder=offload_folder,
    )
    load_s = time.perf_counter() - start
    config = hf.config
    try:
        return _timed(
            system=system,
            load_s=load_s,
            prompts=prompts,
            tokens=tokens,
            forward=_hf_forward(hf),
            new_cache=lambda: DynamicCache(config=config),
            model=None,
        )
    finally:
        del hf


Forward = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, DynamicCache, str], torch.Tensor]


def _executor_forward(model: StreamingModel) -> Forward:
    def forward(
        ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: DynamicCache, phase: str
    ) -> torch.Tensor:
        return model.forward(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            cache=cache,
            phase=phase,  # type: ignore[arg-type]
        )

    return forward


def _hf_forward(hf: Any) -> Forward:
    @torch.inference_mode()
    def forward(
        ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: DynamicCache, phase: str
    ) -> torch.Tensor:
        out = hf(
            input_ids=ids,
            attention_mask=mask,
            position_ids=pos,
            past_key_values=cache,
            use_cache=True,
            logits_to_keep=1,
        )
        return out.logits

    return forward


def _timed(
    *,
    system: str,
    load_s: float,
    prompts: torch.Tensor,
    tokens: int,
    forward: Forward,
    new_cache: Callable[[], DynamicCache],
    model: StreamingModel | None,
) -> Run:
    """Greedy: prefill (its logits give token 1), then `tokens` decode steps; eos ignored
    so that every system produces the same number of tokens."""
    batch, width = prompts.shape
    mask = torch.ones_like(prompts)
    positions = positions_of(mask)
    cache = new_cache()
    start = time.perf_counter()
    logits = forward(prompts, mask, positions, cache, "prefill")
    prefill_s = time.perf_counter() - start
    out: list[list[int]] = [[] for _ in range(batch)]
    before = model.store.stats() if model is not None else None
    pf = model.prefetcher.stats() if model is not None and model.prefetcher else None
    start = time.perf_counter()
    for _ in range(tokens):
        next_ids = logits[:, -1, :].argmax(-1, keepdim=True)  # (B, 1)
        for b in range(batch):
            out[b].append(int(next_ids[b, 0]))
        mask = torch.cat([mask, torch.ones(batch, 1, dtype=mask.dtype)], dim=1)
        positions = positions[:, -1:] + 1
        logits = forward(next_ids, mask, positions, cache, "decode")
    decode_s = time.perf_counter() - start
    for b in range(batch):
        out[b].append(int(logits[b, -1].argmax()))
    streamed = copy_s = 0.0
    waits = 0
    if model is not None and before is not None:
        streamed = model.store.stats().bytes_fetched - before.bytes_fetched
        if model.prefetcher is not None and pf is not None:
            now = model.prefetcher.stats()
            copy_s = now.load_seconds - pf.load_seconds
            waits = now.waits - pf.waits
    return Run(
        system=system,
        batch=batch,
        load_s=load_s,
        prefill_s=prefill_s,
        decode_s=decode_s,
        prompt_tokens=width,
        decode_tokens=tokens,
        tokens=out,
        streamed_bytes=int(streamed),
        copy_busy_s=copy_s,
        prefetch_waits=waits,
    )


def _load_hf(
    *,
    system: str,
    model_dir: Path,
    tiers: list[Tier],
    disk_sources: list[TensorSource],
    offload_folder: Path,
) -> Any:
    if system == "resident":
        hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    else:
        device_map: dict[str, str] = {
            "model.embed_tokens": "cpu",
            "model.rotary_emb": "cpu",
            "model.norm": "cpu",
            "lm_head": "cpu",
        }
        for i, tier in enumerate(tiers):
            device_map[f"model.layers.{i}"] = "disk" if tier == "disk" else "cpu"
        hf = AutoModelForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32, device_map=device_map, offload_folder=offload_folder
        )
        # Accelerate reads a disk layer's tensors from the checkpoint at each forward of
        # the layer; drop them again after it, as the executor does, so that every
        # decode step reads the disk and not a page cache holding the whole model.
        by_layer: dict[int, list[TensorSource]] = {}
        for s in disk_sources:
            by_layer.setdefault(int(s.name.split(".")[2]), []).append(s)
        for i, layer_sources in by_layer.items():
            hf.model.layers[i].register_forward_hook(
                lambda *_, sources=layer_sources: evict_ranges(sources)
            )
    _own_memory(hf)
    return hf.eval()


def _own_memory(model: torch.nn.Module) -> None:
    """Copy parameters that are views of the checkpoint's mapping into memory of their
    own: "resident" must mean RAM, not page cache that the evictions above would drop."""
    copies: dict[int, torch.Tensor] = {}
    with torch.no_grad():
        for p in model.parameters():
            if p.device.type != "cpu":
                continue
            key = p.data_ptr()
            if key not in copies:
                copies[key] = p.data.clone()
            p.data = copies[key]


def forced_placement(*, model_dir: Path, layer_tiers: list[Tier], depth: int) -> Placement:
    """The planner's CPU-only placement for this model with the layer tiers forced (the
    comparison is exactly "these layers on disk"), embedding and head resident."""
    base = plan(
        hardware=synthetic_profile(gpu_bytes=0, ram_bytes=64 * GIB, disk_bytes=1000 * GIB),
        model=load_model_spec(source=model_dir),
        store=StoreSpec.default(),
        workload=Workload(batch=1, context_tokens=512),
    )
    return dataclasses.replace(
        base,
        layer_tiers=tuple(layer_tiers),
        embed_tier="cpu",
        head_tier="cpu",
        prefetch_depth_prefill=1,
        prefetch_depth_decode=depth,
    )


def _model(*, folder: Path, size: Size) -> Path:
    if not (folder / "config.json").is_file():
        write_random_model(
            folder=folder,
            architecture="llama",
            hidden_size=size.hidden,
            num_layers=size.layers,
            num_heads=size.heads,
            num_kv_heads=size.kv_heads,
            intermediate_size=size.intermediate,
            dtype="float32",
        )
    return folder


def _prompts(*, batch: int, length: int) -> torch.Tensor:
    """(B, T) token ids: distinct rows of one length (no padding, so every system sees
    exactly the same input)."""
    rows = [[1] + [40 + (7 * b + 3 * i) % 200 for i in range(length - 1)] for b in range(batch)]
    return torch.tensor(rows, dtype=torch.long)


def _load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
