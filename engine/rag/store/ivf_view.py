"""The store's own IVF view of a chunks table, and the batched scan over it.

LanceDB runs the questions of a multi-vector query as separate ANN searches, so
a batch shares nothing between them. The view keeps the table's vectors grouped
by IVF partition in files of its own (`ivf_files.py`); a batch assigns each
question its `nprobes` partitions, loads every needed partition once (from the
resident cache or the disk), scores all the questions that probe it with one
matrix product, and merges each question's top candidates (`ivf_scan.py`,
RAGDoll §4.2).

Staying consistent with the table: every write of the store is journalled.
Before the table is written an intent names the document (`pending/`); after,
the document's new rows — or none, for a removal — go to the delta (`delta/`)
and the intent is removed. The delta hides that document's rows in the
generation and is scanned flat beside it. A kill at any moment leaves an
intent at worst; opening the view re-reads those documents from the table.
A view whose live row count differs from the table's (a write from elsewhere)
is stale: searches fall back to LanceDB until the maintainer rebuilds it. A
rebuild (a new generation from a table snapshot) folds the delta in.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from engine.json_file import write_json
from engine.rag.store.ivf_files import Generation, matches, open_generation, unit_rows
from engine.rag.store.ivf_scan import Found, Scanner
from engine.rag.store.partition_cache import PartitionCache
from engine.rag.store.records import SearchFilters
from engine.rag.store.scoring import Scorer, pick_scorer

log = logging.getLogger(__name__)

Candidates = list[tuple[str, float]]  # (chunk_id, cosine similarity), best first


@dataclass(frozen=True, kw_only=True)
class DeltaDoc:
    """A document's rows written since the generation was built (none: removed)."""

    doc_id: str
    path: str
    ext: str
    ids: tuple[str, ...]
    vectors: np.ndarray  # (len(ids), dim) float32, unit length
    seq: int


@dataclass(frozen=True, kw_only=True)
class _State:
    generation: Generation | None
    delta: dict[str, DeltaDoc]
    hidden: np.ndarray | None  # per document code of the generation: rows hidden by the delta
    delta_ids: tuple[str, ...]
    delta_vectors: np.ndarray
    delta_docs: tuple[DeltaDoc, ...]  # the document of each delta row


class IvfView:
    """The view of one chunks table in `folder`. Journalling is on once the
    folder exists (the first build makes it); below that tables are small and
    LanceDB scans them flat."""

    def __init__(
        self, *, folder: Path, dimension: int, budget_bytes: int | None, scorer: str = "auto"
    ) -> None:
        """`scorer`: the layout asked for (`pick_scorer`), chosen at first use."""
        self.folder = folder
        self._wanted_scorer = scorer
        self.dimension = dimension
        self._lock = threading.Lock()
        self._seq = 0
        self.stale = False
        self.table_version: int | None = None  # the table version the view agrees with
        self._state = _empty_state(dimension)
        self.cache = PartitionCache(budget_bytes=budget_bytes, overhead=self._fixed_bytes)
        self._scorer: Scorer | None = None
        self._scanner = Scanner(cache=self.cache)
        if self.active:
            self._load()

    @property
    def scorer(self) -> Scorer:
        if self._scorer is None:
            scorer = pick_scorer(self.dimension, wanted=self._wanted_scorer)
            with self._lock:
                if self._scorer is None:
                    self._scorer = scorer
        return self._scorer

    # -- state -------------------------------------------------------------

    @property
    def active(self) -> bool:
        return (self.folder / "current.json").exists() or (self.folder / "building").exists()

    @property
    def ready(self) -> bool:
        return self._state.generation is not None and not self.stale

    @property
    def generation(self) -> Generation | None:
        return self._state.generation

    @property
    def delta_rows(self) -> int:
        return len(self._state.delta_ids)

    def live_rows(self) -> int:
        state = self._state
        gen = state.generation
        base = 0
        if gen is not None:
            base = int(gen.doc_rows[~state.hidden].sum()) if state.hidden is not None else gen.rows
        return base + len(state.delta_ids)

    def resident_bytes(self) -> int:
        return self.cache.resident_bytes + self._fixed_bytes()

    def full_resident_bytes(self) -> int:
        """What the view holds with every partition resident, in the scorer's layout
        (0 before its first generation)."""
        gen = self._state.generation
        if gen is None:
            return 0
        row_bytes = self.scorer.row_bytes(gen.dimension)
        return gen.metadata_bytes + sum(
            gen.partition_bytes(p, row_bytes=row_bytes) for p in range(gen.partitions)
        )

    def _fixed_bytes(self) -> int:
        # Held whatever the batch: the centroids and the delta's vectors.
        state = self._state
        meta = state.generation.metadata_bytes if state.generation is not None else 0
        return meta + int(state.delta_vectors.nbytes)

    def _load(self) -> None:
        try:
            current = json.loads((self.folder / "current.json").read_text(encoding="utf-8"))
            generation = open_generation(self.folder / current["generation"], seq=current["seq"])
        except (FileNotFoundError, KeyError, ValueError, OSError) as e:
            if (self.folder / "current.json").exists():
                log.warning(
                    "the IVF view in %s is unreadable (%s); it will be rebuilt", self.folder, e
                )
            generation = None
        delta: dict[str, DeltaDoc] = {}
        for file in sorted((self.folder / "delta").glob("*.npz")):
            try:
                doc = _read_delta(file)
            except (OSError, ValueError, KeyError) as e:
                log.warning("unreadable delta %s (%s): the view will be rebuilt", file, e)
                self.stale = True
                continue
            if generation is not None and doc.seq <= generation.seq:
                file.unlink(missing_ok=True)  # already in the generation (a crash after a swap)
                continue
            delta[doc.doc_id] = doc
        self._seq = max([generation.seq if generation else 0, *(d.seq for d in delta.values())])
        self._state = _state_of(generation, delta, self.dimension)
        for old in self.folder.glob("g*"):
            if old.is_dir() and (generation is None or old.name != generation.name):
                shutil.rmtree(old, ignore_errors=True)  # a build a crash interrupted

    # -- the journal ---------------------------------------------------------

    def begin(self, *, doc_id: str) -> None:
        """Before the table is written: name the document, so a crash between
        the table write and `commit` is repaired from the table."""
        if self.active:
            write_json(
                file=self.folder / "pending" / f"{_key(doc_id)}.json", data={"doc_id": doc_id}
            )

    def commit(
        self, *, doc_id: str, path: str, ext: str, ids: list[str], vectors: np.ndarray
    ) -> None:
        """After the table write: the document's rows now (empty: removed)."""
        if not self.active:
            return
        try:
            with self._lock:
                self._seq += 1
                doc = DeltaDoc(
                    doc_id=doc_id,
                    path=path,
                    ext=ext,
                    ids=tuple(ids),
                    vectors=unit_rows(
                        np.asarray(vectors, np.float32).reshape(len(ids), self.dimension)
                    ),
                    seq=self._seq,
                )
                _write_delta(self.folder / "delta" / f"{_key(doc_id)}.npz", doc)
                delta = {**self._state.delta, doc_id: doc}
                self._state = _state_of(self._state.generation, delta, self.dimension)
            (self.folder / "pending" / f"{_key(doc_id)}.json").unlink(missing_ok=True)
        except (OSError, ValueError) as e:
            # The intent stays: the next open re-reads the document; meanwhile
            # searches go to LanceDB.
            log.warning("could not journal %s in the IVF view (%s): falling back", doc_id, e)
            self.stale = True

    def recover(self, *, rows_of: Callable[[str], tuple[str, str, list[str], np.ndarray]]) -> int:
        """Apply the intents a crash left: each document as the table has it now.
        `rows_of(doc_id)` gives (path, ext, chunk ids, vectors). Returns how many."""
        pending = sorted((self.folder / "pending").glob("*.json")) if self.active else []
        for file in pending:
            try:
                doc_id = json.loads(file.read_text(encoding="utf-8"))["doc_id"]
            except (OSError, ValueError, KeyError):
                file.unlink(missing_ok=True)  # a half-written intent: its write never began
                continue
            path, ext, ids, vectors = rows_of(doc_id)
            self.commit(doc_id=doc_id, path=path, ext=ext, ids=ids, vectors=vectors)
        return len(pending)

    def validate(self, *, table_rows: int) -> bool:
        """Stale (LanceDB answers) when the view does not count the table's rows."""
        if self._state.generation is not None and self.live_rows() != table_rows:
            log.warning(
                "the IVF view has %d rows, the table %d: searching with LanceDB until rebuilt",
                self.live_rows(),
                table_rows,
            )
            self.stale = True
        return not self.stale

    # -- building -------------------------------------------------------------

    def start_build(self) -> tuple[int, Path]:
        """Call under the store's write lock, with the table version read there:
        journalling starts (if it had not) and every write after `seq` will be
        in the delta. Returns (seq, the folder to build into)."""
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "building").touch()
        number = 1 + max(
            [int(p.name[1:]) for p in self.folder.glob("g*") if p.name[1:].isdigit()] or [0]
        )
        return self._seq, self.folder / f"g{number:06d}"

    def finish_build(self, *, seq: int, built: Path) -> None:
        """Make the new generation current; drop the delta it contains."""
        generation = open_generation(built, seq=seq)
        with self._lock:
            write_json(
                file=self.folder / "current.json",
                data={"generation": built.name, "seq": seq},
                indent=None,
            )
            old = self._state.generation
            delta = {}
            for doc_id, doc in self._state.delta.items():
                if doc.seq <= seq:
                    (self.folder / "delta" / f"{_key(doc_id)}.npz").unlink(missing_ok=True)
                else:
                    delta[doc_id] = doc
            self._state = _state_of(generation, delta, self.dimension)
            self.stale = False
            self.cache.clear()
        (self.folder / "building").unlink(missing_ok=True)
        if old is not None and old.folder != built:
            shutil.rmtree(old.folder, ignore_errors=True)

    def drop(self) -> None:
        with self._lock:
            self._state = _empty_state(self.dimension)
            self.cache.clear()
        shutil.rmtree(self.folder, ignore_errors=True)

    # -- searching ------------------------------------------------------------

    def search(
        self,
        queries: np.ndarray,
        *,
        limit: int,
        nprobes: int,
        filters: SearchFilters | None = None,
        exact: int | None = None,
    ) -> list[Candidates]:
        """Each question's best `limit` chunks by cosine similarity, the first
        `exact` (all by default) in exact order with exact scores (the float32
        cosine of the float16 rows); past them, with the int8 kernel, the order
        and scores are approximate, each below the exact `exact`-th."""
        state = self._state
        gen = state.generation
        if gen is None:
            raise RuntimeError("the IVF view has no generation yet")
        q = unit_rows(queries)
        allowed = gen.allowed(filters)
        keep = ~state.hidden if state.hidden is not None else None
        if allowed is not None:
            keep = allowed if keep is None else keep & allowed
        scores, rows, cids = self._scan(
            gen, q, limit=limit, nprobes=nprobes, keep=keep, exact=exact
        )
        if filters is not None and not filters.empty and nprobes < gen.partitions:
            # A narrow filter may leave fewer than `limit` rows in the probed
            # partitions; those questions look at every partition.
            short = [i for i, r in enumerate(rows) if len(r) < limit]
            if short:
                s2, r2, c2 = self._scan(
                    gen, q[short], limit=limit, nprobes=gen.partitions, keep=keep, exact=exact
                )
                for j, i in enumerate(short):
                    scores[i], rows[i], cids[i] = s2[j], r2[j], c2[j]
        delta = self._delta_candidates(state, q, limit=limit, filters=filters)
        out = []
        for i in range(len(q)):
            ids = [c.decode() for c in cids[i].tolist()]
            merged = list(zip(ids, scores[i].tolist(), strict=True)) + delta[i]
            merged.sort(key=lambda c: -c[1])
            out.append(merged[:limit])
        return out

    def _scan(
        self,
        gen: Generation,
        q: np.ndarray,
        *,
        limit: int,
        nprobes: int,
        keep: np.ndarray | None,
        exact: int | None = None,
    ) -> Found:
        """Each question's best `limit`: scores, rows of the generation, chunk ids."""
        return self._scanner.scan(
            gen, q, scorer=self.scorer, limit=limit, nprobes=nprobes, keep=keep, exact=exact
        )

    def _delta_candidates(
        self, state: _State, q: np.ndarray, *, limit: int, filters: SearchFilters | None
    ) -> list[Candidates]:
        if not state.delta_ids:
            return [[] for _ in range(len(q))]
        sims = state.delta_vectors @ q.T
        if filters is not None and not filters.empty:
            ok = np.array([matches(filters, path=d.path, ext=d.ext) for d in state.delta_docs])
            sims[~ok] = -np.inf
        top = _top_rows(sims, limit)
        out = []
        for j in range(len(q)):
            out.append(
                [
                    (state.delta_ids[r], float(sims[r, j]))
                    for r in top[:, j].tolist()
                    if np.isfinite(sims[r, j])
                ]
            )
        return out


def _top_rows(sims: np.ndarray, limit: int) -> np.ndarray:
    """Row indices of the best `limit` per column (unordered)."""
    if len(sims) <= limit:
        return np.broadcast_to(np.arange(len(sims))[:, None], sims.shape).copy()
    return np.argpartition(-sims, limit - 1, axis=0)[:limit]


def _empty_state(dimension: int) -> _State:
    return _State(
        generation=None,
        delta={},
        hidden=None,
        delta_ids=(),
        delta_vectors=np.zeros((0, dimension), np.float32),
        delta_docs=(),
    )


def _state_of(generation: Generation | None, delta: dict[str, DeltaDoc], dimension: int) -> _State:
    hidden = None
    if generation is not None and delta:
        hidden = np.zeros(len(generation.doc_ids), dtype=bool)
        for doc_id in delta:
            code = generation.code_of.get(doc_id)
            if code is not None:
                hidden[code] = True
    docs = [d for d in delta.values() if d.ids]
    return _State(
        generation=generation,
        delta=delta,
        hidden=hidden,
        delta_ids=tuple(i for d in docs for i in d.ids),
        delta_vectors=np.concatenate([d.vectors for d in docs])
        if docs
        else np.zeros((0, dimension), np.float32),
        delta_docs=tuple(d for d in docs for _ in d.ids),
    )


def _key(doc_id: str) -> str:
    return hashlib.sha1(doc_id.encode()).hexdigest()


def _write_delta(file: Path, doc: DeltaDoc) -> None:
    file.parent.mkdir(parents=True, exist_ok=True)
    meta = {"doc_id": doc.doc_id, "path": doc.path, "ext": doc.ext, "ids": doc.ids, "seq": doc.seq}
    buffer = io.BytesIO()
    np.savez(buffer, vectors=doc.vectors, meta=np.array(json.dumps(meta)))
    tmp = file.with_suffix(".tmp")
    tmp.write_bytes(buffer.getvalue())
    tmp.replace(file)  # whole or not at all


def _read_delta(file: Path) -> DeltaDoc:
    with np.load(file) as data:
        meta: dict[str, Any] = json.loads(str(data["meta"]))
        vectors = np.asarray(data["vectors"], dtype=np.float32)
    return DeltaDoc(
        doc_id=meta["doc_id"],
        path=meta["path"],
        ext=meta["ext"],
        ids=tuple(meta["ids"]),
        vectors=vectors,
        seq=int(meta["seq"]),
    )
