"""A safetensors model compressed on load to int8 or int4, kept in the cache and reused.

`ragdoll model PATH --weights int8|int4` (the `model_weights` setting): the checkpoint
is written once as GGUF blocks with llama.cpp's own layouts — int8 as Q8_0 (groups of 32
int8 values with one fp16 scale: 8.5 bits per weight), int4 as Q4_0 (groups of 32 4-bit
values with one fp16 scale: 4.5 bits) — by engine/runtime/models/gguf_writer.py, and from then on
runs through the GGUF path: each layer is one contiguous byte range of that file, held
compressed in every tier and decoded per use (engine/runtime/executor/packed.py). FlexGen's int4 is
group-wise too (groups of 64, with a minimum as well as a scale); Q4_0 is symmetric, which
keeps the file readable by llama.cpp and the decoder exact against gguf's reference.

The folder standing for the compressed model keeps the original config, tokenizer and
generation config (nothing is rebuilt from GGUF metadata), so only the weights differ.
It is keyed by the checkpoint's files, sizes and modification times: a changed
checkpoint is compressed again, an unchanged one never twice.

`bf16` and `f32` compress nothing: they choose the compute dtype (`open_model`'s dtype).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
from pathlib import Path

from gguf import GGMLQuantizationType

from engine.errors import ModelLoadError
from engine.runtime.models.gguf_file import SOURCE_FILE, gguf_source

WEIGHT_FORMATS = ("auto", "int8", "int4", "bf16", "f32")
_QTYPES = {"int8": GGMLQuantizationType.Q8_0, "int4": GGMLQuantizationType.Q4_0}
_DTYPES = {"bf16": "bfloat16", "f32": "float32"}
# Files of a model folder that are not weights: copied to the compressed model's folder.
_KEEP = (
    "config.json",
    "generation_config.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
    "tokenizer.model",
    "vocab.json",
    "merges.txt",
    "chat_template.jinja",
    "added_tokens.json",
)


def check_weights(weights: str) -> str:
    name = (weights or "auto").strip().lower()
    if name not in WEIGHT_FORMATS:
        raise ModelLoadError(
            f"Unknown weight format {weights!r}; expected one of {', '.join(WEIGHT_FORMATS)}."
        )
    return name


def compute_dtype_of(weights: str) -> str | None:
    """The dtype a weight format asks for (None: the model's own choice)."""
    return _DTYPES.get(check_weights(weights))


def weights_folder(*, folder: Path, weights: str, cache: Path) -> Path:
    """The folder to run for `weights`: `folder` itself, or its int8/int4 form (written
    on first use, minutes for a few billion parameters; then reused)."""
    name = check_weights(weights)
    qtype = _QTYPES.get(name)
    if qtype is None:
        return folder
    if gguf_source(folder) is not None:
        raise ModelLoadError(
            f"{folder.name} is already a GGUF file; it runs in its own format, not {name}."
        )
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise ModelLoadError(f"No safetensors weights in {folder} to compress.")
    stamp = "|".join(f"{f.resolve()}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files)
    key = hashlib.sha256(f"{stamp}|{name}".encode()).hexdigest()[:12]
    out = cache / "compressed" / f"{folder.name}-{name}-{key}"
    if (out / SOURCE_FILE).is_file():
        return out
    from engine.runtime.models.gguf_writer import write_gguf

    tmp = out.with_name(out.name + f".tmp{os.getpid()}")
    tmp.mkdir(parents=True, exist_ok=True)
    try:
        gguf_path = write_gguf(
            model_dir=folder, out=tmp / f"{folder.name}.{name}.gguf", qtype=qtype
        )
    except (ValueError, KeyError, OSError) as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ModelLoadError(f"Could not compress {folder.name} to {name}: {e}") from e
    for keep in _KEEP:
        if (folder / keep).is_file():
            shutil.copy2(folder / keep, tmp / keep)
    final = out / gguf_path.name
    (tmp / SOURCE_FILE).write_text(
        json.dumps({"file": str(final), "architecture": "", "compressed_from": str(folder)}),
        encoding="utf-8",
    )
    with contextlib.suppress(OSError):  # another process made it first
        tmp.rename(out)
    shutil.rmtree(tmp, ignore_errors=True)
    return out
