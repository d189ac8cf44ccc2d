"""First executor benchmark: decode tokens/s at batch 1, half the layers on disk vs resident.

    .venv/bin/python -m engine.executor.bench --folder /tmp/ragdoll-bench-llama

Writes a random-weight Llama into `--folder` once (reused after), then for each
configuration evicts the checkpoint from the page cache, loads the model, prefills one
prompt and times `--tokens` decode steps. Disk configurations also drop each layer's pages
after reading it, so every decode step reads those layers from the disk itself rather than
from a page cache that would quietly hold the whole model in RAM. Layer tiers are forced
(not planned) so that the comparison is exactly "half on disk" against "all resident".
The comparison with Accelerate offloading is a later step.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.executor.forward import StreamingModel
from engine.executor.generate import left_pad, positions_of
from engine.executor.weights import checkpoint_files, evict_page_cache
from engine.hardware.profile import synthetic_profile
from engine.models.synthetic import write_random_model
from engine.planner.model_spec import load_model_spec
from engine.planner.placement import Placement, StoreSpec, Tier, Workload
from engine.planner.planner import plan

GIB = 2**30


@dataclass(frozen=True, kw_only=True)
class BenchResult:
    name: str
    decode_tokens_per_s: float
    decode_seconds: float
    load_seconds: float
    prefill_seconds: float
    streamed_bytes_per_token: float
    prefetch_waits: int
    prefetch_wait_seconds: float
    prefetch_load_seconds: float


def forced_placement(
    *, model_dir: Path, layer_tiers: Sequence[Tier], depth_prefill: int, depth_decode: int
) -> Placement:
    """The planner's CPU-only placement for this model with the layer tiers forced."""
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
        prefetch_depth_prefill=depth_prefill,
        prefetch_depth_decode=depth_decode,
    )


def run_one(
    *, name: str, model_dir: Path, placement: Placement, prompt_tokens: int, tokens: int
) -> BenchResult:
    evict_page_cache(files=checkpoint_files(model_dir))
    start = time.perf_counter()
    on_disk = "disk" in placement.layer_tiers
    model = StreamingModel(model_dir=model_dir, placement=placement, evict_after_read=on_disk)
    load_s = time.perf_counter() - start
    try:
        ids, mask = left_pad([[1] + [40 + i % 200 for i in range(prompt_tokens - 1)]], pad=0)
        positions = positions_of(mask)
        cache = model.new_cache()
        start = time.perf_counter()
        logits = model.forward(
            input_ids=ids, attention_mask=mask, position_ids=positions, cache=cache, phase="prefill"
        )
        prefill_s = time.perf_counter() - start
        before = model.store.stats()
        wait_before = model.prefetcher.stats() if model.prefetcher else None
        start = time.perf_counter()
        for _ in range(tokens):
            next_id = logits[:, -1, :].argmax(-1, keepdim=True)  # (1, 1)
            mask = torch.cat([mask, torch.ones(1, 1, dtype=mask.dtype)], dim=1)
            positions = positions[:, -1:] + 1
            logits = model.forward(
                input_ids=next_id,
                attention_mask=mask,
                position_ids=positions,
                cache=cache,
                phase="decode",
            )
        decode_s = time.perf_counter() - start
        after = model.store.stats()
        waits = 0
        wait_s = load_s_pf = 0.0
        if model.prefetcher is not None and wait_before is not None:
            now = model.prefetcher.stats()
            waits = now.waits - wait_before.waits
            wait_s = now.wait_seconds - wait_before.wait_seconds
            load_s_pf = now.load_seconds - wait_before.load_seconds
        return BenchResult(
            name=name,
            decode_tokens_per_s=tokens / decode_s,
            decode_seconds=decode_s,
            load_seconds=load_s,
            prefill_seconds=prefill_s,
            streamed_bytes_per_token=(after.bytes_fetched - before.bytes_fetched) / tokens,
            prefetch_waits=waits,
            prefetch_wait_seconds=wait_s,
            prefetch_load_seconds=load_s_pf,
        )
    finally:
        model.close()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folder", type=Path, default=Path("/tmp/ragdoll-bench-llama"))
    parser.add_argument("--layers", type=int, default=12)
    parser.add_argument("--hidden", type=int, default=1024)
    parser.add_argument("--intermediate", type=int, default=2816)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--prompt-tokens", type=int, default=32)
    parser.add_argument("--depth", type=int, default=2, help="decode prefetch depth")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    if not (args.folder / "config.json").is_file():
        write_random_model(
            folder=args.folder,
            architecture="llama",
            hidden_size=args.hidden,
            num_layers=args.layers,
            num_heads=16,
            num_kv_heads=4,
            intermediate_size=args.intermediate,
            dtype="float32",
        )
    size = sum(f.stat().st_size for f in checkpoint_files(args.folder))
    n = args.layers
    half: list[Tier] = ["cpu" if i % 2 == 0 else "disk" for i in range(n)]
    configs: list[tuple[str, list[Tier], int]] = [
        ("resident", ["cpu"] * n, 0),
        (f"half_disk_depth{args.depth}", half, args.depth),
        ("half_disk_depth0", half, 0),
    ]
    print(
        f"model: random Llama, {n} layers, hidden {args.hidden}, float32, "
        f"{size / 2**20:.0f} MiB; batch 1, prompt {args.prompt_tokens}, "
        f"{args.tokens} decode tokens; torch threads {torch.get_num_threads()}"
    )
    # Round-robin repeats: on a shared machine a single run says little, and interleaving
    # spreads the other processes' load over every configuration alike.
    runs: dict[str, list[BenchResult]] = {name: [] for name, _, _ in configs}
    for _ in range(args.repeats):
        for name, tiers, depth in configs:
            placement = forced_placement(
                model_dir=args.folder, layer_tiers=tiers, depth_prefill=1, depth_decode=depth
            )
            r = run_one(
                name=name,
                model_dir=args.folder,
                placement=placement,
                prompt_tokens=args.prompt_tokens,
                tokens=args.tokens,
            )
            runs[name].append(r)
            print(
                f"{r.name:>20}: {r.decode_tokens_per_s:6.2f} tok/s decode "
                f"({r.decode_seconds:.2f} s), load {r.load_seconds:.2f} s, "
                f"prefill {r.prefill_seconds:.2f} s, "
                f"streamed {r.streamed_bytes_per_token / 2**20:.0f} MiB/token, "
                f"waited {r.prefetch_waits}x {r.prefetch_wait_seconds:.2f} s, "
                f"copy thread busy {r.prefetch_load_seconds:.2f} s"
            )
    medians = {
        name: statistics.median(r.decode_tokens_per_s for r in rs) for name, rs in runs.items()
    }
    print(f"median decode tok/s over {args.repeats} runs (min-max):")
    for name, rs in runs.items():
        speeds = [r.decode_tokens_per_s for r in rs]
        print(
            f"{name:>20}: {medians[name]:6.2f} ({min(speeds):.2f}-{max(speeds):.2f}), "
            f"{medians[name] / medians['resident']:.2f} x resident"
        )
    # Overlap efficiency (design.md): (T_xfer + T_comp - T) / min(T_xfer, T_comp), with
    # T_comp the resident decode time (all layers computing, nothing streamed) and T_xfer
    # the copy thread's busy time: 1 is perfect overlap, 0 is none.
    t_comp = statistics.median(r.decode_seconds for r in runs["resident"])
    for name, rs in runs.items():
        if name == "resident":
            continue
        t = statistics.median(r.decode_seconds for r in rs)
        t_xfer = statistics.median(r.prefetch_load_seconds for r in rs)
        overlap = (t_xfer + t_comp - t) / min(t_xfer, t_comp)
        print(
            f"{name:>20}: overlap efficiency {overlap:.2f} (T={t:.2f} s, "
            f"T_xfer={t_xfer:.2f} s, T_comp={t_comp:.2f} s)"
        )


if __name__ == "__main__":
    main()
