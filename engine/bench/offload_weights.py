"""The executor on GGUF weights in `ragdoll bench offload --weights f32,q8_0,q4_0`.

The benchmark's random model is written once more as GGUF (engine/models/gguf_writer.py)
in each format asked for, and the executor runs it under the same placement (the same
layers on disk), prompts and output lengths as the float32 checkpoint. The disk tier then
holds GGML blocks: each streamed layer reads 3.8× (Q8_0) or 7.1× (Q4_0) fewer bytes than
float32 and decodes them to float32 in the copy thread. `disk_bytes_per_token` is what
one decode step reads from disk; greedy tokens are compared with the same GGUF run with
every layer resident (the same decoded weights, nothing streamed).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gguf import GGMLQuantizationType

from engine.bench.offload_systems import MIB, Run, _run_system
from engine.executor.weights import evict_page_cache, index_checkpoint, layer_unit
from engine.models.gguf_file import companion_folder
from engine.models.gguf_writer import write_gguf
from engine.planner.placement import Placement

FORMATS = {
    "q8_0": GGMLQuantizationType.Q8_0,
    "q4_0": GGMLQuantizationType.Q4_0,
    "f16": GGMLQuantizationType.F16,
}


def parse_formats(text: str | None) -> list[str]:
    """The GGUF formats of a `--weights` list ("f32" is the checkpoint itself)."""
    names = [n.strip().lower() for n in (text or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in FORMATS and n not in ("f32", "float32")]
    if unknown:
        raise ValueError(f"unknown weight format {unknown[0]!r}; known: f32, {', '.join(FORMATS)}")
    return [n for n in names if n in FORMATS]


def run_weight_formats(
    *,
    model_dir: Path,
    formats: list[str],
    placement: Placement,
    batches: list[int],
    prompts_of: Callable[[int], torch.Tensor],
    tokens: int,
    cache: Path,
    say: Callable[[str], None],
) -> dict[str, Any]:
    """{format: {"file_bytes", "disk_bytes_per_token", "runs": {batch: figures}}}."""
    out: dict[str, Any] = {}
    for name in formats:
        gguf_path = model_dir.parent / f"{model_dir.name}.{name}.gguf"
        if not gguf_path.is_file():
            write_gguf(model_dir=model_dir, out=gguf_path, qtype=FORMATS[name])
        folder = companion_folder(gguf_path=gguf_path, cache=cache)
        sources = index_checkpoint(folder)
        disk_layers = [layer_unit(i) for i, t in enumerate(placement.layer_tiers) if t == "disk"]
        disk_sources = [s for u in disk_layers for s in sources[u]]
        per_token = sum(s.end - s.start for s in disk_sources)
        runs: dict[str, Any] = {}
        for batch in batches:
            prompts = prompts_of(batch)
            results: dict[str, Run] = {}
            for system in ("executor", "executor_resident"):
                evict_page_cache(files=[gguf_path])
                results[system] = _run_system(
                    system=system,
                    model_dir=folder,
                    placement=placement,
                    prompts=prompts,
                    tokens=tokens,
                    disk_sources=disk_sources,
                    offload_folder=cache / "unused",
                    device=torch.device("cpu"),
                    dtype=torch.float32,
                )
            streamed, resident = results["executor"], results["executor_resident"]
            same = streamed.tokens == resident.tokens
            runs[str(batch)] = {
                "decode_tok_s": streamed.decode_tok_s,
                "prefill_tok_s": streamed.prefill_tok_s,
                "resident_decode_tok_s": resident.decode_tok_s,
                "load_s": streamed.load_s,
                "copy_busy_s": streamed.copy_busy_s,
                "decode_s": streamed.decode_s,
                "tokens_match_resident": same,
                "tokens": streamed.tokens,
            }
            say(
                f"{'executor ' + name:>18} B={batch}: decode {streamed.decode_tok_s:7.2f} tok/s, "
                f"prefill {streamed.prefill_tok_s:8.1f} tok/s, {per_token / MIB:.0f} MiB read "
                f"from disk per step, copy thread busy {streamed.copy_busy_s:.2f} s of "
                f"{streamed.decode_s:.2f} s; resident {resident.decode_tok_s:.2f} tok/s; "
                f"greedy tokens {'match' if same else 'DIFFER'}"
            )
        out[name] = {
            "file_bytes": gguf_path.stat().st_size,
            "disk_bytes_per_token": per_token,
            "runs": runs,
        }
        evict_page_cache(files=[gguf_path])
    return out
