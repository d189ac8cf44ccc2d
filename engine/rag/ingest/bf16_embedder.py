"""The embedder's weights in bfloat16 on a CPU that computes bf16 natively.

On CPUs with AVX-512 BF16 or AMX (`cpu_bf16_is_fast`, engine/runtime/models/loading.py)
a bf16 matmul runs about twice as fast as float32, and MiniLM's encode is almost
all matmuls. The vectors stay the model's: the copy is checked against float32 on
probe texts (cosine ≥ `MIN_COSINE`, the rule for any back-end swap) and kept only
if it passes; pooling and normalisation are done in float32 by the caller.
Measured on the 12 real manuals' chunks (docs/benchmarks.md, "Embedder
back-ends"): cosine ≥ 0.9998 to float32, about 1.9× the chunks per second.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import numpy as np

from engine.rag.ingest.onnx_embedder import MIN_COSINE, PROBES

log = logging.getLogger(__name__)


_BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16"})


def bf16_applies() -> bool:
    """Whether bf16 weights pay on this CPU: it says it computes bf16 natively
    (Linux's CPU flags), else a matmul timed once per process. The flags come
    first because the timing is a few milliseconds: on a busy machine it
    said "no" on this EPYC (AVX-512 BF16), and the embedder then ran in
    float32 on ONNX Runtime at half the speed (docs/benchmarks-history.md, "int8")."""
    if cpu_flags() & _BF16_FLAGS:
        return True
    from engine.runtime.models.loading import cpu_bf16_is_fast

    return cpu_bf16_is_fast()


def cpu_flags(*, cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags as Linux lists them; none elsewhere."""
    try:
        with cpuinfo.open(encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    return frozenset(line.partition(":")[2].split())
    except OSError:
        pass
    return frozenset()


def bf16_copy(*, model: Any, location: str) -> Any | None:
    """A bf16 copy of `model` (a SentenceTransformer on the CPU) that gives its
    vectors, or None (the reason is logged)."""
    import torch

    try:
        want = _vectors(model)
        fast = copy.deepcopy(model).to(torch.bfloat16)
        got = _vectors(fast)
    except Exception as e:  # any failure means: float32, as before
        log.warning("embedder %s stays in float32: bf16 failed (%s)", location, e)
        return None
    cosine = float(np.min(np.sum(got * want, axis=1)))
    if cosine < MIN_COSINE:
        log.warning("embedder %s stays in float32: bf16 cosine %.5f", location, cosine)
        return None
    return fast


def _vectors(model: Any) -> np.ndarray:
    import torch

    with torch.inference_mode():
        out = model.encode(PROBES, convert_to_tensor=True, show_progress_bar=False)
        return torch.nn.functional.normalize(out.float(), p=2, dim=1).cpu().numpy()
