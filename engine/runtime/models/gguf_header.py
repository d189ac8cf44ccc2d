"""A GGUF file's header (metadata and tensor table) read straight from its bytes.

`gguf.GGUFReader` builds a numpy view for every part of every field: for a Qwen2 file
(151,936 tokens and as many merges in its tokenizer metadata) that is 1.5 million memmap
views, 14 s and most of a gigabyte on this project's machine before a tensor is touched,
and the engine opened each file twice at every model load. Here the header is parsed
with `struct` from a memory map of the file: the same values, a fraction of a second,
and nothing held but the values themselves.

Layout (GGUF v2/v3, little-endian, as llama.cpp's gguf.cpp reads it): magic "GGUF",
version u32, tensor count u64, metadata count u64; each metadata entry a string key, a
u32 type and its value (arrays: element type u32, count u64, elements); each tensor a
string name, u32 dimensions, u64 sizes (innermost first), u32 GGML type, u64 offset from
the data section, which starts at the next multiple of `general.alignment` (32).
"""

from __future__ import annotations

import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAGIC = b"GGUF"
_DEFAULT_ALIGNMENT = 32
_SCALARS = {
    0: "<B",  # UINT8
    1: "<b",  # INT8
    2: "<H",  # UINT16
    3: "<h",  # INT16
    4: "<I",  # UINT32
    5: "<i",  # INT32
    6: "<f",  # FLOAT32
    7: "<?",  # BOOL
    10: "<Q",  # UINT64
    11: "<q",  # INT64
    12: "<d",  # FLOAT64
}
_STRING, _ARRAY = 8, 9


class HeaderError(ValueError):
    """The bytes are not a GGUF header this reader understands (truncated, damaged)."""


@dataclass(frozen=True, kw_only=True)
class TensorInfo:
    name: str
    qtype: int  # GGML type code (gguf.GGMLQuantizationType)
    dims: tuple[int, ...]  # as stored: innermost first
    start: int  # absolute byte offset of the data in the file


@dataclass(frozen=True, kw_only=True)
class Header:
    version: int
    fields: dict[str, Any]
    tensors: tuple[TensorInfo, ...]
    data_start: int


class _Cursor:
    def __init__(self, data: Any) -> None:
        self._data = data
        self.at = 0

    def take(self, fmt: str) -> Any:
        size = struct.calcsize(fmt)
        if self.at + size > len(self._data):
            raise HeaderError(f"the header runs past the end of the file (byte {self.at})")
        (value,) = struct.unpack_from(fmt, self._data, self.at)
        self.at += size
        return value

    def string(self) -> str:
        n = self.take("<Q")
        if self.at + n > len(self._data):
            raise HeaderError(f"a string of {n} bytes runs past the end of the file")
        text = bytes(self._data[self.at : self.at + n]).decode("utf-8", "replace")
        self.at += n
        return text

    def _strings(self, count: int) -> list[str]:
        # A tokenizer's 150,000 tokens and merges: the one hot loop of a header.
        data, at, end, out = self._data, self.at, len(self._data), []
        unpack = struct.Struct("<Q").unpack_from
        for _ in range(count):
            if at + 8 > end:
                raise HeaderError("a string array runs past the end of the file")
            (n,) = unpack(data, at)
            at += 8
            if at + n > end:
                raise HeaderError(f"a string of {n} bytes runs past the end of the file")
            out.append(bytes(data[at : at + n]).decode("utf-8", "replace"))
            at += n
        self.at = at
        return out

    def value(self, kind: int) -> Any:
        if kind in _SCALARS:
            return self.take(_SCALARS[kind])
        if kind == _STRING:
            return self.string()
        if kind == _ARRAY:
            inner = self.take("<I")
            count = self.take("<Q")
            if inner in _SCALARS:
                fmt = _SCALARS[inner]
                size = struct.calcsize(fmt) * count
                if self.at + size > len(self._data):
                    raise HeaderError(f"an array of {count} values runs past the end")
                values = list(struct.unpack_from(f"<{count}{fmt[1]}", self._data, self.at))
                self.at += size
                return values
            if inner == _STRING:
                return self._strings(count)
            return [self.value(inner) for _ in range(count)]
        raise HeaderError(f"unknown metadata type {kind} at byte {self.at}")


def read_header(path: Path) -> Header:
    """The header of the GGUF file at `path`; HeaderError when it cannot be read."""
    with path.open("rb") as f:
        size = path.stat().st_size
        if size < 24:
            raise HeaderError(f"{size} bytes: too short for a GGUF header")
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _parse(data, size=size)


def _parse(data: Any, *, size: int) -> Header:
    if bytes(data[:4]) != MAGIC:
        raise HeaderError("no GGUF magic")
    c = _Cursor(data)
    c.at = 4
    version = c.take("<I")
    if version not in (2, 3):
        raise HeaderError(f"GGUF version {version} is not one this reader knows (2, 3)")
    n_tensors = c.take("<Q")
    n_fields = c.take("<Q")
    if n_tensors > size or n_fields > size:
        raise HeaderError("impossible tensor or metadata counts")
    fields: dict[str, Any] = {}
    for _ in range(n_fields):
        key = c.string()
        fields[key] = c.value(c.take("<I"))
    infos: list[tuple[str, int, tuple[int, ...], int]] = []
    for _ in range(n_tensors):
        name = c.string()
        n_dims = c.take("<I")
        if n_dims > 8:
            raise HeaderError(f"tensor {name} has {n_dims} dimensions")
        dims = tuple(c.take("<Q") for _ in range(n_dims))
        infos.append((name, c.take("<I"), dims, c.take("<Q")))
    alignment = int(fields.get("general.alignment") or _DEFAULT_ALIGNMENT)
    data_start = -(-c.at // alignment) * alignment
    tensors = tuple(
        TensorInfo(name=name, qtype=qtype, dims=dims, start=data_start + offset)
        for name, qtype, dims, offset in infos
    )
    return Header(version=version, fields=fields, tensors=tensors, data_start=data_start)
