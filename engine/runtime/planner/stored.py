"""A model's sizes as the executor holds them: compressed layers count what is held.

On a CPU the executor computes a GGUF model's quantized matrices in the forms of torch's
kernels (engine/runtime/executor/kernel_forms.py: int4 for 4-bit blocks, int8 for the others)
and never decodes them: its layers and head count those forms' bytes, its embedding its
stored bytes, and the workspace one prefill buffer. Elsewhere a decoder layer is kept in
its stored form when that is smaller than the compute dtype (GGML blocks, a bf16
checkpoint computed in float32) and decoded per use (engine/runtime/executor/packed.py): the
stored bytes in every tier, and in the workspace what the decode mode holds decoded (two
layers decoded whole one ahead, or one matrix and its scratch for a CPU streaming
layers from the disk). The sizes come from the weight files' headers (safetensors
headers, GGUF tensor infos): nothing is loaded. A folder without weights (a catalogue
entry's config) keeps the config's sizes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

from engine.runtime.planner.model_spec import ModelSpec, load_model_spec


def load_held_spec(*, source: Path, dtype: str | None = None, cpu: bool = False) -> ModelSpec:
    """`load_model_spec` of a model folder, with the sizes the executor holds; `cpu`:
    it computes on the CPU (where Q4_0 matrices go to the int4 kernel undecoded)."""
    spec = load_model_spec(source=source, dtype=dtype)
    folder = source if source.is_dir() else source.parent
    return with_stored_sizes(spec, folder=folder, cpu=cpu)


def compressed_spec(
    spec: ModelSpec, *, bits_per_weight: float, name: str, cpu: bool = False
) -> ModelSpec:
    """`spec` as a file of `bits_per_weight` (a GGUF format's average) would be held:
    decoder layers at that size, the embedding and head decoded (for a model that is not
    on this machine, e.g. a catalogue entry's GGUF variant). `cpu`: computed in its kernel
    forms (engine/runtime/executor/kernel_forms.py `held_bits`): layers and head at the forms'
    bits, the embedding as stored, one prefill buffer."""
    params = [b // spec.dtype_bytes for b in spec.layer_bytes]
    h, q_dim = spec.hidden_size, spec.num_attention_heads * spec.head_dim
    largest = max(spec.intermediate_size * h, q_dim * h)
    # Norms and the q/k/v biases some families have, decoded beside the matrix.
    small = (2 * h + q_dim + 2 * spec.num_key_value_heads * spec.head_dim) * spec.dtype_bytes
    if cpu:
        from engine.runtime.executor.kernel_forms import DECODE_ROWS, held_bits

        bits = held_bits(name)
        vocab = spec.vocab_size * h
        return dataclasses.replace(
            spec,
            layer_bytes=tuple(int(p * bits / 8) + small for p in params),
            embed_bytes=int(vocab * bits_per_weight / 8),
            head_bytes=int(vocab * bits / 8) + spec.dtype_bytes * h,
            decoded_layer_bytes=0,
            decoded_matrix_bytes=0,
            kernel_buffer_bytes=min(max(largest, vocab), DECODE_ROWS * h) * 3,
            kept_layer_bytes=max(params) * 2,
            weight_format=name,
            parameters=spec.parameter_count,
        )
    return dataclasses.replace(
        spec,
        layer_bytes=tuple(int(p * bits_per_weight / 8) for p in params),
        decoded_layer_bytes=max(spec.layer_bytes),
        decoded_matrix_bytes=largest * (spec.dtype_bytes + 1) + small,
        weight_format=name,
        parameters=spec.parameter_count,
    )


def with_stored_sizes(spec: ModelSpec, *, folder: Path, cpu: bool = False) -> ModelSpec:
    """`spec` with the sizes of the layers the executor holds compressed. On a CPU, a
    GGUF model's quantized matrices are held in their kernel forms
    (engine/runtime/executor/kernel_forms.py) and never decoded: its layers, its embedding (held
    as stored, rows decoded per lookup) and its head count those bytes, and the
    workspace one prefill buffer instead of decoded copies."""
    import torch

    from engine.runtime.executor.checkpoint import index_checkpoint, layer_unit
    from engine.runtime.executor.packed import kernel_computes, packable, stored_bytes

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
    kinds: Counter[str] = Counter()
    for sources in layers:
        for s in sources:
            kinds[s.dtype.removeprefix("GGUF:")] += s.end - s.start
    fmt = kinds.most_common(1)[0][0]
    if cpu and all(kernel_computes(sources) for sources in layers):
        return _kernel_sizes(spec, units=units, layers=layers, dtype=dtype, fmt=fmt)
    stored = tuple(sum(stored_bytes(s) for s in sources) for sources in layers)
    per_matrix = max(_per_matrix_bytes(sources, dtype=dtype) for sources in layers)
    return dataclasses.replace(
        spec,
        layer_bytes=stored,
        decoded_layer_bytes=max(spec.layer_bytes),
        decoded_matrix_bytes=per_matrix,
        weight_format=fmt,
        parameters=spec.parameter_count,
    )


def _kernel_sizes(
    spec: ModelSpec, *, units: dict[str, list[Any]], layers: list[list[Any]], dtype: Any, fmt: str
) -> ModelSpec:
    """The sizes of a model computed in its kernel forms (see `with_stored_sizes`)."""
    import dataclasses as dc

    from engine.runtime.executor.checkpoint import EMBED, HEAD
    from engine.runtime.executor.kernel_forms import decode_buffer_bytes, kept_layer_bytes
    from engine.runtime.executor.packed import kernel_bytes, stored_bytes

    embed = units.get(EMBED, [])
    head = [s for s in units.get(HEAD, []) if s.param == "lm_head.weight"]
    if not head and spec.tie_word_embeddings:
        # A tied head holds its own kernel form of the embedding matrix.
        head = [dc.replace(s, param="lm_head.weight") for s in embed if s.param == "weight"]
    # A GGUF embedding is held as stored (engine/runtime/executor/weights.py `is_stored_only`).
    stored_embed = any(s.gguf is not None for s in embed)
    embed_bytes = sum(stored_bytes(s) for s in embed) if stored_embed else spec.embed_bytes
    per_layer = [[s.gguf for s in sources if s.gguf is not None] for sources in layers]
    head_gguf = [s.gguf for s in head if s.gguf is not None]
    return dataclasses.replace(
        spec,
        layer_bytes=tuple(sum(kernel_bytes(s, dtype=dtype) for s in sources) for sources in layers),
        embed_bytes=embed_bytes,
        head_bytes=sum(kernel_bytes(s, dtype=dtype) for s in head) if head else spec.head_bytes,
        decoded_layer_bytes=0,
        decoded_matrix_bytes=0,
        kernel_buffer_bytes=max(1, decode_buffer_bytes(per_layer, head=head_gguf)),
        kept_layer_bytes=kept_layer_bytes(per_layer),
        weight_format=fmt,
        parameters=spec.parameter_count,
    )


def _per_matrix_bytes(sources: list[Any], *, dtype: Any) -> int:
    """What decoding this layer one matrix at a time holds at once (`packed.MatrixBuffer`):
    the largest matrix in `dtype` plus a uint8 scratch of as many elements, and the
    layer's norms and biases decoded for the whole layer. A matrix whose rows GGUF
    permuted is decoded fresh and permuted back: two copies."""
    from engine.runtime.executor.packed import decoded_bytes

    matrix, small = 0, 0
    for s in sources:
        size = decoded_bytes(s, dtype=dtype)
        if len(s.shape) < 2:
            small += size
            continue
        copies = 2 if s.gguf is not None and s.gguf.permute_heads else 1
        numel = size // dtype.itemsize
        matrix = max(matrix, copies * size + numel)
    return matrix + small
