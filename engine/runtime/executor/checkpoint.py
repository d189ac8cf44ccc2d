"""A checkpoint's tensors by unit: which file holds each and where its bytes lie.

A *unit* is what the executor streams as one piece: the embedding, one decoder layer, or
the head (final norm + LM head). `index_checkpoint` lists each unit's tensors with their
files and byte ranges, from a safetensors folder's headers or a GGUF file's tensor table,
without reading a weight; the weight store (engine/runtime/executor/weights.py) reads them.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

from engine.runtime.models.gguf_file import GGUFTensor, gguf_source, read_gguf

EMBED = "embed"
HEAD = "head"


def layer_unit(index: int) -> str:
    return f"layer.{index}"


def unit_of(name: str) -> tuple[str, str] | None:
    """(unit, parameter name inside the unit's module) for a checkpoint tensor name."""
    if name.startswith("model.layers."):
        rest = name[len("model.layers.") :]
        index, _, param = rest.partition(".")
        return layer_unit(int(index)), param
    if name.startswith("model.embed_tokens."):
        return EMBED, name[len("model.embed_tokens.") :]
    if name.startswith("model.norm."):
        return HEAD, "norm." + name[len("model.norm.") :]
    if name.startswith("lm_head."):
        return HEAD, "lm_head." + name[len("lm_head.") :]
    return None


@dataclass(frozen=True, kw_only=True)
class TensorSource:
    """One checkpoint tensor: which file holds it and where its bytes lie in that file."""

    file: Path
    name: str  # name inside the file
    param: str  # name inside the unit's module
    start: int  # absolute byte offset of the data in the file
    end: int
    dtype: str = ""  # safetensors dtype code ("F32", "BF16", ...)
    shape: tuple[int, ...] = ()
    gguf: GGUFTensor | None = None  # a GGUF tensor's blocks (decoded when read)


def checkpoint_files(model_dir: Path) -> list[Path]:
    """The safetensors files of a checkpoint (sharded with an index, or a single file)."""
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        weight_map = json.loads(index.read_text(encoding="utf-8"))["weight_map"]
        return [model_dir / f for f in sorted(set(weight_map.values()))]
    single = model_dir / "model.safetensors"
    if single.is_file():
        return [single]
    raise FileNotFoundError(f"no safetensors weights in {model_dir}")


def read_header(path: Path) -> tuple[int, dict[str, dict]]:
    """(offset where data begins, header) of a safetensors file, read without mmap."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    return 8 + size, header


def index_checkpoint(model_dir: Path) -> dict[str, list[TensorSource]]:
    """Each unit's tensors, with their files and byte ranges (for page-cache eviction)."""
    units: dict[str, list[TensorSource]] = {}
    source = gguf_source(model_dir)
    if source is not None:
        for tensor in read_gguf(source).tensors:
            where = unit_of(tensor.name)
            if where is None:
                continue
            unit, param = where
            units.setdefault(unit, []).append(
                TensorSource(
                    file=source,
                    name=tensor.name,
                    param=param,
                    start=tensor.start,
                    end=tensor.end,
                    dtype=f"GGUF:{tensor.qtype.name}",
                    shape=tensor.shape,
                    gguf=tensor,
                )
            )
        return units
    for file in checkpoint_files(model_dir):
        base, header = read_header(file)
        for name, info in header.items():
            where = unit_of(name)
            if where is None:
                continue  # e.g. rotary inv_freq saved by old checkpoints: recomputed instead
            unit, param = where
            start, end = info["data_offsets"]
            units.setdefault(unit, []).append(
                TensorSource(
                    file=file,
                    name=name,
                    param=param,
                    start=base + start,
                    end=base + end,
                    dtype=str(info["dtype"]),
                    shape=tuple(int(d) for d in info["shape"]),
                )
            )
    return units
