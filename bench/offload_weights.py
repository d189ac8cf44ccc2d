"""The executor in each weight format in `ragdoll bench offload --weights ...`.

Names (`parse_formats`): `int8` and `int4` are the model compressed as `ragdoll model
--weights int8|int4` does (Q8_0 / Q4_0 blocks, engine/runtime/models/compress.py); `q8_0`, `q4_0`,
`f16` the same GGUF formats under llama.cpp's names; `bf16` the checkpoint converted to
bf16 and computed in bf16; `f32` the float32 checkpoint itself (run by the main
benchmark). Each format runs under the same placement (the same layers on disk), prompts
and output lengths as the float32 checkpoint, three ways:

- `executor`: half the layers streamed from disk, every layer held as stored (compressed
  in RAM and on disk) and decoded per use in the copy thread;
- `executor_resident`: every layer in RAM, still held as stored and decoded per use;
- `reference`: every layer decoded once at load (a plain dequantize-then-matmul model of
  the same compressed weights). Greedy tokens of the other two must be identical to it.

`disk_bytes_per_token` is what one decode step reads from disk in the streamed run;
`held_bytes` what the resident run holds for the decoder layers between steps.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from gguf import GGMLQuantizationType
from safetensors.torch import load_file, save_file

from bench.offload_systems import MIB, Run, _run_system
from engine.runtime.executor.checkpoint import index_checkpoint, layer_unit
from engine.runtime.executor.page_cache import evict_page_cache
from engine.runtime.models.gguf_file import companion_folder, gguf_source
from engine.runtime.models.gguf_writer import write_gguf
from engine.runtime.planner.placement import Placement

GGUF_FORMATS = {
    "q8_0": GGMLQuantizationType.Q8_0,
    "q4_0": GGMLQuantizationType.Q4_0,
    "f16": GGMLQuantizationType.F16,
    "int8": GGMLQuantizationType.Q8_0,
    "int4": GGMLQuantizationType.Q4_0,
}
FORMATS = (*GGUF_FORMATS, "bf16")


def parse_formats(text: str | None) -> list[str]:
    """The formats of a `--weights` list other than "f32" (the checkpoint itself)."""
    names = [n.strip().lower() for n in (text or "").split(",") if n.strip()]
    unknown = [n for n in names if n not in FORMATS and n not in ("f32", "float32")]
    if unknown:
        raise ValueError(f"unknown weight format {unknown[0]!r}; known: f32, {', '.join(FORMATS)}")
    return [n for n in names if n in FORMATS]


def format_folder(*, model_dir: Path, name: str, cache: Path) -> tuple[Path, list[Path]]:
    """(model folder to run, its weight files) for format `name`, written once."""
    if name == "bf16":
        folder = model_dir.parent / f"{model_dir.name}.bf16"
        if not (folder / "config.json").is_file():
            folder.mkdir(parents=True, exist_ok=True)
            for f in model_dir.iterdir():
                if f.suffix != ".safetensors" and f.is_file():
                    shutil.copy2(f, folder / f.name)
            for f in model_dir.glob("*.safetensors"):
                weights = {k: v.to(torch.bfloat16) for k, v in load_file(str(f)).items()}
                save_file(weights, str(folder / f.name), metadata={"format": "pt"})
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            config["torch_dtype"] = config["dtype"] = "bfloat16"
            (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
        return folder, sorted(folder.glob("*.safetensors"))
    suffix = {"int8": "q8_0", "int4": "q4_0"}.get(name, name)
    gguf_path = model_dir.parent / f"{model_dir.name}.{suffix}.gguf"
    if not gguf_path.is_file():
        write_gguf(model_dir=model_dir, out=gguf_path, qtype=GGUF_FORMATS[name])
    folder = companion_folder(gguf_path=gguf_path, cache=cache)
    source = gguf_source(folder)
    assert source is not None
    return folder, [source]


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
    """{format: {"file_bytes", "disk_bytes_per_token", "held_layer_bytes", "dtype",
    "runs": {batch: figures}}}."""
    out: dict[str, Any] = {}
    for name in formats:
        folder, files = format_folder(model_dir=model_dir, name=name, cache=cache)
        dtype = torch.bfloat16 if name == "bf16" else torch.float32
        sources = index_checkpoint(folder)
        layers = [layer_unit(i) for i in range(len(placement.layer_tiers))]
        disk_layers = [u for u, t in zip(layers, placement.layer_tiers, strict=True) if t == "disk"]
        disk_sources = [s for u in disk_layers for s in sources[u]]
        per_token = sum(s.end - s.start for s in disk_sources)
        held = sum(s.end - s.start for u in layers for s in sources[u])
        runs: dict[str, Any] = {}
        for batch in batches:
            prompts = prompts_of(batch)
            results: dict[str, Run] = {}
            for system, run_as, compressed in (
                ("executor", "executor", True),
                ("executor_resident", "executor_resident", True),
                ("reference", "executor_resident", False),
            ):
                evict_page_cache(files=files)
                results[system] = _run_system(
                    system=run_as,
                    model_dir=folder,
                    placement=placement,
                    prompts=prompts,
                    tokens=tokens,
                    disk_sources=disk_sources,
                    offload_folder=cache / "unused",
                    device=torch.device("cpu"),
                    dtype=dtype,
                    compressed=compressed,
                )
            streamed, resident = results["executor"], results["executor_resident"]
            reference = results["reference"]
            same = streamed.tokens == reference.tokens == resident.tokens
            runs[str(batch)] = {
                "decode_tok_s": streamed.decode_tok_s,
                "prefill_tok_s": streamed.prefill_tok_s,
                "resident_decode_tok_s": resident.decode_tok_s,
                "resident_prefill_tok_s": resident.prefill_tok_s,
                "reference_decode_tok_s": reference.decode_tok_s,
                "load_s": streamed.load_s,
                "copy_busy_s": streamed.copy_busy_s,
                "decode_s": streamed.decode_s,
                "tokens_match_reference": same,
                "tokens_match_resident": same,  # the name earlier figures used
                "tokens": streamed.tokens,
            }
            say(
                f"{'executor ' + name:>18} B={batch}: decode {streamed.decode_tok_s:7.2f} tok/s "
                f"half on disk ({per_token / MIB:.0f} MiB read per step, copy thread busy "
                f"{streamed.copy_busy_s:.2f} s of {streamed.decode_s:.2f} s), "
                f"{resident.decode_tok_s:.2f} tok/s resident compressed "
                f"({held / MIB:.0f} MiB of layers), {reference.decode_tok_s:.2f} tok/s "
                f"decoded at load; greedy tokens {'match' if same else 'DIFFER'}"
            )
        out[name] = {
            "file_bytes": sum(f.stat().st_size for f in files),
            "disk_bytes_per_token": per_token,
            "held_layer_bytes": held,
            "dtype": str(dtype).removeprefix("torch."),
            "runs": runs,
        }
        evict_page_cache(files=files)
    return out
