"""One generation of the store's IVF view on disk, and how it is built.

A generation is a folder holding the centroids, the table's vectors grouped by
partition (float16, partition after partition, so a partition is one
contiguous slice), the same rows as int8 codes (what scans read: a quarter of
float32, half of float16), their chunk ids, and for each row the code of its
document (path and extension per document, for the folder and file-type
filters). It is written whole into a fresh folder before `current.json` names
it, so a crash mid-build leaves the previous generation in force.

The int8 codes are per row: `codes * scale` approximates the float16 row, and
`error` is the norm of what it misses, so a code's score against a unit
question is within `error` of the float16 row's (Cauchy-Schwarz). Candidates
that can still make a question's best are re-scored from the float16 rows,
read row by row (`read_vectors`).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import math
import os
import time
import weakref
from collections.abc import Iterable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from engine.rag.store.records import SearchFilters
from engine.rag.store.search import folder_prefix, normalise_type

log = logging.getLogger(__name__)

DISK_DTYPE = np.float16  # half the disk reads of float32; scored as float32 once loaded
CODE_FILES = ("codes.npy", "code_meta.npy")
_READ_FILES = ("vectors.npy", "docs.npy", "ids.npy", *CODE_FILES)  # read by pread
# Rows apart that one read covers when re-scoring: a random 4 KB read cost
# ~40 us on the development machine's disk (8 threads), what ~56 KB sequential take.
_GAP_ROWS = 16
_ASSIGN_BLOCK = 16_384
# 128 rows per centroid and 12 rounds gave recall@10 0.977 at 200k synthetic rows
# (nprobes 20); 256 and 25 gave 0.989 for a build of 4.4 s instead of ~3.
_SAMPLE_PER_PARTITION = 256
_KMEANS_ITERATIONS = 25


@dataclass(kw_only=True, eq=False)
class Generation:
    """A built generation, opened: the vectors and ids are memory-mapped (read
    per partition or per result), the centroids and document list held."""

    name: str
    folder: Path
    seq: int  # every journalled write up to this one is in the generation
    centroids: np.ndarray  # (partitions, dim) float32, unit length
    offsets: np.ndarray  # (partitions + 1,) int64: partition p is rows offsets[p]:offsets[p+1]
    vectors: np.ndarray  # (rows, dim) float16 memmap
    ids: np.ndarray  # (rows,) bytes memmap: chunk ids
    docs: np.ndarray  # (rows,) int32 memmap: document code of each row
    codes: np.ndarray  # (rows, dim) int8 memmap: the rows as scanned
    code_meta: np.ndarray  # (rows, 2) float32 memmap: each code's scale and error
    doc_ids: list[str]
    doc_paths: list[str]
    doc_exts: list[str]
    doc_rows: np.ndarray  # (documents,) int64: rows of each document here
    code_of: dict[str, int] = field(default_factory=dict)
    _allowed: dict[SearchFilters, np.ndarray] = field(default_factory=dict)
    # Open while the generation is: a rebuild removes the folder of the one it
    # replaces, and a scan that began on it still reads (the memory maps hold
    # the files the same way).
    _fds: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for name in _READ_FILES:
            self._fds[name] = os.open(self.folder / name, os.O_RDONLY)
        weakref.finalize(self, _close_all, list(self._fds.values()))

    def _rows(self, name: str, array: np.ndarray, lo: int, hi: int) -> np.ndarray:
        """Rows lo:hi of `array` (the memory map of file `name`), read into memory."""
        out = np.empty((hi - lo, *array.shape[1:]), dtype=array.dtype)
        _read_spans(self._fds[name], array, [lo], [hi], out)
        return out

    @property
    def partitions(self) -> int:
        return len(self.centroids)

    @property
    def rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def dimension(self) -> int:
        return int(self.centroids.shape[1])

    def partition_bytes(self, p: int, *, row_bytes: int) -> int:
        """Resident size of partition p: its rows as scored (`row_bytes` each),
        int32 document codes and chunk ids."""
        rows = int(self.offsets[p + 1] - self.offsets[p])
        return rows * (row_bytes + 4 + self.ids.dtype.itemsize)

    @property
    def metadata_bytes(self) -> int:
        return int(self.centroids.nbytes + self.offsets.nbytes + self.doc_rows.nbytes)

    def load(self, p: int, *, form: str) -> tuple[np.ndarray, ...]:
        """Partition p read from disk: its rows in `form` ("float16": the
        vectors; "int8": the codes and their scales and errors), then the
        document codes and chunk ids (held with the partition: read per result
        from the memmap, a question whose pages left the page cache paid a disk
        read per candidate). Read with `pread`, which releases the GIL: the
        view reads a batch's missing partitions in threads while it scores the
        resident ones."""
        lo, hi = int(self.offsets[p]), int(self.offsets[p + 1])
        if form == "int8":
            rows: tuple[np.ndarray, ...] = (
                self._rows("codes.npy", self.codes, lo, hi),
                self._rows("code_meta.npy", self.code_meta, lo, hi),
            )
        else:
            rows = (self._rows("vectors.npy", self.vectors, lo, hi),)
        return (
            *rows,
            self._rows("docs.npy", self.docs, lo, hi),
            self._rows("ids.npy", self.ids, lo, hi),
        )

    def read_vectors(
        self, rows: np.ndarray, *, pool: Executor | None = None, threads: int = 4
    ) -> np.ndarray:
        """The float16 vectors of generation rows `rows` (sorted, unique), read
        from disk in runs (rows closer than `_GAP_ROWS` share one read), the
        runs split between `threads` tasks of `pool`: a random read from the
        disk is ~40-75 us, one from the page cache a few."""
        if len(rows) == 0:
            return np.zeros((0, self.dimension), DISK_DTYPE)
        breaks = np.flatnonzero(np.diff(rows) > _GAP_ROWS)
        starts = rows[np.r_[0, breaks + 1]]
        ends = rows[np.r_[breaks, len(rows) - 1]] + 1
        before = np.r_[0, np.cumsum(ends - starts)]  # where each run lands in `run`
        run = np.empty((int(before[-1]), self.dimension), DISK_DTYPE)
        tasks = max(1, min(threads, len(starts))) if pool is not None else 1
        edges = np.linspace(0, len(starts), tasks + 1).astype(int).tolist()

        def read(first: int, last: int) -> None:
            _read_spans(
                self._fds["vectors.npy"],
                self.vectors,
                starts[first:last].tolist(),
                ends[first:last].tolist(),
                run[before[first] : before[last]],
            )

        if tasks == 1:
            read(0, len(starts))
        else:
            assert pool is not None
            for job in [pool.submit(read, a, b) for a, b in itertools.pairwise(edges)]:
                job.result()
        which = np.searchsorted(starts, rows, side="right") - 1
        return run[before[which] + rows - starts[which]]

    def allowed(self, filters: SearchFilters | None) -> np.ndarray | None:
        """Which document codes pass the filters (None: all)."""
        if filters is None or filters.empty:
            return None
        mask = self._allowed.get(filters)
        if mask is None:
            mask = np.fromiter(
                (
                    matches(filters, path=p, ext=e)
                    for p, e in zip(self.doc_paths, self.doc_exts, strict=True)
                ),
                dtype=bool,
                count=len(self.doc_paths),
            )
            if len(self._allowed) > 64:
                self._allowed.clear()
            self._allowed[filters] = mask
        return mask


def _close_all(fds: list[int]) -> None:
    for fd in fds:
        with contextlib.suppress(OSError):
            os.close(fd)


def _read_spans(
    fd: int, array: np.ndarray, starts: list[int], ends: list[int], out: np.ndarray
) -> None:
    """Rows starts[i]:ends[i] of a memory-mapped .npy `array` (open as `fd`),
    one run after another into `out`, with `pread` (which releases the GIL)."""
    row = array.itemsize * int(np.prod(array.shape[1:], dtype=np.int64))
    base = int(getattr(array, "offset", 0))
    view = memoryview(out.reshape(-1)).cast("B")
    at = 0
    for lo, hi in zip(starts, ends, strict=True):
        size = (hi - lo) * row
        done = 0
        while done < size:
            n = os.preadv(fd, [view[at + done : at + size]], base + lo * row + done)
            if n <= 0:
                raise OSError(f"the IVF view's file ends before row {hi}")
            done += n
        at += size


def matches(filters: SearchFilters | None, *, path: str, ext: str) -> bool:
    """The filter rule of `search.filter_expression`, for one document."""
    if filters is None or filters.empty:
        return True
    if filters.folders and not any(path.startswith(folder_prefix(f)) for f in filters.folders):
        return False
    return not filters.types or ext in {normalise_type(t) for t in filters.types}


def open_generation(folder: Path, *, seq: int) -> Generation:
    if not all((folder / name).exists() for name in CODE_FILES):
        # A generation written before the view scanned int8 codes: one pass over
        # its float16 vectors (a few seconds per million rows), once.
        log.info("writing the int8 codes of %s", folder)
        write_codes(folder)
    docs = json.loads((folder / "docs.json").read_text(encoding="utf-8"))
    doc_ids = docs["doc_ids"]
    return Generation(
        name=folder.name,
        folder=folder,
        seq=seq,
        centroids=np.load(folder / "centroids.npy"),
        offsets=np.load(folder / "offsets.npy"),
        vectors=np.load(folder / "vectors.npy", mmap_mode="r"),
        ids=np.load(folder / "ids.npy", mmap_mode="r"),
        docs=np.load(folder / "docs.npy", mmap_mode="r"),
        codes=np.load(folder / "codes.npy", mmap_mode="r"),
        code_meta=np.load(folder / "code_meta.npy", mmap_mode="r"),
        doc_ids=doc_ids,
        doc_paths=docs["paths"],
        doc_exts=docs["exts"],
        doc_rows=np.asarray(docs["rows"], dtype=np.int64),
        code_of={d: i for i, d in enumerate(doc_ids)},
    )


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms > 0, norms, 1.0)


def write_generation(
    *,
    folder: Path,
    batches: Iterable[pa.RecordBatch],
    rows_hint: int,
    dimension: int,
    partitions: int,
    centroids: np.ndarray | None = None,
    seed: int = 0,
) -> dict[str, Any]:
    """Read a snapshot of the chunks table (chunk_id, doc_id, path, ext, vector)
    and write a generation into `folder`; train centroids unless given."""
    started = time.perf_counter()
    vectors = np.empty((max(rows_hint, 1), dimension), dtype=DISK_DTYPE)
    ids: list[np.ndarray] = []
    codes: list[np.ndarray] = []
    code_of: dict[str, int] = {}
    paths: list[str] = []
    exts: list[str] = []
    n = 0
    for batch in batches:
        m = batch.num_rows
        if m == 0:
            continue
        if n + m > len(vectors):
            vectors = np.resize(vectors, (max(2 * len(vectors), n + m), dimension))
        flat = batch.column("vector").flatten().to_numpy(zero_copy_only=False)
        vectors[n : n + m] = unit_rows(flat.reshape(m, dimension))
        ids.append(np.asarray(batch.column("chunk_id").to_pylist(), dtype=object))
        batch_codes = np.empty(m, dtype=np.int32)
        cols = zip(
            batch.column("doc_id").to_pylist(),
            batch.column("path").to_pylist(),
            batch.column("ext").to_pylist(),
            strict=True,
        )
        for i, (doc, path, ext) in enumerate(cols):
            code = code_of.get(doc)
            if code is None:
                code = code_of[doc] = len(paths)
                paths.append(path or "")
                exts.append(ext or "")
            batch_codes[i] = code
        codes.append(batch_codes)
        n += m
    vectors = vectors[:n]
    all_ids = np.concatenate(ids) if ids else np.zeros(0, dtype=object)
    all_codes = np.concatenate(codes) if codes else np.zeros(0, dtype=np.int32)
    rng = np.random.default_rng(seed)
    if centroids is None or centroids.shape != (partitions, dimension):
        centroids = train_centroids(vectors, partitions=partitions, rng=rng)
    assign = assign_rows(vectors, centroids)
    order = np.argsort(assign, kind="stable")
    offsets = np.zeros(len(centroids) + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(np.bincount(assign, minlength=len(centroids)))
    folder.mkdir(parents=True, exist_ok=True)
    out = np.lib.format.open_memmap(
        folder / "vectors.npy", mode="w+", dtype=DISK_DTYPE, shape=(n, dimension)
    )
    for start in range(0, n, _ASSIGN_BLOCK):
        out[start : start + _ASSIGN_BLOCK] = vectors[order[start : start + _ASSIGN_BLOCK]]
    out.flush()
    del out
    write_codes(folder)
    encoded = np.array([s.encode() for s in all_ids[order]] or [b""], dtype=np.bytes_)[:n]
    np.save(folder / "ids.npy", encoded)
    np.save(folder / "docs.npy", all_codes[order].astype(np.int32))
    np.save(folder / "offsets.npy", offsets)
    np.save(folder / "centroids.npy", centroids.astype(np.float32))
    doc_rows = np.bincount(all_codes, minlength=len(paths)).tolist()
    docs = {"doc_ids": list(code_of), "paths": paths, "exts": exts, "rows": doc_rows}
    (folder / "docs.json").write_text(json.dumps(docs), encoding="utf-8")
    return {"rows": n, "partitions": len(centroids), "seconds": time.perf_counter() - started}


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Int8 codes of each row (symmetric, one scale per row) and per row
    (scale, error): `error` is the norm of the row minus `codes * scale`."""
    x = np.asarray(rows, dtype=np.float32)
    scale = np.abs(x).max(axis=1, keepdims=True) / 127.0
    scale[scale == 0] = 1.0
    codes = np.rint(x / scale).astype(np.int8)
    error = np.linalg.norm(x - codes * scale, axis=1)
    return codes, np.stack([scale[:, 0], error], axis=1).astype(np.float32)


def write_codes(folder: Path) -> None:
    """The int8 codes of a generation's float16 vectors, written beside them
    (under temporary names first: whole or not at all)."""
    vectors = np.load(folder / "vectors.npy", mmap_mode="r")
    n, dim = vectors.shape
    tmp = [folder / f"{name}.tmp.npy" for name in ("codes", "code_meta")]
    codes = np.lib.format.open_memmap(tmp[0], mode="w+", dtype=np.int8, shape=(n, dim))
    meta = np.lib.format.open_memmap(tmp[1], mode="w+", dtype=np.float32, shape=(n, 2))
    for start in range(0, n, _ASSIGN_BLOCK):
        c, m = quantize(vectors[start : start + _ASSIGN_BLOCK])
        codes[start : start + len(c)] = c
        meta[start : start + len(m)] = m
    codes.flush()
    meta.flush()
    del codes, meta
    for file, name in zip(tmp, CODE_FILES, strict=True):
        file.replace(folder / name)


def train_centroids(
    vectors: np.ndarray, *, partitions: int, rng: np.random.Generator
) -> np.ndarray:
    """Spherical k-means on a sample of the rows."""
    n, dim = vectors.shape
    if n == 0:
        return np.zeros((1, dim), dtype=np.float32)
    k = max(1, min(partitions, n))
    size = min(n, max(k * _SAMPLE_PER_PARTITION, 4 * k))
    sample = unit_rows(vectors[np.sort(rng.choice(n, size, replace=False))])
    centroids = sample[rng.choice(size, k, replace=False)].copy()
    for _ in range(_KMEANS_ITERATIONS):
        assign = assign_rows(sample, centroids)
        sums = np.zeros_like(centroids)
        np.add.at(sums, assign, sample) if size < 4096 else _add_sorted(sums, assign, sample)
        counts = np.bincount(assign, minlength=k)
        empty = counts == 0
        if empty.any():  # reseed empty partitions from random rows
            sums[empty] = sample[rng.choice(size, int(empty.sum()), replace=False)]
        centroids = unit_rows(sums)
    return centroids


def _add_sorted(sums: np.ndarray, assign: np.ndarray, rows: np.ndarray) -> None:
    order = np.argsort(assign, kind="stable")
    keys = assign[order]
    starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
    sums[keys[starts]] = np.add.reduceat(rows[order], starts, axis=0)


def assign_rows(vectors: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    out = np.empty(len(vectors), dtype=np.int64)
    for start in range(0, len(vectors), _ASSIGN_BLOCK):
        block = np.asarray(vectors[start : start + _ASSIGN_BLOCK], dtype=np.float32)
        out[start : start + len(block)] = np.argmax(block @ centroids.T, axis=1)
    return out


def partitions_for(rows: int, *, rows_per_partition: int) -> int:
    return max(1, min(4096, math.ceil(rows / rows_per_partition)))
