"""Loading a model folder: what is read before a placement exists (tokenizer, config,
context window, compute dtype), then the layer-streaming executor under a placement.

Neither step plans: the PlacementOwner (engine/runtime/planner/owner.py) decides where the
tensors live, and engine/rag/answer/in_use.py puts the three together.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoConfig, AutoTokenizer

from engine.errors import ModelLoadError
from engine.runtime.executor.forward import StreamingModel
from engine.runtime.models.gguf_file import gguf_source
from engine.runtime.models.resolve import check_model_folder, display_name
from engine.runtime.planner.placement import Placement

# Used when neither the config nor the tokenizer says how long a context can be.
_FALLBACK_CONTEXT = 2048


@dataclass(frozen=True, kw_only=True)
class ModelFiles:
    """A model folder's tokenizer and config, read before anything is placed."""

    path: Path
    name: str  # 'org/name' for a Hugging Face cache snapshot, else the folder's name
    tokenizer: Any
    config: Any
    context_length: int

    def compute_dtype(self, *, dtype: str | None, cpu: bool) -> torch.dtype:
        """The dtype asked for; else the checkpoint's, except on a CPU: bf16 stays bf16
        only where a bf16 matmul is measured at least as fast as float32 here (CPUs with
        AVX-512 BF16 or AMX; `cpu_bf16_is_fast`), f16 and slow bf16 compute in float32
        (the layers are then held in their stored 2 bytes and widened per use, never
        doubled: engine/runtime/executor/packed.py), and a GGUF file's blocks decode to float32
        (exact; bf16 would round them)."""
        if dtype:
            return torch_dtype(dtype)
        stored = getattr(self.config, "dtype", None) or getattr(self.config, "torch_dtype", None)
        if isinstance(stored, str):
            stored = getattr(torch, stored, None)
        if not isinstance(stored, torch.dtype):
            return torch.float32
        if cpu and stored == torch.bfloat16 and gguf_source(self.path) is None:
            return torch.bfloat16 if cpu_bf16_is_fast() else torch.float32
        if cpu and stored in (torch.bfloat16, torch.float16):
            return torch.float32
        return stored


@functools.cache
def cpu_bf16_is_fast() -> bool:
    """Whether a bf16 matmul of a decode step's shape (8 rows against a 2048² weight)
    runs at least as fast as float32 on this CPU: best of 5, a few milliseconds, measured
    once per process. Measured here (AMD EPYC with AVX-512 BF16, 1 thread): bf16 0.6 ms
    against 1.1 ms at 1 row, 0.7 ms against 2.7 ms at 8 rows of a 1024×4096 weight."""
    x = torch.randn(8, 2048)
    w = torch.randn(2048, 2048)

    def best(a: torch.Tensor, b: torch.Tensor) -> float:
        times = []
        for _ in range(6):
            start = time.perf_counter()
            a @ b
            times.append(time.perf_counter() - start)
        return min(times[1:])  # the first call pays for the kernel choice

    with torch.inference_mode():
        f32 = best(x, w)
        bf16 = best(x.bfloat16(), w.bfloat16())
    return bf16 <= f32


@dataclass(frozen=True, kw_only=True)
class LoadedModel:
    """A model ready to generate: its files and its executor (weights in their homes)."""

    files: ModelFiles
    executor: StreamingModel


def read_model_files(*, model_path: Path) -> ModelFiles:
    """ModelLoadError when the folder is not a safetensors model this can read."""
    check_model_folder(model_path)
    try:
        tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
        config = AutoConfig.from_pretrained(model_path, local_files_only=True)
    except Exception as e:
        raise ModelLoadError(f"Could not load the language model in {model_path}: {e}") from e
    return ModelFiles(
        path=model_path,
        name=display_name(model_path=model_path),
        tokenizer=tokenizer,
        config=config,
        context_length=_context_length(config=config, tokenizer=tokenizer),
    )


def load_model(
    *,
    files: ModelFiles,
    placement: Placement,
    dtype: torch.dtype,
    fault_hook: Callable[[str], None] | None = None,
    evict_after_read: bool = False,
    repack_cache: Path | None = None,
    compressed: bool = True,
) -> LoadedModel:
    """The executor under `placement` (nothing loads whole: each unit is read into its
    home tier). `fault_hook` and `evict_after_read` are the executor's test and
    benchmark seams; `repack_cache` is where streamed Q4_0 layers are kept repacked for
    the int4 kernel (engine/runtime/executor/repacked.py); `compressed=False` decodes layers
    stored compressed once at load (the placement must count them decoded)."""
    try:
        executor = StreamingModel(
            model_dir=files.path,
            placement=placement,
            dtype=dtype,
            fault_hook=fault_hook,
            evict_after_read=evict_after_read,
            repack_cache=repack_cache,
            compressed=compressed,
        )
    except Exception as e:
        raise ModelLoadError(f"Could not load the language model in {files.path}: {e}") from e
    return LoadedModel(files=files, executor=executor)


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ModelLoadError(f"Unknown dtype {name!r}; expected e.g. float32, bfloat16, float16.")
    return dtype


def _context_length(*, config: Any, tokenizer: Any) -> int:
    text = config.get_text_config() if hasattr(config, "get_text_config") else None
    length = getattr(text or config, "max_position_embeddings", None)
    if not length:
        # Tokenizers without a limit report a huge sentinel (int(1e30)).
        limit = getattr(tokenizer, "model_max_length", None)
        length = limit if limit and limit < 10_000_000 else _FALLBACK_CONTEXT
    return int(length)
