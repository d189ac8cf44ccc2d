"""Tensors read by byte range: safetensors straight into their buffers, in the asked
dtype, the same values safetensors itself loads."""

from pathlib import Path

import torch
from safetensors.torch import load_file

from engine.runtime.executor.buffer_pool import BufferPool
from engine.runtime.executor.checkpoint import index_checkpoint, layer_unit
from engine.runtime.executor.tensor_reads import DIRECT_DTYPES, read_direct


def test_direct_reads_give_safetensors_values(llama_dir: Path) -> None:
    sources = index_checkpoint(llama_dir)[layer_unit(0)]
    assert all(s.dtype in DIRECT_DTYPES for s in sources)
    stored = {
        name: t for f in llama_dir.glob("*.safetensors") for name, t in load_file(str(f)).items()
    }
    for dtype in (torch.float32, torch.bfloat16):
        got = read_direct(sources, dtype=dtype, pin=False, pool=BufferPool())
        for s in sources:
            assert got[s.param].dtype == dtype
            assert torch.equal(got[s.param], stored[s.name].to(dtype))
