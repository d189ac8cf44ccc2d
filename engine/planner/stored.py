"""A model's layer sizes as the executor holds them: compressed layers count their
stored bytes.

The executor keeps a decoder layer in its stored form when that is smaller than the
compute dtype (GGML blocks of a GGUF file, a bf16 checkpoint computed in float32) and
decodes it per use (engine/executor/packed.py). The planner must then count the stored
bytes in every tier, and one decoded layer per stream slot in the workspace. The sizes
come from the weight files' headers (safetensors headers, GGUF tensor infos): nothing
is loaded. A folder without weights (a catalogue entry's config) keeps the config's
sizes.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path

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
    return dataclasses.replace(
        spec,
        layer_bytes=tuple(int(p * bits_per_weight / 8) for p in params),
        decoded_layer_bytes=max(spec.layer_bytes),
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
    if cpu and all(kernel_computes(sources) for sources in layers):
        decoded = max(
            sum(decoded_bytes(s, dtype=dtype) for s in sources if not kernel_computes([s]))
            for sources in layers
        )
    kinds: Counter[str] = Counter()
    for sources in layers:
        for s in sources:
            kinds[s.dtype.removeprefix("GGUF:")] += s.end - s.start
    return dataclasses.replace(
        spec,
        layer_bytes=stored,
        decoded_layer_bytes=decoded,
        weight_format=kinds.most_common(1)[0][0],
        parameters=spec.parameter_count,
    )
