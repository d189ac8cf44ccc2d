"""GGUF layers made ready for the CPU kernels once, kept in the cache folder, streamed
from there.

A layer streamed from the disk with `decode="kernel"` used to be repacked
(engine/runtime/executor/kernel_forms.py) in the copy thread at every decode step: about 0.2 s a
Q4_0 layer of Qwen2-1.5B's shape on one thread, where reading its 25 MiB takes 0.02 s, so
the stream was bound by repacking. Here every packed unit is
repacked once, when the model is opened, into one file per model in the cache folder, and
the copy thread reads each unit's kernel-ready bytes from it into reused buffers.

The file holds each unit's tensors as `packed.repack_unit` makes them (int4 nibbles and
scales, int8 values and row scales, decoded norms and biases). Where an int4 matrix's zeros
are all 0 (Q4_0), only the scale half of its [K/32, N, 2] scales-and-zeros is written and
the zeros are rebuilt at read, so such a file is the size of the Q4_0 blocks it replaces.

Keyed by the GGUF file (path, size, modification time), torch's version and the nibble
layout check, and the units' tensors: a changed model or torch writes a new file, an
unchanged one is never repacked twice. Written under a temporary name and renamed when
complete (a partial file is never opened), and checked at open (header, key, length).
When it cannot be written (disk full, read-only cache), the store falls back to repacking
in the copy thread, with a log line saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import shutil
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import torch

from engine.runtime.executor import int4
from engine.runtime.executor.buffer_pool import BufferPool
from engine.runtime.executor.packed import TensorSource as Source
from engine.runtime.executor.packed import kernel_bytes
from engine.runtime.executor.page_cache import evict_page_cache
from engine.runtime.models.gguf_file import read_exactly

log = logging.getLogger(__name__)

FORMAT = 2  # bump when the file's layout changes: old files then no longer match a key
_MAGIC = b"RAGDOLL-INT4\x00\x00\x00\x00"
_ALIGN = 4096
# Free space kept beyond the file when deciding whether to write it at all.
_MARGIN = 256 * 1024 * 1024
_DTYPES = {
    "uint8": torch.uint8,
    "int8": torch.int8,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float32": torch.float32,
}
_HALF_SCALES = "half-scales"  # stored [K/32, N] bf16, read back as [K/32, N, 2]


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One tensor of a unit in the file: bytes [start, end), read back as `shape`."""

    param: str
    kind: str  # "uint8", "bfloat16" or _HALF_SCALES
    shape: tuple[int, ...]
    start: int
    end: int


def file_key(*, units: dict[str, list[Source]], fused: bool = False) -> str:
    """What the repacked bytes depend on: the model's files and tensors, torch, the
    layout. Any change gives another key, hence another file."""
    files = sorted({s.file for sources in units.values() for s in sources})
    stamp = [f"{f.resolve()}:{f.stat().st_size}:{f.stat().st_mtime_ns}" for f in files] + [
        f"{u}/{s.param}:{s.dtype}:{s.shape}:{s.start}:{s.end}"
        for u in sorted(units)
        for s in units[u]
    ]
    text = f"{FORMAT}|{torch.__version__}|{int4._layout_is_known()}|{fused}|" + "|".join(stamp)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def file_for(
    *, cache: Path, units: dict[str, list[Source]], fused: bool = False
) -> tuple[Path, str]:
    first = min((s.file for sources in units.values() for s in sources), key=str)
    key = file_key(units=units, fused=fused)
    return cache / f"{first.stem[:48]}-{key}.int4", key


class RepackedFile:
    """An opened, checked repacked file: each unit's entries."""

    def __init__(self, *, path: Path, units: dict[str, list[Entry]]) -> None:
        self.path = path
        self._units = units
        self._mapped: torch.Tensor | None = None

    def has(self, unit: str) -> bool:
        return unit in self._units

    def bytes_of(self, unit: str) -> int:
        return sum(e.end - e.start for e in self._units[unit])

    def read(self, unit: str, *, pool: BufferPool | None) -> dict[str, torch.Tensor]:
        """The unit's tensors as `packed.repack_unit` gives them, read into `pool`'s
        buffers (fresh ones without a pool)."""

        def take(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
            return pool.take(shape, dtype) if pool is not None else torch.empty(shape, dtype=dtype)

        out: dict[str, torch.Tensor] = {}
        with self.path.open("rb", buffering=0) as f:
            for e in self._units[unit]:
                half = e.kind == _HALF_SCALES
                t = take(e.shape, torch.bfloat16 if half else _DTYPES[e.kind])
                view = memoryview(t.view(-1).view(torch.uint8).numpy())
                read_exactly(f, view, start=e.start, what=f"{unit}/{e.param}")
                if half:
                    full = take((*e.shape, 2), torch.bfloat16)
                    full[..., 0].copy_(t)
                    full[..., 1].zero_()  # a reused buffer may hold anything
                    if pool is not None:
                        pool.give([t])
                    t = full
                out[e.param] = t
        return out

    def map(self, unit: str) -> dict[str, torch.Tensor]:
        """The unit's tensors as views of the file mapped into memory (privately: never
        written back): nothing is read until a step touches it, the pages are the page
        cache's (shared, reclaimable, read again from the file if evicted), and a model
        opens in a fraction of a second, as llama.cpp's memory map does."""
        if self._mapped is None:
            size = self.path.stat().st_size
            self._mapped = torch.from_file(
                str(self.path), shared=False, size=size, dtype=torch.uint8
            )
        out: dict[str, torch.Tensor] = {}
        for e in self._units[unit]:
            half = e.kind == _HALF_SCALES
            dtype = torch.bfloat16 if half else _DTYPES[e.kind]
            t = self._mapped[e.start : e.end].view(dtype).view(e.shape)
            if half:
                full = torch.zeros((*e.shape, 2), dtype=torch.bfloat16)
                full[..., 0].copy_(t)
                t = full
            out[e.param] = t
        return out

    def evict(self, unit: str) -> None:
        """Drop the unit's bytes from the page cache (the store's evict_after_read)."""
        if not hasattr(os, "posix_fadvise"):
            return
        fd = os.open(self.path, os.O_RDONLY)
        try:
            for e in self._units[unit]:
                os.posix_fadvise(fd, e.start, e.end - e.start, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(fd)


def _header(path: Path) -> dict | None:
    try:
        with path.open("rb") as f:
            if f.read(len(_MAGIC)) != _MAGIC:
                return None
            (size,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(size))
    except (OSError, ValueError, struct.error):
        return None
    return header if isinstance(header, dict) else None


def open_file(path: Path, *, key: str) -> RepackedFile | None:
    """The file at `path` if it is complete and made for `key`, else None."""
    header = _header(path)
    try:
        if header is None or header.get("key") != key or path.stat().st_size != header["end"]:
            return None
        units = {
            u: [Entry(param=p, kind=k, shape=tuple(s), start=a, end=b) for p, k, s, a, b in entries]
            for u, entries in header["units"].items()
        }
    except (OSError, ValueError, KeyError, TypeError, struct.error):
        return None
    return RepackedFile(path=path, units=units)


def open_or_build(
    *,
    cache: Path,
    units: dict[str, list[Source]],
    read: Callable[[str], dict[str, torch.Tensor]],
    repack: Callable[[str, dict[str, torch.Tensor]], dict[str, torch.Tensor]],
    fused: bool = False,
) -> RepackedFile | None:
    """The repacked file for `units`: opened when a complete one exists, else written now
    (each unit read by `read`, repacked by `repack`, one unit in memory at a time). None
    when it cannot be written; the caller then repacks per use. `fused`: whether
    `repack` fuses q/k/v and gate/up (part of the key)."""
    path, key = file_for(cache=cache, units=units, fused=fused)
    found = open_file(path, key=key)
    if found is not None:
        return found
    model = str(min((s.file for sources in units.values() for s in sources), key=str).resolve())
    _drop_superseded(path, model=model)
    need = sum(kernel_bytes(s) for sources in units.values() for s in sources)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        cache.mkdir(parents=True, exist_ok=True)
        free = shutil.disk_usage(cache).free
        if free < need + _MARGIN:
            raise OSError(f"{free >> 20} MiB free, {need >> 20} MiB needed")
        _write(tmp, key=key, model=model, order=list(units), read=read, repack=repack)
        os.replace(tmp, path)
    except OSError as e:
        log.warning(
            "could not write the int4 repacked weights to %s (%s): repacking each streamed "
            "layer in the copy thread instead (slower)",
            path,
            e,
        )
        return None
    finally:
        with contextlib.suppress(OSError):
            tmp.unlink()
    log.info("int4 repacked weights written once to %s", path)
    return open_file(path, key=key)


def _write(
    tmp: Path,
    *,
    key: str,
    model: str,
    order: list[str],
    read: Callable[[str], dict[str, torch.Tensor]],
    repack: Callable[[str, dict[str, torch.Tensor]], dict[str, torch.Tensor]],
) -> None:
    # Data first, after room for the header, which is written last once the offsets are
    # known; the room is sized by a first pass over the shapes only.
    entries: dict[str, list[list]] = {}
    with tmp.open("w+b") as f:
        pos = _ALIGN * 64  # 256 KiB of header room: a 200-layer model needs ~60 KiB
        for unit in order:
            tensors = repack(unit, read(unit))
            rows: list[list] = []
            for param, t in tensors.items():
                kind, data = _stored(param, t)
                pos = -(-pos // 64) * 64
                f.seek(pos)
                f.write(memoryview(data.view(-1).view(torch.uint8).numpy()))
                rows.append(
                    [param, kind, list(data.shape), pos, pos + data.numel() * data.element_size()]
                )
                pos = rows[-1][-1]
            entries[unit] = rows
            del tensors
            int4.trim_heap()
        header = json.dumps({"key": key, "model": model, "end": pos, "units": entries}).encode()
        if len(_MAGIC) + 8 + len(header) > _ALIGN * 64:
            raise OSError("too many tensors for the repacked file's header")
        f.seek(0)
        f.write(_MAGIC + struct.pack("<Q", len(header)) + header)
        f.truncate(pos)
        f.flush()
        os.fsync(f.fileno())
    # Written once, read per step later: not worth keeping in the page cache now.
    evict_page_cache(files=[tmp])


def _drop_superseded(path: Path, *, model: str) -> None:
    """Delete this model's files made under another key (the model file or torch has
    changed since): each is as large as the model, and no key will name it again. Files
    of other models with the same file name are kept (their header names their model)."""
    for other in path.parent.glob(f"{path.name.rsplit('-', 1)[0]}-*.int4"):
        header = _header(other)
        if other != path and header is not None and header.get("model") == model:
            log.info("removing superseded int4 repacked weights %s", other)
            with contextlib.suppress(OSError):
                other.unlink()


def _stored(param: str, t: torch.Tensor) -> tuple[str, torch.Tensor]:
    if param.endswith(int4.SCALES) and not t[..., 1].any():
        # [K/32, N, 2] scales and zeros, zeros all 0 (Q4_0 is symmetric): keep the scales.
        return _HALF_SCALES, t[..., 0].contiguous()
    kind = {dtype: name for name, dtype in _DTYPES.items()}.get(t.dtype)
    if kind is None:
        raise ValueError(f"{param}: {t.dtype} has no place in a repacked file")
    return kind, t.contiguous()


def all_units(names: Iterable[str]) -> list[str]:
    """Units in the order a forward pass uses them (layers by index, then the head), so
    that the file is read forwards."""

    def order(u: str) -> tuple[int, int]:
        if u.startswith("layer."):
            return (1, int(u.split(".", 1)[1]))
        return (2, 0) if u == "head" else (0, 0)

    return sorted(names, key=order)
