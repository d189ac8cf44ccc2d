"""One generation of the store's IVF view on disk, and how it is built.

A generation is a folder holding the centroids, the table's vectors grouped by
partition (float16, partition after partition, so a partition is one
contiguous slice), their chunk ids, and for each row the code of its document
(path and extension per document, for the folder and file-type filters). It is
written whole into a fresh folder before `current.json` names it, so a crash
mid-build leaves the previous generation in force.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from engine.store.records import SearchFilters
from engine.store.search import folder_prefix, normalise_type

log = logging.getLogger(__name__)

DISK_DTYPE = np.float16  # half the disk reads of float32; scored as float32 once loaded
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
    doc_ids: list[str]
    doc_paths: list[str]
    doc_exts: list[str]
    doc_rows: np.ndarray  # (documents,) int64: rows of each document here
    code_of: dict[str, int] = field(default_factory=dict)
    _allowed: dict[SearchFilters, np.ndarray] = field(default_factory=dict)

    @property
    def partitions(self) -> int:
        return len(self.centroids)

    @property
    def rows(self) -> int:
        return int(self.offsets[-1])

    @property
    def dimension(self) -> int:
        return int(self.centroids.shape[1])

    def partition_bytes(self, p: int, *, bytes_per_value: int = 4) -> int:
        """Resident size of partition p: its vectors as scored, int32 document
        codes and chunk ids."""
        rows = int(self.offsets[p + 1] - self.offsets[p])
        return rows * (bytes_per_value * self.dimension + 4 + self.ids.dtype.itemsize)

    @property
    def metadata_bytes(self) -> int:
        return int(self.centroids.nbytes + self.offsets.nbytes + self.doc_rows.nbytes)

    def load(self, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Partition p read from disk: half-precision vectors, document codes,
        chunk ids (held with the partition: read per result from the memmap, a
        question whose pages left the page cache paid a disk read per candidate).
        Read with `pread`, which releases the GIL: the view reads a batch's
        missing partitions in threads while it scores the resident ones."""
        lo, hi = int(self.offsets[p]), int(self.offsets[p + 1])
        return (
            _read_rows(self.folder / "vectors.npy", self.vectors, lo, hi),
            _read_rows(self.folder / "docs.npy", self.docs, lo, hi),
            _read_rows(self.folder / "ids.npy", self.ids, lo, hi),
        )

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


def _read_rows(file: Path, array: np.ndarray, lo: int, hi: int) -> np.ndarray:
    """Rows lo:hi of a memory-mapped .npy `array` (of `file`), read into memory."""
    out = np.empty((hi - lo, *array.shape[1:]), dtype=array.dtype)
    if out.nbytes == 0:
        return out
    start = int(getattr(array, "offset", 0)) + lo * (out.nbytes // (hi - lo))
    view = memoryview(out).cast("B")
    fd = os.open(file, os.O_RDONLY)
    try:
        done = 0
        while done < len(view):
            n = os.preadv(fd, [view[done:]], start + done)
            if n <= 0:
                raise OSError(f"{file} ends before row {hi}")
            done += n
    finally:
        os.close(fd)
    return out


def matches(filters: SearchFilters | None, *, path: str, ext: str) -> bool:
    """The filter rule of `search.filter_expression`, for one document."""
    if filters is None or filters.empty:
        return True
    if filters.folders and not any(path.startswith(folder_prefix(f)) for f in filters.folders):
        return False
    return not filters.types or ext in {normalise_type(t) for t in filters.types}


def open_generation(folder: Path, *, seq: int) -> Generation:
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
    encoded = np.array([s.encode() for s in all_ids[order]] or [b""], dtype=np.bytes_)[:n]
    np.save(folder / "ids.npy", encoded)
    np.save(folder / "docs.npy", all_codes[order].astype(np.int32))
    np.save(folder / "offsets.npy", offsets)
    np.save(folder / "centroids.npy", centroids.astype(np.float32))
    doc_rows = np.bincount(all_codes, minlength=len(paths)).tolist()
    docs = {"doc_ids": list(code_of), "paths": paths, "exts": exts, "rows": doc_rows}
    (folder / "docs.json").write_text(json.dumps(docs), encoding="utf-8")
    return {"rows": n, "partitions": len(centroids), "seconds": time.perf_counter() - started}


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
