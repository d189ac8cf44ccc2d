"""The native kernel library that computes on GGML blocks as a GGUF file stores them.

engine/runtime/executor/native/ggml_dot.c computes y = x·Wᵀ for W in its file's blocks (Q4_0,
Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K) with the activations quantized per row as
llama.cpp does, and decodes rows to bfloat16 for a prefill's matmul. It is built on first
use with the system C compiler (no install dependency) into a per-user cache folder,
keyed by the source's hash, the flags and the compiler, and loaded with ctypes. Without
a compiler, or when the build or the load fails, `library()` is None and the torch forms
compute instead (engine/runtime/executor/kernel_forms.py); the log says why, once.

RAGDOLL_TORCH_KERNELS=1 forces the torch forms (tests, comparisons).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import hashlib
import logging
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch
from gguf import GGMLQuantizationType

from engine.environ import TORCH_KERNELS_ENV, torch_kernels_forced

log = logging.getLogger(__name__)

FORCE_TORCH_ENV = TORCH_KERNELS_ENV
NATIVE = Path(__file__).with_name("native")
# Compiled together into one library; the header is hashed with them.
SOURCES = (NATIVE / "ggml_dot.c", NATIVE / "vnni_gemm.c", NATIVE / "prefill_attention.c")
HEADERS = (NATIVE / "ggml_blocks.h",)
FLAGS = ("-O3", "-march=native", "-shared", "-fPIC", "-pthread", "-std=gnu11")
TYPES = frozenset(
    {
        GGMLQuantizationType.Q4_0,
        GGMLQuantizationType.Q4_1,
        GGMLQuantizationType.Q5_0,
        GGMLQuantizationType.Q5_1,
        GGMLQuantizationType.Q8_0,
        GGMLQuantizationType.Q4_K,
        GGMLQuantizationType.Q5_K,
        GGMLQuantizationType.Q6_K,
    }
)
_BUILD_SECONDS = 120


@dataclass(frozen=True, kw_only=True)
class Built:
    """The outcome of a build: the library's path, or why there is none."""

    path: Path | None
    reason: str = ""


def forced_torch() -> bool:
    return torch_kernels_forced()


def find_compiler() -> str | None:
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def cache_folder() -> Path:
    from engine.paths import resolve_paths

    return resolve_paths().cache / "native"


def _compiler_id(compiler: str) -> str:
    try:
        out = subprocess.run(
            [compiler, "--version"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return compiler
    return f"{compiler}|{out.stdout.strip()}"


def build(*, cache: Path, compiler: str | None, flags: tuple[str, ...] = FLAGS) -> Built:
    """The library compiled from SOURCES into `cache` (reused when already there);
    `flags` other than FLAGS build a narrower one (tests: the AVX2 kernels on a CPU with
    AVX-512)."""
    if compiler is None:
        return Built(path=None, reason="no C compiler found (cc, gcc, clang or $CC)")
    try:
        source = b"".join(path.read_bytes() for path in (*SOURCES, *HEADERS))
    except OSError as e:
        return Built(path=None, reason=f"kernel source missing: {e}")
    key = hashlib.sha256(
        source + "|".join(flags).encode() + _compiler_id(compiler).encode()
    ).hexdigest()[:20]
    target = cache / f"ggml_dot-{key}.so"
    if target.exists():
        return Built(path=target)
    try:
        cache.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache, prefix=".ggml_dot-", suffix=".so")
        os.close(fd)
    except OSError as e:
        return Built(path=None, reason=f"cannot write the build to {cache}: {e}")
    try:
        done = subprocess.run(
            [compiler, *flags, "-o", tmp, *(str(path) for path in SOURCES)],
            capture_output=True,
            text=True,
            timeout=_BUILD_SECONDS,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as e:
        Path(tmp).unlink(missing_ok=True)
        return Built(path=None, reason=f"{compiler} failed to run: {e}")
    if done.returncode != 0:
        Path(tmp).unlink(missing_ok=True)
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return Built(path=None, reason=f"{compiler} failed: {' / '.join(tail)}")
    os.replace(tmp, target)  # a partial build is never loaded under the final name
    return Built(path=target)


@dataclass(frozen=True, kw_only=True)
class VnniPacked:
    """A matrix unpacked for the integer GEMM (native/vnni_gemm.c): `values` (rows·cols
    uint8, panels of 16 rows), and per panel, group and row `scales` and `mins`
    (float32; `group` values share them)."""

    values: torch.Tensor
    scales: torch.Tensor
    mins: torch.Tensor
    rows: int
    cols: int
    group: int


class Library:
    """The loaded library's calls, over torch tensors."""

    def __init__(self, path: Path) -> None:
        self.path = path
        lib = ctypes.CDLL(str(path))
        i64, ptr, c_int = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
        lib.rd_matmul.argtypes = [c_int, ptr, i64, i64, i64, ptr, i64, ptr, i64, c_int]
        lib.rd_matmul.restype = c_int
        lib.rd_matmul_many.argtypes = [c_int, ptr, ptr, ptr, ptr, i64, ptr, i64, ptr, ptr, c_int]
        lib.rd_matmul_many.restype = c_int
        lib.rd_decode.argtypes = [c_int, ptr, i64, i64, i64, ptr, c_int, c_int]
        lib.rd_decode.restype = c_int
        lib.rd_layer_qkv.argtypes = [ptr, i64, ptr, ptr, ptr, ptr, ptr, ptr, c_int]
        lib.rd_layer_qkv.restype = c_int
        lib.rd_layer_rest.argtypes = [ptr, i64, ptr, ptr, ptr, ptr, ptr, i64, i64, i64, c_int]
        lib.rd_layer_rest.restype = c_int
        lib.rd_layers_step.argtypes = [
            *(ptr, i64, i64, ptr, ptr, ptr, ptr, ptr, ptr, ptr, i64, ptr, c_int)
        ]
        lib.rd_layers_step.restype = c_int
        lib.rd_prefill_attention.argtypes = [
            *(ptr, ptr, ptr, i64, i64, ptr, i64, i64, i64, i64, i64, i64),
            *(ctypes.c_float, ptr, c_int),
        ]
        lib.rd_prefill_attention.restype = c_int
        lib.rd_prefill_attention_built.restype = c_int
        self.prefill_attention_built = bool(lib.rd_prefill_attention_built())
        lib.rd_simd.restype = c_int
        self.simd = bool(lib.rd_simd())
        lib.rd_vnni.restype = c_int
        lib.rd_vnni_group.argtypes = [c_int]
        lib.rd_vnni_group.restype = c_int
        lib.rd_vnni_pack.argtypes = [c_int, ptr, i64, i64, i64, ptr, ptr, ptr, c_int]
        lib.rd_vnni_pack.restype = c_int
        lib.rd_vnni_gemm.argtypes = [c_int, ptr, ptr, ptr, i64, i64, ptr, i64, ptr, i64, c_int]
        lib.rd_vnni_gemm.restype = c_int
        # The prefill's integer GEMM (native/vnni_gemm.c): built where the CPU has
        # AVX-512 VNNI.
        self.vnni = bool(lib.rd_vnni())
        self._lib = lib

    def matmul(
        self,
        *,
        qtype: int,
        raw: torch.Tensor,
        cols: int,
        x: torch.Tensor,
        out: torch.Tensor,
        threads: int,
    ) -> torch.Tensor:
        """out (M, N) float32 = x (M, K) float32 · Wᵀ, W the N rows of `raw` (N, bytes)."""
        _check(raw, x, out)
        rc = self._lib.rd_matmul(
            qtype,
            raw.data_ptr(),
            raw.shape[0],
            cols,
            raw.stride(0),
            x.data_ptr(),
            x.shape[0],
            out.data_ptr(),
            out.stride(0),
            threads,
        )
        if rc != 0:
            raise ValueError(f"native kernel refused type {qtype} with {cols} columns")
        return out

    def matmul_many(
        self,
        *,
        qtypes: list[int],
        raws: list[torch.Tensor],
        cols: int,
        x: torch.Tensor,
        outs: list[torch.Tensor],
        threads: int,
    ) -> None:
        """outs[p] = x · W_pᵀ for up to four matrices sharing x, in one call (one
        quantization of x, one hand-out of rows to the threads)."""
        count = len(raws)
        for raw, out in zip(raws, outs, strict=True):
            _check(raw, x, out)
        c_i64 = ctypes.c_int64 * count
        rc = self._lib.rd_matmul_many(
            count,
            (ctypes.c_int * count)(*qtypes),
            (ctypes.c_void_p * count)(*[r.data_ptr() for r in raws]),
            c_i64(*[r.shape[0] for r in raws]),
            c_i64(*[r.stride(0) for r in raws]),
            cols,
            x.data_ptr(),
            x.shape[0],
            (ctypes.c_void_p * count)(*[o.data_ptr() for o in outs]),
            c_i64(*[o.stride(0) for o in outs]),
            threads,
        )
        if rc != 0:
            raise ValueError(f"native kernel refused types {qtypes} with {cols} columns")

    def decode(
        self, *, qtype: int, raw: torch.Tensor, cols: int, out: torch.Tensor, threads: int
    ) -> torch.Tensor:
        """out (N, K) bfloat16 or float32: the rows of `raw` decoded."""
        if raw.dim() != 2 or raw.stride(1) != 1 or not out.is_contiguous():
            raise ValueError("decode needs rows of contiguous bytes and a contiguous output")
        if out.shape != (raw.shape[0], cols) or out.dtype not in (torch.bfloat16, torch.float32):
            raise ValueError(f"decode output must be ({raw.shape[0]}, {cols}) bf16 or float32")
        bf16 = out.dtype == torch.bfloat16
        rc = self._lib.rd_decode(
            qtype,
            raw.data_ptr(),
            raw.shape[0],
            cols,
            raw.stride(0),
            out.data_ptr(),
            int(bf16),
            threads,
        )
        if rc != 0:
            raise ValueError(f"native decoder refused type {qtype} with {cols} columns")
        return out

    def vnni_group(self, qtype: int) -> int:
        """The values sharing a scale of a type the integer GEMM takes, or 0."""
        return int(self._lib.rd_vnni_group(qtype)) if self.vnni else 0

    def vnni_pack(
        self, *, qtype: int, raw: torch.Tensor, cols: int, out: VnniPacked, threads: int
    ) -> VnniPacked:
        """`raw`'s rows unpacked into `out` for `vnni_gemm`."""
        rows = raw.shape[0]
        if raw.dim() != 2 or raw.stride(1) != 1:
            raise ValueError("pack needs rows of contiguous bytes")
        if out.values.numel() != rows * cols or out.scales.numel() != out.mins.numel():
            raise ValueError("pack output does not fit the matrix")
        rc = self._lib.rd_vnni_pack(
            qtype,
            raw.data_ptr(),
            rows,
            cols,
            raw.stride(0),
            out.values.data_ptr(),
            out.scales.data_ptr(),
            out.mins.data_ptr(),
            threads,
        )
        if rc != out.group:
            raise ValueError(f"the integer GEMM refused type {qtype} with {cols} columns")
        return out

    def vnni_gemm(
        self, *, packed: VnniPacked, x: torch.Tensor, out: torch.Tensor, threads: int
    ) -> torch.Tensor:
        """out (M, N) float32 = x (M, K) float32 · Wᵀ for W as `vnni_pack` left it."""
        if x.dtype != torch.float32 or x.dim() != 2 or not x.is_contiguous():
            raise ValueError("x must be a contiguous (M, K) float32 tensor")
        if (
            out.dtype != torch.float32
            or out.stride(1) != 1
            or out.shape
            != (
                x.shape[0],
                packed.rows,
            )
        ):
            raise ValueError(f"out must be ({x.shape[0]}, {packed.rows}) float32")
        if x.shape[1] != packed.cols:
            raise ValueError(f"x has {x.shape[1]} columns, the matrix {packed.cols}")
        rc = self._lib.rd_vnni_gemm(
            packed.group,
            packed.values.data_ptr(),
            packed.scales.data_ptr(),
            packed.mins.data_ptr(),
            packed.rows,
            packed.cols,
            x.data_ptr(),
            x.shape[0],
            out.data_ptr(),
            out.stride(0),
            threads,
        )
        if rc == -2:
            raise MemoryError("no memory for the integer GEMM's quantized activations")
        if rc != 0:
            raise ValueError(f"the integer GEMM refused a {packed.rows} × {packed.cols} matrix")
        return out

    def layer_qkv(
        self,
        spec: ctypes.Structure,
        *,
        rows: int,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        threads: int,
    ) -> int:
        """A decode layer's first half for `rows` rows (engine/runtime/executor/
        native_layer.py): q, k, v (float32, contiguous) from the hidden values h, each
        row at its own position (cos/sin rows × head_dim). 0, or the refusal's code."""
        return int(
            self._lib.rd_layer_qkv(
                ctypes.byref(spec),
                rows,
                h.data_ptr(),
                cos.data_ptr(),
                sin.data_ptr(),
                q.data_ptr(),
                k.data_ptr(),
                v.data_ptr(),
                threads,
            )
        )

    def layers_step(
        self,
        specs: ctypes.Array,  # of pointers to the layers' specs
        *,
        rows: int,
        h: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        keys: list[torch.Tensor],
        values: list[torch.Tensor],
        past: int,
        visible: torch.Tensor | None,
        threads: int,
    ) -> int:
        """Every layer of a decode step (engine/runtime/executor/native_layer.py
        `step_layers`): h (rows × hidden) through them in place, each layer's new key
        and value written at position `past` of its buffers keys[l]/values[l] (rows, KV
        heads, capacity > past, head_dim; float32), attention over past + 1 positions.
        0, or the refusal's code."""
        count = len(keys)
        pointers = ctypes.c_void_p * count
        strides = ctypes.c_int64 * count
        # held in locals until the call returns: the library reads them by address
        kbufs = pointers(*(k.data_ptr() for k in keys))
        vbufs = pointers(*(v.data_ptr() for v in values))
        rows_apart = strides(*(k.stride(0) for k in keys))
        heads_apart = strides(*(k.stride(1) for k in keys))
        return int(
            self._lib.rd_layers_step(
                ctypes.addressof(specs),
                count,
                rows,
                h.data_ptr(),
                cos.data_ptr(),
                sin.data_ptr(),
                ctypes.addressof(kbufs),
                ctypes.addressof(vbufs),
                ctypes.addressof(rows_apart),
                ctypes.addressof(heads_apart),
                past,
                visible.data_ptr() if visible is not None else None,
                threads,
            )
        )

    def prefill_attention(
        self,
        *,
        q: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        key_mask: torch.Tensor | None,
        scale: float,
        out: torch.Tensor,
        threads: int,
    ) -> int:
        """native/prefill_attention.c: out (B, T, heads, d) from q (B, heads, T, d,
        contiguous) over the KV buffers keys/values (B, KV heads, past + T, d; each
        position's values contiguous), causal, `key_mask` (B, past + T) uint8 0 at
        padding, or None. 0, or the refusal's code."""
        b, heads, t, d = q.shape
        return int(
            self._lib.rd_prefill_attention(
                q.data_ptr(),
                keys.data_ptr(),
                values.data_ptr(),
                keys.stride(0),
                keys.stride(1),
                key_mask.data_ptr() if key_mask is not None else None,
                b,
                heads,
                keys.shape[1],
                t,
                keys.shape[2] - t,
                d,
                scale,
                out.data_ptr(),
                threads,
            )
        )

    def layer_rest(
        self,
        spec: ctypes.Structure,
        *,
        rows: int,
        h: torch.Tensor,
        q: torch.Tensor,
        keys: torch.Tensor,
        values: torch.Tensor,
        visible: torch.Tensor | None,
        threads: int,
    ) -> int:
        """The layer's second half: h (rows × hidden) updated in place from q and the
        KV buffers `keys`/`values` (rows, KV heads, positions, head_dim; float32, each
        position's values contiguous), `visible` (rows × positions uint8, 0 where a row
        may not look) or None. 0, or the refusal's code."""
        return int(
            self._lib.rd_layer_rest(
                ctypes.byref(spec),
                rows,
                h.data_ptr(),
                q.data_ptr(),
                keys.data_ptr(),
                values.data_ptr(),
                visible.data_ptr() if visible is not None else None,
                keys.shape[-2],
                keys.stride(0),
                keys.stride(1),
                threads,
            )
        )


def _check(raw: torch.Tensor, x: torch.Tensor, out: torch.Tensor) -> None:
    """What the C side assumes and cannot check: bytes and floats laid out as it reads."""
    if raw.dtype != torch.uint8 or raw.dim() != 2 or raw.stride(1) != 1:
        raise ValueError("the matrix must be uint8 rows of contiguous bytes")
    if x.dtype != torch.float32 or x.dim() != 2 or not x.is_contiguous():
        raise ValueError("x must be a contiguous (M, K) float32 tensor")
    if out.dtype != torch.float32 or out.dim() != 2 or out.stride(1) != 1:
        raise ValueError("out must be (M, N) float32 with contiguous rows")
    if out.shape != (x.shape[0], raw.shape[0]):
        raise ValueError(f"out is {tuple(out.shape)}, want ({x.shape[0]}, {raw.shape[0]})")


@functools.cache
def _loaded(cache: Path, compiler: str | None, flags: tuple[str, ...] = FLAGS) -> Library | None:
    built = build(cache=cache, compiler=compiler, flags=flags)
    if built.path is None:
        log.warning("native GGML kernels unavailable, torch kernel forms used: %s", built.reason)
        return None
    try:
        lib = Library(built.path)
    except OSError as e:
        log.warning("native GGML kernels failed to load, torch kernel forms used: %s", e)
        with contextlib.suppress(OSError):
            built.path.unlink()
        return None
    if not lib.simd:
        log.info("native GGML kernels built without AVX2: float fallback")
    return lib


@functools.cache
def _default() -> Library | None:
    return _loaded(cache_folder(), find_compiler())


def library() -> Library | None:
    """The native library (built on the first call), or None: forced off, or unbuildable
    here (logged once)."""
    if forced_torch():
        return None
    return _default()


def reset() -> None:
    """Forget the loaded library (tests: another cache folder or compiler)."""
    _default.cache_clear()
    _loaded.cache_clear()


def threads() -> int:
    """The kernel's thread count: torch's (the executor sets it to the physical cores)."""
    return max(1, torch.get_num_threads())
