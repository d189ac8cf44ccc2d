"""The systems `ragdoll bench offload` compares, run one at a time with the same prompts,
output length and memory split: the executor (`executor`, and `executor_resident` with
every layer on the compute tier: its compute time), Accelerate `device_map` offloading
(`accelerate`) and plain transformers with everything resident (`resident`). Shared by
the CPU form (bench/offload.py) and the GPU form (bench/offload_gpu.py).
"""

from __future__ import annotations

import dataclasses
import gc
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM, DynamicCache

from engine.runtime.executor.checkpoint import TensorSource, checkpoint_files, index_checkpoint
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.executor.generate import positions_of
from engine.runtime.executor.page_cache import evict_page_cache, evict_ranges
from engine.runtime.hardware.profile import HardwareProfile
from engine.runtime.models.synthetic import write_random_model
from engine.runtime.planner.model_spec import ModelSpec
from engine.runtime.planner.placement import Placement, StoreSpec, Tier, Workload
from engine.runtime.planner.planner import plan

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
    vocab: int | None = None  # None: the synthetic tokenizer's size
    architecture: str = "llama"


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
    peak_device_bytes: int = 0  # torch.cuda.max_memory_allocated over the run (GPU form)

    @property
    def decode_tok_s(self) -> float:
        return self.batch * self.decode_tokens / self.decode_s

    @property
    def prefill_tok_s(self) -> float:
        return self.batch * self.prompt_tokens / self.prefill_s


def run_systems(
    *,
    model_dir: Path,
    placement: Placement,
    batches: list[int],
    prompt_tokens: int,
    tokens: int,
    repeats: int,
    disk_sources: list[TensorSource],
    device: torch.device,
    dtype: torch.dtype,
    say: Callable[[str], None],
) -> dict[tuple[str, int], list[Run]]:
    """Every system at every batch, `repeats` times interleaved, the page cache of the
    checkpoint evicted before each run (both forms). `placement`: the executor's, whose
    layer tiers Accelerate gets too; `executor_resident` runs it with every layer on the
    compute tier."""
    runs: dict[tuple[str, int], list[Run]] = {}
    cuda = device.type == "cuda"
    offload_root = Path(tempfile.mkdtemp(prefix="ragdoll-accelerate-offload-"))
    try:
        for _ in range(max(1, repeats)):
            for batch in batches:
                prompts = _prompts(batch=batch, length=prompt_tokens)
                for system in SYSTEMS:
                    evict_page_cache(files=checkpoint_files(model_dir))
                    if cuda:
                        torch.cuda.reset_peak_memory_stats(device)
                    try:
                        r = _run_system(
                            system=system,
                            model_dir=model_dir,
                            placement=placement,
                            prompts=prompts,
                            tokens=tokens,
                            disk_sources=disk_sources,
                            offload_folder=offload_root / f"{system}-{batch}",
                            device=device,
                            dtype=dtype,
                        )
                    finally:
                        if cuda:
                            # The next system starts from an empty GPU, not from this
                            # one's cached blocks.
                            gc.collect()
                            torch.cuda.empty_cache()
                    if cuda:
                        peak = int(torch.cuda.max_memory_allocated(device))
                        r = dataclasses.replace(r, peak_device_bytes=peak)
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
                        + (
                            f", peak GPU memory {r.peak_device_bytes / GIB:.2f} GiB"
                            if device.type == "cuda"
                            else ""
                        )
                    )
    finally:
        shutil.rmtree(offload_root, ignore_errors=True)
        evict_page_cache(files=checkpoint_files(model_dir))
    return runs


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


def first_bytes(*, model_dir: Path, limit: int) -> list[TensorSource]:
    """The checkpoint's tensors in file order, up to about `limit` bytes."""
    sources = sorted(
        (s for unit in index_checkpoint(model_dir).values() for s in unit),
        key=lambda s: (str(s.file), s.start),
    )
    kept, total = [], 0
    for s in sources:
        if total >= limit:
            break
        kept.append(s)
        total += s.end - s.start
    return kept


def ram_read_bandwidth() -> float:
    """Bytes/s of reading a 256 MiB float32 tensor (a sum), best of five."""
    x = torch.ones(64 * MIB, dtype=torch.float32)
    times = []
    for _ in range(5):
        start = time.perf_counter()
        float(x.sum())
        times.append(time.perf_counter() - start)
    return x.numel() * 4 / min(times)


def _run_system(
    *,
    system: str,
    model_dir: Path,
    placement: Placement,
    prompts: torch.Tensor,
    tokens: int,
    disk_sources: list[TensorSource],
    offload_folder: Path,
    device: torch.device,
    dtype: torch.dtype,
    compressed: bool = True,
) -> Run:
    """`compressed=False`: layers stored smaller than `dtype` are decoded once at load
    (the plain dequantize-then-matmul reference) instead of held so and decoded per use."""
    start = time.perf_counter()
    if system in ("executor", "executor_resident"):
        model = StreamingModel(
            model_dir=model_dir,
            placement=placement if system == "executor" else all_resident(placement),
            device=device,
            dtype=dtype,
            evict_after_read=system == "executor",
            kv_host_layers=0,  # the comparison is about weights: KV stays on the compute tier
            compressed=compressed,
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
    hf = load_hf(
        system=system,
        model_dir=model_dir,
        tiers=placement.layer_tiers,
        disk_sources=disk_sources,
        offload_folder=offload_folder,
        device=device,
        dtype=dtype,
    )
    load_s = time.perf_counter() - start
    config = hf.config
    try:
        return _timed(
            system=system,
            load_s=load_s,
            prompts=prompts,
            tokens=tokens,
            forward=_hf_forward(hf, device=device),
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


def _hf_forward(hf: Any, *, device: torch.device) -> Forward:
    @torch.inference_mode()
    def forward(
        ids: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor, cache: DynamicCache, phase: str
    ) -> torch.Tensor:
        # Inputs on the device of the embedding (the GPU in the GPU form), as a user would.
        out = hf(
            input_ids=ids.to(device),
            attention_mask=mask.to(device),
            position_ids=pos.to(device),
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
    _wait(logits)
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
    _wait(logits)
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


def _wait(logits: torch.Tensor) -> None:
    """CUDA kernels run after the call returns: a timer read before they finish would
    time the launches, not the work."""
    if logits.device.type == "cuda":
        torch.cuda.synchronize(logits.device)


def accelerate_device_map(
    *, layer_tiers: list[Tier] | tuple[Tier, ...], cuda: bool
) -> dict[str, int | str]:
    """Accelerate's `device_map` for the executor's split: the same layers on the same
    tiers, the embedding, rotary tables, final norm and head on the compute device (GPU 0,
    or "cpu" on a machine without one). Accelerate keeps "cpu" layers in RAM and copies
    them to GPU 0 at each forward when a GPU computes; "disk" layers it reads from the
    checkpoint at each forward."""
    resident: int | str = 0 if cuda else "cpu"
    where: dict[Tier, int | str] = {"gpu": resident, "cpu": "cpu", "disk": "disk"}
    device_map: dict[str, int | str] = {
        "model.embed_tokens": resident,
        "model.rotary_emb": resident,
        "model.norm": resident,
        "lm_head": resident,
    }
    for i, tier in enumerate(layer_tiers):
        device_map[f"model.layers.{i}"] = where[tier]
    return device_map


def load_hf(
    *,
    system: str,
    model_dir: Path,
    tiers: tuple[Tier, ...],
    disk_sources: list[TensorSource],
    offload_folder: Path,
    device: torch.device,
    dtype: torch.dtype,
) -> Any:
    cuda = device.type == "cuda"
    if system == "resident":
        placed: dict[str, Any] = {"device_map": {"": device}} if cuda else {}
        hf = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, **placed)
    else:
        hf = AutoModelForCausalLM.from_pretrained(
            model_dir,
            dtype=dtype,
            device_map=accelerate_device_map(layer_tiers=tiers, cuda=cuda),
            offload_folder=offload_folder,
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


def forced_placement(
    *,
    hardware: HardwareProfile,
    spec: ModelSpec,
    layer_tiers: list[Tier] | tuple[Tier, ...],
    depth: int,
) -> Placement:
    """The planner's placement for this model on `hardware`, with the layer tiers forced
    (the comparison is exactly "these layers on these tiers"), embedding and head on the
    compute tier."""
    if len(layer_tiers) != spec.num_layers:
        raise ValueError(f"{len(layer_tiers)} layer tiers for {spec.num_layers} layers")
    base = plan(
        hardware=hardware,
        model=spec,
        store=StoreSpec.default(),
        workload=Workload(batch=1, context_tokens=512),
    )
    return dataclasses.replace(
        base,
        layer_tiers=tuple(layer_tiers),
        embed_tier=base.compute_tier,
        head_tier=base.compute_tier,
        prefetch_depth_prefill=1,
        prefetch_depth_decode=depth,
    )


def all_resident(placement: Placement) -> Placement:
    """`placement` with every layer on the compute tier (the executor's T_comp)."""
    return dataclasses.replace(
        placement, layer_tiers=(placement.compute_tier,) * len(placement.layer_tiers)
    )


def write_model(*, folder: Path, size: Size, dtype: str) -> Path:
    """The random model in `folder`, written once (a folder is reused across runs)."""
    if not (folder / "config.json").is_file():
        write_random_model(
            folder=folder,
            architecture=size.architecture,  # type: ignore[arg-type]
            hidden_size=size.hidden,
            num_layers=size.layers,
            num_heads=size.heads,
            num_kv_heads=size.kv_heads,
            intermediate_size=size.intermediate,
            vocab_size=size.vocab,
            dtype=dtype,
        )
    return folder


def _prompts(*, batch: int, length: int) -> torch.Tensor:
    """(B, T) token ids: distinct rows of one length (no padding, so every system sees
    exactly the same input)."""
    rows = [[1] + [40 + (7 * b + 3 * i) % 200 for i in range(length - 1)] for b in range(batch)]
    return torch.tensor(rows, dtype=torch.long)


def load_average() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "unknown"
