"""A model's layer sizes as the executor holds them: compressed layers count their
stored bytes.

The executor keeps a decoder layer in its stored form when that is smaller than the
compute dtype (GGML blocks of a GGUF file, a bf16 checkpoint computed in float32) and
decodes it per use (engine/executor/packed.py). The planner must then count the stored
bytes in every tier, and in the workspace what the executor's decode mode holds decoded:
two layers where it decodes whole layers one ahead, one matrix (and its scratch) where it
decodes one matrix at a time (a CPU streaming layers from the disk). The sizes
come from the weight files' headers (safetensors headers, GGUF tensor infos): nothing
is loaded. A folder without weights (a catalogue entry's config) keeps the config's
sizes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from engine.planner.model_spec import ModelSpec, load_model_spec


def load_held_spec(*, source: Path, dtype: str | None = None, cpu: bool = False) -> ModelSpec:
    """`load_model_spec` of a model folder, with the sizes the executor holds; `cpu`:
    it computes on the CPU (where Q4_0 matrices go to the int4 kernel undecoded)."""
    spec = load_model_spec(source=source, dtype=dtype)
    folder = source if source.is_dir() else source.parent
    return with_stored_sizes(spec, folder=folder, cpu=cpu)


def compressed_spec(spec: ModelSpec, *, bits_per_weight: float, name: str) -> ModelSpec:
    """`spec` as a file of `bits_per_weight` (a GGUF format's average) would be held:
    decoder layers at that size, the embedding and head decoded (for a model that is not
    on this machine, e.g. a catalogue entry's GGUF variant)."""
    params = [b // spec.dtype_bytes for b in spec.layer_bytes]
    h, q_dim = spec.hidden_size, spec.num_attention_heads * spec.head_dim
    largest = max(spec.intermediate_size * h, q_dim * h)
    # Norms and the q/k/v biases some families have, decoded beside the matrix.
    small = (2 * h + q_dim + 2 * spec.num_key_value_heads * spec.head_dim) * spec.dtype_bytes
    return dataclasses.replace(
        spec,
        layer_bytes=tuple(int(p * bits_per_weight / 8) for p in params),
        decoded_layer_bytes=max(spec.layer_bytes),
        decoded_matrix_bytes=largest * (spec.dtype_bytes + 1) + small,
        weight_format=name,
        parameters=spec.parameter_count,
    )


def with_stored_sizes(spec: ModelSpec, *, folder: Path, cpu: bool = False) -> ModelSpec:
    """`spec` with the stored sizes of the layers the executor holds compressed. On a
    CPU with the int4 kernel a layer's decoded copy is only what the kernel does not
    compute (its norms and biases, any other quant type): the workspace then keeps no
    room for float32 copies of matrices that are never made."""
    import torch

    from engine.executor import int4
    from engine.executor.packed import (
        decoded_bytes,
        kernel_bytes,
        kernel_computes,
        packable,
        stored_bytes,
    )
    from engine.executor.weights import index_checkpoint, layer_unit

    try:
        units = index_checkpoint(folder)
    except Exception:
        # A broken header (even a MemoryError from a garbage length) is the loader's to
        # report, with the file's name; plan with the config's sizes.
        return spec
    dtype = getattr(torch, spec.dtype, None)
    if not isinstance(dtype, torch.dtype):
        return spec
    layers = [units.get(layer_unit(i), []) for i in range(spec.num_layers)]
    if not all(layers) or not all(packable(sources, dtype=dtype) for sources in layers):
        return spec
    # Q4_0 matrices are held repacked for the CPU int4 kernel (0.625 bytes a weight,
    # not 0.5625) wherever torch has it; counted so on a GPU too (at most 11 % high).
    held = kernel_bytes if int4.available() else stored_bytes
    stored = tuple(sum(held(s) for s in sources) for sources in layers)
    decoded = max(spec.layer_bytes)
    kernel = cpu and all(kernel_computes(sources) for sources in layers)
    if kernel:
        decoded = max(
            sum(decoded_bytes(s, dtype=dtype) for s in sources if not kernel_computes([s]))
            for sources in layers
        )
    per_matrix = max(_per_matrix_bytes(sources, dtype=dtype, kernel=kernel) for sources in layers)
    kinds: Counter[str] = Counter()
    for sources in layers:
        for s in sources:
            kinds[s.dtype.removeprefix("GGUF:")] += s.end - s.start
    return dataclasses.replace(
        spec,
        layer_bytes=stored,
        decoded_layer_bytes=decoded,
        decoded_matrix_bytes=per_matrix,
        weight_format=kinds.most_common(1)[0][0],
        parameters=spec.parameter_count,
    )


def _per_matrix_bytes(sources: list[Any], *, dtype: Any, kernel: bool) -> int:
    """What decoding this layer one matrix at a time holds at once (`packed.MatrixBuffer`):
    the largest matrix in `dtype` plus a uint8 scratch of as many elements, and the
    layer's norms and biases decoded for the whole layer. A matrix whose rows GGUF
    permuted is decoded fresh and permuted back: two copies. `kernel`: Q4_0 matrices go to
    the int4 kernel undecoded."""
    from engine.executor.packed import decoded_bytes, kernel_computes

    matrix, small = 0, 0
    for s in sources:
        if kernel and kernel_computes([s]):
            continue
        size = decoded_bytes(s, dtype=dtype)
        if len(s.shape) < 2:
            small += size
            continue
        copies = 2 if s.gguf is not None and s.gguf.permute_heads else 1
        numel = size // dtype.itemsize
        matrix = max(matrix, copies * size + numel)
    return matrix + small
