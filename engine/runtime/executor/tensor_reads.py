"""Tensors read from a checkpoint's files by byte range, for the weight store
(engine/runtime/executor/weights.py): safetensors tensors straight into their buffers,
GGUF tensors decoded as read."""

from __future__ import annotations

import torch

from engine.runtime.executor.buffer_pool import BufferPool
from engine.runtime.executor.checkpoint import TensorSource
from engine.runtime.executor.packed import in_file_order
from engine.runtime.models.gguf_file import read_exactly, read_tensor

# safetensors dtype codes the direct reader understands (the others go through safe_open).
DIRECT_DTYPES: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def read_direct(
    sources: list[TensorSource], *, dtype: torch.dtype, pin: bool, pool: BufferPool
) -> dict[str, torch.Tensor]:
    """Read each tensor's bytes with one `readinto` straight into its own (pinned, on
    CUDA) buffer: large sequential reads the kernel can read ahead, no page faults in
    4 KiB steps as with a memory map, one copy fewer. Little-endian files on a
    little-endian host, as safetensors specifies."""
    out: dict[str, torch.Tensor] = {}
    for f, s in in_file_order(sources):
        stored = DIRECT_DTYPES[s.dtype]
        same = stored == dtype
        # Pinned buffers come from torch's caching host allocator instead.
        t = (
            torch.empty(s.shape, dtype=stored, pin_memory=same)
            if pin
            else pool.take(s.shape, stored)
        )
        if t.numel():
            read_exactly(
                f, memoryview(t.view(-1).view(torch.uint8).numpy()), start=s.start, what=s.name
            )
        if not same:
            staged = t
            t = staged.to(dtype)
            if pin:
                t = t.pin_memory()
            else:
                pool.give([staged])
        out[s.param] = t
    return out


def read_gguf(
    sources: list[TensorSource], *, dtype: torch.dtype, pin: bool
) -> dict[str, torch.Tensor]:
    """Read each tensor's GGML blocks by byte range and decode them (in the copy thread
    for streamed units, so the file and the page cache hold only compressed bytes)."""
    out: dict[str, torch.Tensor] = {}
    # A GGUF model is one file (split files are refused in read_gguf).
    with sources[0].file.open("rb", buffering=0) as f:
        for s in sorted(sources, key=lambda s: s.start):
            assert s.gguf is not None
            t = read_tensor(f, s.gguf, dtype=dtype)
            out[s.param] = t.pin_memory() if pin else t
    return out
