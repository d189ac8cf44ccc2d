"""Layers held in their stored (compressed) form, and how they are computed.

A decoder layer whose checkpoint bytes are fewer than its compute-dtype bytes (GGML
blocks of a GGUF file, a bf16 checkpoint computed in float32) is held compressed in
every tier: in GPU memory, in (pinned) host memory, on disk.

On a CPU ("kernel"), every quantized matrix of a GGUF layer is held in the form one of
torch's kernels computes on (engine/runtime/executor/kernel_forms.py: 4-bit blocks as the int4
kernel's groups, the others requantized to int8 per row), made once and never widened;
the layer's norms and biases are held decoded. Elsewhere, and for bf16 checkpoints, the
copy thread decodes a layer into the compute dtype just before it runs ("layer"), or the
compute thread one matrix at a time just before its matmul ("matrix", for tight memory);
decoding is exact (gguf's reference values), so the greedy tokens are those of a model
decoded once at load (tested). "kernel_reference" holds the same forms as "kernel" and
computes each matmul by dequantize-then-matmul: the kernels' reference.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import torch
import torch.nn.functional as F
from torch import nn

from engine.runtime.executor.buffer_pool import BufferPool
from engine.runtime.executor.kernel_forms import (
    Workspace,
    form_bytes,
    form_of,
    fuse_layer,
    named,
    parts_of,
    to_parts,
)
from engine.runtime.executor.kernel_forms import linear as form_linear
from engine.runtime.executor.quant import as_dtype, dequantize, dequantize_into, has_torch_decoder
from engine.runtime.models.gguf_file import permute_rows, read_exactly

if TYPE_CHECKING:
    from collections.abc import Iterable

    from engine.runtime.models.gguf_file import GGUFTensor


# "layer": the copy thread decodes a whole layer one layer ahead (two layers of float32
# held); "matrix": each weight matrix is decoded just before its matmul (one matrix held:
# for a model that must run in little memory); "kernel": quantized matrices are held in
# the forms torch's CPU kernels compute on, made once and never decoded
# (engine/runtime/executor/kernel_forms.py); "kernel_reference": the same forms computed by
# dequantize-then-matmul (the reference "kernel" is tested against, slow).
DecodeMode = Literal["layer", "matrix", "kernel", "kernel_reference"]
PER_MATRIX: frozenset[str] = frozenset({"matrix", "kernel", "kernel_reference"})
KERNEL_MODES: frozenset[str] = frozenset({"kernel", "kernel_reference"})


class TensorSource(Protocol):
    """What this module reads of engine/runtime/executor/checkpoint.py's TensorSource (a Protocol,
    so that the two modules do not import each other)."""

    @property
    def file(self) -> Path: ...
    @property
    def name(self) -> str: ...
    @property
    def param(self) -> str: ...
    @property
    def start(self) -> int: ...
    @property
    def end(self) -> int: ...
    @property
    def dtype(self) -> str: ...
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def gguf(self) -> GGUFTensor | None: ...


# safetensors dtype codes of the floating types a packed tensor may be stored in.
_STORED = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}


def stored_bytes(source: TensorSource) -> int:
    return source.end - source.start


def decoded_bytes(source: TensorSource, *, dtype: torch.dtype) -> int:
    numel = 1
    for d in source.shape:
        numel *= d
    return numel * dtype.itemsize


def packable(sources: list[TensorSource], *, dtype: torch.dtype) -> bool:
    """Whether holding these tensors as stored saves memory over holding them decoded."""
    if not sources:
        return False
    if any(s.gguf is None and s.dtype not in _STORED for s in sources):
        return False
    stored = sum(stored_bytes(s) for s in sources)
    return stored < sum(decoded_bytes(s, dtype=dtype) for s in sources)


def decode(
    raw: torch.Tensor,
    *,
    source: TensorSource,
    dtype: torch.dtype,
    pool: BufferPool | None = None,
) -> torch.Tensor:
    """A tensor's values in `dtype` from its stored bytes (uint8, on any device); the
    arithmetic is `engine.runtime.executor.quant`'s, so GGML blocks decode bit for bit as gguf's
    reference does, on a GPU too. `pool`: reused float32 buffers to decode into (CPU),
    where the format allows; the caller gives the result back to it after use."""
    if pool is not None and dtype == torch.float32 and raw.device.type == "cpu":
        qtype = source.gguf.qtype if source.gguf is not None else None
        if source.gguf is None or not source.gguf.permute_heads:
            out = pool.take(tuple(source.shape), torch.float32)
            if qtype is None:
                out.copy_(raw.view(_STORED[source.dtype]).reshape(source.shape))
                return out
            scratch = pool.take((out.numel(),), torch.uint8)
            done = dequantize_into(raw, qtype=qtype, out=out, scratch=scratch)
            pool.give([scratch])
            if done:
                return out
            pool.give([out])
    if source.gguf is None:
        return as_dtype(raw.view(_STORED[source.dtype]).reshape(source.shape), dtype)
    tensor = source.gguf
    if raw.device.type != "cpu" and not has_torch_decoder(tensor.qtype):
        values = dequantize(raw.cpu(), qtype=tensor.qtype, shape=tensor.shape).to(raw.device)
    else:
        values = dequantize(raw, qtype=tensor.qtype, shape=tensor.shape)
    if tensor.permute_heads:
        values = permute_rows(values, heads=tensor.permute_heads, inverse=True)
    return as_dtype(values, dtype)


def decode_unit(
    packed: dict[str, torch.Tensor],
    *,
    sources: list[TensorSource],
    dtype: torch.dtype,
    pool: BufferPool | None = None,
) -> dict[str, torch.Tensor]:
    by_param = {s.param: s for s in sources}
    return {p: decode(raw, source=by_param[p], dtype=dtype, pool=pool) for p, raw in packed.items()}


def in_file_order(sources: list[TensorSource]) -> Iterator[tuple[Any, TensorSource]]:
    """(open file, source) for each tensor, file by file, in byte order: each file
    opened once and read forwards."""
    by_file: dict[Path, list[TensorSource]] = {}
    for s in sources:
        by_file.setdefault(s.file, []).append(s)
    for file, items in by_file.items():
        with file.open("rb", buffering=0) as f:
            for s in sorted(items, key=lambda s: s.start):
                yield f, s


def read_stored(
    sources: list[TensorSource], *, pin: bool, into: torch.Tensor | None = None
) -> dict[str, torch.Tensor]:
    """Each tensor's stored bytes (uint8, pinned on CUDA), read by byte range into one
    allocation per unit: a streamed layer's tensors (a few to tens of MiB each) allocated
    one by one come from malloc's heap, which keeps the freed bytes, and a limited run
    held ~80 MiB more than its layers (Q8_0, 1.5B shape); one block above malloc's mmap
    threshold goes back to the OS when the layer is released."""
    out: dict[str, torch.Tensor] = {}
    total = sum(stored_bytes(s) for s in sources)
    # `into`: a reused uint8 block of at least `total` bytes (the weight store's pool).
    block = (
        into[:total] if into is not None else torch.empty(total, dtype=torch.uint8, pin_memory=pin)
    )
    at = 0
    for f, s in in_file_order(sources):
        raw = block[at : at + stored_bytes(s)]
        at += stored_bytes(s)
        read_exactly(f, memoryview(raw.numpy()), start=s.start, what=s.name)
        out[s.param] = raw
    return out


class MatrixBuffer:
    """One reused CPU buffer per dtype, grown to the largest matrix asked for: the
    `decode="matrix"` mode decodes each weight matrix into it just before its matmul, so
    the decoded bytes held at any time are one matrix (and its uint8 scratch), not a
    layer. Not thread-safe: only the compute thread decodes in this mode."""

    def __init__(self) -> None:
        self._flat: dict[torch.dtype, torch.Tensor] = {}

    def take(self, shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        need = math.prod(shape)
        flat = self._flat.get(dtype)
        if flat is None or flat.numel() < need:
            self._flat.pop(dtype, None)  # the old one goes before the larger one comes
            flat = torch.empty(need, dtype=dtype)
            self._flat[dtype] = flat
        return flat[:need].view(shape)

    def give(self, tensors: Iterable[torch.Tensor]) -> None:
        """Nothing to do: the next `take` reuses the one buffer."""

    def held_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._flat.values())

    def clear(self) -> None:
        self._flat.clear()


@dataclass(frozen=True, kw_only=True)
class MatrixBinding:
    """What `matrix_decoding` puts in place for one packed layer: each nn.Linear's
    replacement forward and the small parameters decoded. A resident layer's binding is
    built once and reused every step (building it walks the module and decodes the norms
    and biases: about a tenth of a resident Q4_0 decode step's Python time)."""

    forwards: tuple[tuple[nn.Module, Callable[[torch.Tensor], torch.Tensor]], ...]
    small: dict[str, torch.Tensor]


def bind_matrices(
    module: nn.Module,
    *,
    packed: dict[str, torch.Tensor],
    sources: list[TensorSource],
    dtype: torch.dtype,
    buffer: MatrixBuffer,
    workspace: Workspace | None = None,
) -> MatrixBinding:
    """`module`'s binding to `packed` (see `matrix_decoding`)."""
    by_param = {s.param: s for s in sources}
    forwards: list[tuple[nn.Module, Callable[[torch.Tensor], torch.Tensor]]] = []
    lazy: set[str] = set()
    for name, sub in module.named_modules():
        weight = f"{name}.weight" if name else "weight"
        if type(sub) is not nn.Linear:
            continue
        parts = parts_of(packed, weight)
        if parts is not None:
            lazy.update(k for k in packed if k.startswith(weight + ":"))
            forward = _kernel_linear(sub, parts=parts, workspace=workspace or Workspace())
        elif weight in packed and packed[weight].dtype == torch.uint8:
            lazy.add(weight)
            forward = _lazy_linear(
                sub, raw=packed[weight], source=by_param[weight], dtype=dtype, buffer=buffer
            )
        else:
            continue
        forwards.append((sub, forward))
    rest = {p: t for p, t in packed.items() if p not in lazy}
    # Stored bytes are uint8; what repack_unit made is decoded already.
    small = {
        p: decode(t, source=by_param[p], dtype=dtype) if t.dtype == torch.uint8 else t
        for p, t in rest.items()
    }
    return MatrixBinding(forwards=tuple(forwards), small=small)


@contextlib.contextmanager
def bound(binding: MatrixBinding) -> Iterator[dict[str, torch.Tensor]]:
    """Run with `binding`'s forwards in place; yields its small parameters for
    `functional_call`."""
    for sub, forward in binding.forwards:
        sub.forward = forward  # type: ignore[method-assign]
    try:
        yield binding.small
    finally:
        for sub, _ in binding.forwards:
            del sub.forward  # back to the class's forward


@contextlib.contextmanager
def matrix_decoding(
    module: nn.Module,
    *,
    packed: dict[str, torch.Tensor],
    sources: list[TensorSource],
    dtype: torch.dtype,
    buffer: MatrixBuffer,
    workspace: Workspace | None = None,
) -> Iterator[dict[str, torch.Tensor]]:
    """Run `module` (a packed layer) with each nn.Linear weight decoded from its stored
    bytes into `buffer` at the Linear's call, one matrix at a time, or computed in its
    kernel form where `repack_unit` made one (by `workspace`). Yields the other
    parameters (norms, biases: small) decoded, for `functional_call`. The decoded values
    are `decode`'s, and the matmul is nn.Linear's own F.linear, so the results are those
    of whole-layer decoding bit for bit."""
    binding = bind_matrices(
        module, packed=packed, sources=sources, dtype=dtype, buffer=buffer, workspace=workspace
    )
    with bound(binding) as small:
        yield small


def _lazy_linear(
    linear: nn.Linear,
    *,
    raw: torch.Tensor,
    source: TensorSource,
    dtype: torch.dtype,
    buffer: MatrixBuffer,
) -> Callable[[torch.Tensor], torch.Tensor]:
    def forward(x: torch.Tensor) -> torch.Tensor:
        weight = decode(raw, source=source, dtype=dtype, pool=buffer)
        # linear.bias is the decoded bias functional_call has put in place for this call.
        return F.linear(x, weight, linear.bias)

    return forward


def choose_decode(
    *, device: torch.device, packed: list[list[TensorSource]], streamed_from_disk: bool
) -> DecodeMode:
    """How packed layers are computed, chosen from what was measured on this project's
    CPU (docs/executor.md): in their kernel forms wherever a packed layer holds quantized
    GGUF matrices on a CPU (a Qwen2-1.5B-shaped step: 58 ms in int4 against 285 ms for
    bfloat16 and more for float32, decoding not counted); otherwise matrix decoding when
    layers stream from the disk (memory is tight: one matrix held decoded, not two
    layers), else whole layers decoded one ahead (1.14× faster than matrix decoding when
    memory allows)."""
    if device.type != "cpu":
        return "layer"
    if any(has_form(s) for unit in packed for s in unit):
        return "kernel"
    return "matrix" if streamed_from_disk else "layer"


def kernel_computes(sources: list[TensorSource]) -> bool:
    """Whether decode="kernel" computes any of these tensors in a kernel form."""
    return any(has_form(s) for s in sources)


def has_form(source: TensorSource) -> bool:
    return form_of(source.gguf) is not None


def repack_unit(
    packed: dict[str, torch.Tensor],
    *,
    sources: list[TensorSource],
    dtype: torch.dtype,
    fuse: bool = False,
) -> dict[str, torch.Tensor]:
    """A packed unit's tensors ready to compute: each quantized matrix in its kernel
    form (`<param>:int4` and `<param>:scales`, or `<param>:int8` and `<param>:scale8`),
    the rest decoded to `dtype`; with `fuse`, q/k/v and gate/up fused where their forms
    agree (engine/runtime/executor/decoder.py computes such layers)."""
    by_param = {s.param: s for s in sources}
    out: dict[str, torch.Tensor] = {}
    for param, raw in packed.items():
        source = by_param[param]
        if source.gguf is None or not has_form(source):
            t = decode(raw, source=source, dtype=dtype)
            # A view would keep `read_stored`'s whole block (the bytes the forms replace)
            # alive for a norm's few bytes.
            shares = t.untyped_storage().data_ptr() == raw.untyped_storage().data_ptr()
            out[param] = t.clone() if shares else t
            continue
        out.update(named(param, to_parts(raw, tensor=source.gguf)))
    return fuse_layer(out) if fuse else out


def kernel_bytes(source: TensorSource, *, dtype: torch.dtype = torch.float32) -> int:
    """Bytes a tensor holds once `repack_unit` has made it ready: its kernel form, or
    decoded to `dtype`."""
    if source.gguf is not None and has_form(source):
        return form_bytes(source.gguf)
    return decoded_bytes(source, dtype=dtype)


def _kernel_linear(
    linear: nn.Linear, *, parts: Any, workspace: Workspace
) -> Callable[[torch.Tensor], torch.Tensor]:
    def forward(x: torch.Tensor) -> torch.Tensor:
        return form_linear(x, parts=parts, bias=linear.bias, buffer=workspace)

    return forward
