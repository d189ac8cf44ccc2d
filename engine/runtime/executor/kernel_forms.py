"""Which form a GGUF matrix is held in for computing, and the matmul that reads that form.

On a CPU every quantized matrix of a GGUF file is held in a form a kernel computes on,
never widened to float32:

- "ggml": the file's own blocks, as stored (a view of the file mapped into memory:
  nothing repacked, nothing copied), computed by the native kernel library
  (engine/runtime/executor/ggml_native.py) wherever it builds and has the block type;
- otherwise in the layout one of torch's kernels computes on, made once from the blocks:
  "int4" for Q4_0, Q4_1 and Q4_K, exactly (engine/runtime/executor/int4.py, 0.625 bytes a
  weight); "int8" for every other block type, requantized per row (engine/runtime/executor/int8.py,
  1 byte).

A unit's tensors name a matrix `p` (e.g. "mlp.down_proj.weight") by its parts: `p:int4`
and `p:scales`, or `p:int8` and `p:scale8`; a float matrix is `p` itself. q/k/v and
gate/up of a layer may be fused into one matrix (`QKV`, `GATE_UP`) so that a layer is
four matmuls, not seven (gpt-fast's fusion).

`linear` picks the computation by the number of rows: the kernels for a decode step's
few rows; for a prefill's many, the matrix decoded to bfloat16 into a reused buffer and
one bfloat16 matmul (oneDNN, AVX-512 BF16 here). Measured on this project's CPU, one
thread, an 17,920 × 1,536 int4 matrix (docs/executor.md): the kernel takes 1.2 ms at 1
row, 12 ms at 16, 69 ms at 128; the bfloat16 matmul 30 ms at 128 rows plus 44 ms to
decode the matrix. So the kernel serves up to `_KERNEL_ROWS` rows.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from gguf import GGMLQuantizationType

from engine.runtime.executor import ggml_native, int4, int8
from engine.runtime.executor.int4 import reference_linear
from engine.runtime.executor.quant import block_bytes, decodable, dequantize
from engine.runtime.models.gguf_file import GGUFTensor, permute_rows

Form = Literal["int4", "int8", "ggml"]
QKV = "self_attn.qkv_proj"
GATE_UP = "mlp.gate_up_proj"
_FUSED = {
    QKV: ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"),
    GATE_UP: ("mlp.gate_proj", "mlp.up_proj"),
}
_PLAIN = frozenset({GGMLQuantizationType.F32, GGMLQuantizationType.F16, GGMLQuantizationType.BF16})
_PARTS: dict[Form, tuple[str, str]] = {
    "int4": (int4.INT4, int4.SCALES),
    "int8": (int8.INT8, int8.SCALE8),
    # The blocks (N, bytes a row) and, int64: the GGML type, the columns, then (q/k of a
    # Llama file) the GGUF row of each Hugging Face row.
    "ggml": (":ggml", ":ggmeta"),
}
# Rows up to which the kernel beats decoding the matrix for a bfloat16 matmul (the
# module docstring; int8's kernel falls behind sooner: 28 ms against 9 + 15 at 32 rows).
# The native kernels' limit is also the most rows a native decode layer takes
# (engine/runtime/executor/native_layer.py).
NATIVE_ROWS = 8
_KERNEL_ROWS: dict[Form, int] = {"int4": 96, "int8": 24, "ggml": NATIVE_ROWS}
# A matrix decoded for a bfloat16 matmul is decoded this many of its rows at a time (a
# multiple of the int4 tiles' 64): a 151,936-row LM head computed for every position
# (a likelihood) would otherwise need 0.7 GB of buffer; 16,384 rows of 1,536 need 75 MB.
DECODE_ROWS = 16_384


# Bits a weight takes in its kernel form, by llama.cpp file type: 4-bit blocks 5 bits,
# every other block type 8. Q4_K_M keeps about a sixth of its layer weights (some v and
# down matrices) and its head in Q6_K (Qwen2.5-1.5B's file: 198 M of 1,310 M).
_HELD_BITS = {"Q4_0": 5.0, "Q4_1": 5.0, "Q4_K_S": 5.0, "Q4_K_M": 5.5}


# The same held as stored ("ggml"): llama.cpp's own averages of its file types.
_STORED_BITS = {
    "Q4_0": 4.5,
    "Q4_1": 5.0,
    "Q5_0": 5.5,
    "Q5_1": 6.0,
    "Q8_0": 8.5,
    "Q4_K_S": 4.6,
    "Q4_K_M": 4.9,
    "Q5_K_S": 5.5,
    "Q5_K_M": 5.7,
    "Q6_K": 6.6,
}


def held_bits(file_type: str) -> float:
    """Bits a weight of a GGUF file of this type takes held in the kernel forms (an
    estimate for a file not on this machine: the catalogue's variants)."""
    stored = _STORED_BITS.get(file_type.upper())
    if stored is not None and ggml_native.library() is not None:
        return stored
    return _HELD_BITS.get(file_type.upper(), 8.0)


def form_of(tensor: GGUFTensor | None) -> Form | None:
    """The form this GGUF tensor is computed in on a CPU; None: decoded as before
    (float matrices, vectors, or a torch without the kernels)."""
    if tensor is None or len(tensor.shape) != 2 or tensor.qtype in _PLAIN:
        return None
    if tensor.qtype in ggml_native.TYPES and ggml_native.library() is not None:
        per_block, _ = block_bytes(tensor.qtype)
        if tensor.shape[1] % per_block == 0:
            return "ggml"
    if int4.available() and int4.repackable(qtype=tensor.qtype, shape=tensor.shape):
        return "int4"
    if int8.available() and decodable(tensor.qtype):
        return "int8"
    return None


def form_bytes(tensor: GGUFTensor) -> int:
    """Bytes the matrix holds in its form (its stored bytes when it has none)."""
    form = form_of(tensor)
    numel = math.prod(tensor.shape)
    if form == "ggml":
        # The blocks, and the meta `to_parts` keeps beside them (int64: type, columns and,
        # for a Llama file's q/k, each row's GGUF row).
        meta = 2 + (tensor.shape[0] if tensor.permute_heads else 0)
        return tensor.end - tensor.start + 8 * meta
    if form == "int4":
        return numel // 2 + numel // int4.GROUP * 4
    if form == "int8":
        return numel + tensor.shape[0] * 2
    return tensor.end - tensor.start


def _decoded_rows(raw: torch.Tensor, *, tensor: GGUFTensor, start: int, stop: int) -> torch.Tensor:
    """Rows [start, stop) of a matrix as stored (GGUF order), decoded to float32."""
    rows, cols = tensor.shape
    per_row = raw.numel() // rows
    part = raw[start * per_row : stop * per_row]
    return dequantize(part, qtype=tensor.qtype, shape=(stop - start, cols)).float()


@dataclass(frozen=True, kw_only=True)
class Parts:
    """A matrix in its form, in Hugging Face row order, before it is named in a unit."""

    form: Form
    values: torch.Tensor  # int4: nibbles (N, K/2) uint8; int8: (N, K) int8; ggml: blocks
    scales: torch.Tensor  # int4: (K/32, N, 2) bfloat16; int8: (N,) bfloat16; ggml: meta

    @property
    def qtype(self) -> int:
        """ggml: the GGML block type."""
        return int(self.scales[0])

    @property
    def cols(self) -> int:
        """ggml: the matrix's columns."""
        return int(self.scales[1])

    @property
    def gguf_rows(self) -> torch.Tensor | None:
        """ggml: the GGUF row of each Hugging Face row, when they differ."""
        return self.scales[2:] if self.scales.numel() > 2 else None


def to_parts(raw: torch.Tensor, *, tensor: GGUFTensor) -> Parts:
    """`raw` (the matrix's GGUF bytes) in its form."""
    form = form_of(tensor)
    rows, cols = tensor.shape
    if form == "ggml":
        meta = [int(tensor.qtype), cols]
        if tensor.permute_heads:
            order = torch.arange(rows)
            meta += permute_rows(order, heads=tensor.permute_heads, inverse=True).tolist()
        return Parts(form="ggml", values=raw.view(rows, -1), scales=torch.tensor(meta))
    if form == "int4":
        nibbles, scales = int4.repack(
            raw, qtype=tensor.qtype, shape=(rows, cols), permute_heads=tensor.permute_heads
        )
        return Parts(form="int4", values=nibbles, scales=scales)
    if form != "int8":
        raise ValueError(f"{tensor.name}: {tensor.qtype.name} has no kernel form")
    values, scale = int8.requantize_rows(
        rows=rows,
        cols=cols,
        decode=lambda start, stop: _decoded_rows(raw, tensor=tensor, start=start, stop=stop),
    )
    if tensor.permute_heads:
        values = permute_rows(values, heads=tensor.permute_heads, inverse=True)
        scale = permute_rows(scale, heads=tensor.permute_heads, inverse=True)
    return Parts(form="int8", values=values, scales=scale)


def named(param: str, parts: Parts) -> dict[str, torch.Tensor]:
    """The unit's tensors holding `parts` as the matrix `param`."""
    values, scales = _PARTS[parts.form]
    return {param + values: parts.values, param + scales: parts.scales}


def fused(members: list[Parts]) -> Parts | None:
    """One matrix of `members` stacked by rows, when they share a form (None: not)."""
    forms = {p.form for p in members}
    if len(forms) != 1 or "ggml" in forms:  # blocks stay where the file has them
        return None
    form = forms.pop()
    dim = 1 if form == "int4" else 0  # int4 scales are (K/32, N, 2)
    return Parts(
        form=form,
        values=torch.cat([p.values for p in members]),
        scales=torch.cat([p.scales for p in members], dim=dim),
    )


def fuse_layer(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A layer's tensors with q/k/v and gate/up each fused into one matrix (and q/k/v's
    biases into one), where the members share a form."""
    out = dict(tensors)
    for name, members in _FUSED.items():
        parts = [parts_of(out, f"{m}.weight") for m in members]
        if any(p is None for p in parts):
            continue
        joined = fused([p for p in parts if p is not None])
        if joined is None:
            continue
        for m in members:
            for key in [k for k in out if k.startswith(f"{m}.weight:")]:
                del out[key]
        out.update(named(f"{name}.weight", joined))
        biases = [out.get(f"{m}.bias") for m in members]
        if all(b is not None for b in biases):
            out[f"{name}.bias"] = torch.cat([b for b in biases if b is not None])
            for m in members:
                del out[f"{m}.bias"]
    return out


def parts_of(tensors: Mapping[str, torch.Tensor], param: str) -> Parts | None:
    for form, (values, scales) in _PARTS.items():
        if param + values in tensors:
            v = tensors[param + values]
            return Parts(form=form, values=v, scales=tensors[param + scales])
    return None


def is_part(name: str) -> bool:
    return any(name.endswith(s) for pair in _PARTS.values() for s in pair)


class Workspace:
    """How the compute thread's matmuls run: the reused buffers a prefill decodes each
    matrix into (fresh ones would fault in every page at every matrix), and `reference`:
    every matmul by dequantize-then-matmul in float32 (`reference_linear`: the tests'
    and the benchmark's check of the kernels); `threads`: the native kernels' thread
    count (torch's at construction: the physical cores), kept apart from torch's own so
    that a decode step can run torch's small operations on one thread
    (`single_torch_thread`) while the kernels use every core. Not thread-safe."""

    def __init__(self, *, reference: bool = False, threads: int | None = None) -> None:
        self.reference = reference
        self.threads = max(1, threads if threads is not None else ggml_native.threads())
        self._flat: dict[torch.dtype, torch.Tensor] = {}
        # While a chunked prefill runs one layer over its chunks: each matrix decoded
        # once for all of them (keyed by its bytes' address and rows).
        self._kept: dict[tuple[int, int], torch.Tensor] | None = None
        self._kept_packed: dict[tuple[int, int], ggml_native.VnniPacked] = {}

    @contextlib.contextmanager
    def keeping_decoded(self) -> Iterator[None]:
        """Within the block, a matrix decoded for a bfloat16 matmul is kept and reused
        (one layer's matrices over a prefill's chunks); dropped at its end."""
        self._kept = {}
        try:
            yield
        finally:
            self._kept = None
            self._kept_packed = {}

    def decoded(self, parts: Parts) -> torch.Tensor:
        """`parts`' matrix in bfloat16: into the reused buffer, or kept (see above)."""
        decode = {"int4": _int4_bf16, "int8": _int8_bf16, "ggml": _ggml_bf16}[parts.form]
        if self._kept is None:
            return decode(parts, self)
        key = (parts.values.data_ptr(), parts.values.shape[0])
        weight = self._kept.get(key)
        if weight is None:
            weight = decode(parts, self, fresh=True)
            self._kept[key] = weight
        return weight

    def packed(self, parts: Parts, *, group: int) -> ggml_native.VnniPacked:
        """`parts`' matrix (ggml form, a type the integer GEMM takes) unpacked for it:
        into the reused buffers, or kept (see `keeping_decoded`)."""
        if self._kept is None:
            return _vnni_pack(parts, self, group=group)
        key = (parts.values.data_ptr(), parts.values.shape[0])
        held = self._kept_packed.get(key)
        if held is None:
            held = _vnni_pack(parts, self, group=group, fresh=True)
            self._kept_packed[key] = held
        return held

    def take(self, numel: int, dtype: torch.dtype) -> torch.Tensor:
        flat = self._flat.get(dtype)
        if flat is None or flat.numel() < numel:
            self._flat.pop(dtype, None)
            flat = torch.empty(numel, dtype=dtype)
            self._flat[dtype] = flat
        return flat[:numel]

    def held_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self._flat.values())

    def clear(self) -> None:
        self._flat.clear()


def _int4_bf16(parts: Parts, buffer: Workspace, *, fresh: bool = False) -> torch.Tensor:
    """int4.dequantize_bf16 into `buffer`: 3.6× faster than fresh tensors in float32 for
    a 17,920 × 1,536 matrix here (44 against 159 ms), bfloat16 arithmetic on integers
    that bfloat16 holds exactly."""
    rows, half = parts.values.shape
    cols = half * 2
    q = buffer.take(rows * cols, torch.uint8).view(rows // 64, 2, cols, 32)
    tiles = parts.values.view(rows // 64, cols, 32)
    torch.bitwise_and(tiles, 0x0F, out=q[:, 0])
    torch.bitwise_right_shift(tiles, 4, out=q[:, 1])
    flat = torch.empty(rows * cols, dtype=torch.bfloat16) if fresh else None
    w = (flat if fresh else buffer.take(rows * cols, torch.bfloat16)).view(rows // 64, 2, 32, cols)
    w.copy_(q.transpose(2, 3))
    s = parts.scales.transpose(0, 1)  # (N, K/32, 2)
    grouped = w.view(rows, cols // int4.GROUP, int4.GROUP)
    grouped.sub_(8.0).mul_(s[..., :1]).add_(s[..., 1:])
    return w.view(rows, cols)


def _ggml_bf16(parts: Parts, buffer: Workspace, *, fresh: bool = False) -> torch.Tensor:
    """The blocks decoded to bfloat16 by the native library, rows in GGUF order."""
    lib = ggml_native.library()
    if lib is None:
        raise RuntimeError("the native GGML library is gone: its form cannot be computed")
    rows, cols = parts.values.shape[0], parts.cols
    flat = torch.empty(rows * cols, dtype=torch.bfloat16) if fresh else None
    w = (flat if fresh else buffer.take(rows * cols, torch.bfloat16)).view(rows, cols)
    return lib.decode(qtype=parts.qtype, raw=parts.values, cols=cols, out=w, threads=buffer.threads)


def _vnni_pack(
    parts: Parts, buffer: Workspace, *, group: int, fresh: bool = False
) -> ggml_native.VnniPacked:
    lib = ggml_native.library()
    if lib is None:
        raise RuntimeError("the native GGML library is gone: its form cannot be computed")
    rows, cols = parts.values.shape[0], parts.cols
    numel, groups = rows * cols, rows * cols // group
    if fresh:
        values, floats = torch.empty(numel, dtype=torch.uint8), torch.empty(2 * groups)
    else:
        values, floats = buffer.take(numel, torch.uint8), buffer.take(2 * groups, torch.float32)
    out = ggml_native.VnniPacked(
        values=values,
        scales=floats[:groups],
        mins=floats[groups:],
        rows=rows,
        cols=cols,
        group=group,
    )
    return lib.vnni_pack(
        qtype=parts.qtype, raw=parts.values, cols=cols, out=out, threads=buffer.threads
    )


def _vnni_group(parts: Parts) -> int:
    """The integer GEMM's group for a ggml-form matrix it takes here, else 0."""
    if parts.form != "ggml" or parts.values.shape[0] % 16:
        return 0
    lib = ggml_native.library()
    return lib.vnni_group(parts.qtype) if lib is not None else 0


def _ggml_linear(
    x: torch.Tensor, *, parts: Parts, bias: torch.Tensor | None, threads: int
) -> torch.Tensor:
    lib = ggml_native.library()
    if lib is None:
        raise RuntimeError("the native GGML library is gone: its form cannot be computed")
    flat = x.reshape(-1, x.shape[-1]).float()
    out = torch.empty((flat.shape[0], parts.values.shape[0]), dtype=torch.float32)
    lib.matmul(
        qtype=parts.qtype,
        raw=parts.values,
        cols=parts.cols,
        x=flat,
        out=out,
        threads=threads,
    )
    order = parts.gguf_rows
    y = out if order is None else out.index_select(1, order)
    y = y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])
    return y if bias is None else y.add_(bias)


def _int8_bf16(parts: Parts, buffer: Workspace, *, fresh: bool = False) -> torch.Tensor:
    rows, cols = parts.values.shape
    flat = torch.empty(rows * cols, dtype=torch.bfloat16) if fresh else None
    w = (flat if fresh else buffer.take(rows * cols, torch.bfloat16)).view(rows, cols)
    w.copy_(parts.values)
    return w.mul_(parts.scales.unsqueeze(1))


def linear(
    x: torch.Tensor,
    *,
    parts: Parts,
    bias: torch.Tensor | None,
    buffer: Workspace,
) -> torch.Tensor:
    """x @ W.T + bias for W in its form; x's dtype in and out."""
    if buffer.reference:
        return reference_linear(x, weight=reference_weight(parts), bias=bias)
    rows = x.numel() // x.shape[-1]
    if rows <= _KERNEL_ROWS[parts.form]:
        if parts.form == "ggml":
            return _ggml_linear(x, parts=parts, bias=bias, threads=buffer.threads)
        if parts.form == "int4":
            return int4.linear(x, nibbles=parts.values, scales=parts.scales, bias=bias)
        return int8.linear(x, values=parts.values, scale=parts.scales, bias=bias)
    group = _vnni_group(parts)
    xb = x.to(torch.bfloat16) if not group else x.reshape(-1, x.shape[-1]).float().contiguous()
    n = parts.values.shape[0]
    pieces = []
    for start in range(0, n, DECODE_ROWS):
        piece = _rows(parts, start=start, stop=min(n, start + DECODE_ROWS))
        if group:
            pieces.append(_vnni_linear(xb, parts=piece, group=group, buffer=buffer))
        else:
            pieces.append(F.linear(xb, buffer.decoded(piece)).to(x.dtype))
    y = pieces[0] if len(pieces) == 1 else torch.cat(pieces, dim=-1)
    if group:
        y = y.to(x.dtype).reshape(*x.shape[:-1], n)
    order = parts.gguf_rows if parts.form == "ggml" else None
    if order is not None:
        y = y.index_select(-1, order)
    return y if bias is None else y.add_(bias)


def _vnni_linear(x: torch.Tensor, *, parts: Parts, group: int, buffer: Workspace) -> torch.Tensor:
    """x (M, K) float32 · Wᵀ by the integer GEMM (native/vnni_gemm.c): a prefill's rows
    at about twice the bfloat16 matmul's rate where the CPU has AVX-512 VNNI."""
    lib = ggml_native.library()
    if lib is None:
        raise RuntimeError("the native GGML library is gone: its form cannot be computed")
    packed = buffer.packed(parts, group=group)
    out = torch.empty((x.shape[0], packed.rows), dtype=torch.float32)
    return lib.vnni_gemm(packed=packed, x=x, out=out, threads=buffer.threads)


def linear_many(
    x: torch.Tensor,
    *,
    parts: list[Parts],
    biases: list[torch.Tensor | None],
    buffer: Workspace,
) -> list[torch.Tensor]:
    """`linear` of each matrix over the same x (q/k/v, gate/up): for a decode step's few
    rows and matrices in the "ggml" form, one native call for all of them (one
    quantization of x, one hand-out of rows to the threads, a few µs of Python instead
    of three calls' worth); otherwise one `linear` each."""
    rows = x.numel() // x.shape[-1]
    lib = ggml_native.library()
    if (
        buffer.reference
        or lib is None
        or not all(p.form == "ggml" for p in parts)
        or rows > _KERNEL_ROWS["ggml"]
    ):
        return [
            linear(x, parts=p, bias=b, buffer=buffer) for p, b in zip(parts, biases, strict=True)
        ]
    flat = x.reshape(-1, x.shape[-1]).float().contiguous()
    widths = [p.values.shape[0] for p in parts]
    out = torch.empty((flat.shape[0], sum(widths)), dtype=torch.float32)
    pieces = list(out.split(widths, dim=1))
    lib.matmul_many(
        qtypes=[p.qtype for p in parts],
        raws=[p.values for p in parts],
        cols=parts[0].cols,
        x=flat,
        outs=pieces,
        threads=buffer.threads,
    )
    ys = []
    for p, b, y in zip(parts, biases, pieces, strict=True):
        order = p.gguf_rows
        y = y if order is None else y.index_select(1, order)
        y = y.to(x.dtype).reshape(*x.shape[:-1], y.shape[-1])
        ys.append(y if b is None else y + b)
    return ys


def native_step(rows: int) -> bool:
    """Whether a forward of `rows` rows computes its quantized matrices in the native
    kernels (the "ggml" form): a decode step's few rows, where the library is loaded."""
    return rows <= NATIVE_ROWS and ggml_native.library() is not None


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """Torch's operations on this thread run on one thread within the block.

    A decode step is a few hundred small operations between the native kernels' calls;
    run on two OpenMP threads, each waits at a barrier for a thread the OS may have given
    to the kernels' own pool (or to another program), and the step took twice as long
    on two cores as on one. The kernels keep `Workspace.threads`."""
    before = torch.get_num_threads()
    if before == 1:
        yield
        return
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _rows(parts: Parts, *, start: int, stop: int) -> Parts:
    """Rows [start, stop) of a matrix in its form (start a multiple of 64)."""
    if start == 0 and stop == parts.values.shape[0]:
        return parts
    if parts.form == "ggml":
        if parts.gguf_rows is not None:
            raise ValueError("a matrix in GGUF row order is decoded whole")
        return Parts(form="ggml", values=parts.values[start:stop], scales=parts.scales)
    scales = parts.scales[:, start:stop] if parts.form == "int4" else parts.scales[start:stop]
    return Parts(form=parts.form, values=parts.values[start:stop], scales=scales)


def reference_weight(parts: Parts) -> torch.Tensor:
    """The float32 matrix the kernels compute with (dequantize-then-matmul reference)."""
    if parts.form == "ggml":
        rows = parts.values.shape[0]
        qtype = GGMLQuantizationType(parts.qtype)
        w = dequantize(parts.values.reshape(-1), qtype=qtype, shape=(rows, parts.cols)).float()
        order = parts.gguf_rows
        return w if order is None else w.index_select(0, order)
    if parts.form == "int4":
        return int4.weight_of(parts.values, parts.scales)
    return int8.reference_weight(parts.values, parts.scales)


def _decoded_elements(tensor: GGUFTensor) -> int:
    """The elements a prefill decodes of this matrix at once (`DECODE_ROWS` rows at most)."""
    return min(tensor.shape[0], DECODE_ROWS) * tensor.shape[1]


def decode_buffer_bytes(layers: list[list[GGUFTensor]], *, head: list[GGUFTensor]) -> int:
    """The buffers a prefill decodes each matrix into (`Workspace.take`): the largest
    matrix in bfloat16, and for the int4 form its integers too (at most `DECODE_ROWS`
    rows of the head: a likelihood's head). Where the CPU has the integer GEMM, its
    types (Q4_K, Q6_K) are unpacked into buffers of their own instead (a byte a value,
    two floats a group: at most 1.5 bytes a value) beside the bfloat16 one that any
    other type still needs; counted as if it had (the planner does not build the
    library to ask)."""
    per_element = {"int4": 3, "int8": 2, "ggml": 2}
    largest = {"all": 0, "integer": 0, "other": 0}
    for t in (t for ts in [*layers, head] for t in ts):
        form = form_of(t)
        if not form:
            continue
        elements = _decoded_elements(t)
        largest["all"] = max(largest["all"], elements * per_element[form])
        if form == "ggml" and t.qtype in _INTEGER_GEMM_TYPES:
            largest["integer"] = max(largest["integer"], elements * 3 // 2)
        else:
            largest["other"] = max(largest["other"], elements * per_element[form])
    return max(largest["all"], largest["integer"] + largest["other"])


_INTEGER_GEMM_TYPES = frozenset({GGMLQuantizationType.Q4_K, GGMLQuantizationType.Q6_K})


def kept_layer_bytes(layers: list[list[GGUFTensor]]) -> int:
    """What a prefill of several chunks keeps besides (`Workspace.keeping_decoded`): the
    largest layer's matrices in bfloat16, decoded once for all the chunks."""
    per_layer = (sum(_decoded_elements(t) * 2 for t in ts if form_of(t)) for ts in layers)
    return max(per_layer, default=0)
