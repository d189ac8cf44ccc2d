"""Opening, repairing and rebuilding the IVF view of a store's chunks table.

Kept apart from `lance_store.py`, which calls these with its table, its write
lock and its policy; the view itself (`ivf_view.py`) knows nothing of LanceDB.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from engine.rag.store.ivf_files import partitions_for, write_generation
from engine.rag.store.ivf_view import IvfView
from engine.rag.store.search import quote

log = logging.getLogger(__name__)

_VIEW_COLUMNS = ["chunk_id", "doc_id", "path", "ext", "vector"]
_READ_BATCH = 65_536


def open_view(
    *,
    root: Path,
    table_name: str,
    table: Any,
    dimension: int,
    budget_bytes: int | None,
    scorer: str = "auto",
) -> IvfView:
    """The view of `table`, repaired after a crash and checked against the
    table (stale: LanceDB answers until it is rebuilt). Views of tables that
    were replaced are removed."""
    view = IvfView(
        folder=root / table_name, dimension=dimension, budget_bytes=budget_bytes, scorer=scorer
    )
    if view.active:
        repaired = view.recover(rows_of=lambda doc_id: doc_rows(table, doc_id, dimension))
        if repaired:
            log.info("IVF view: re-read %d document(s) a crash left unjournalled", repaired)
        view.validate(table_rows=table.count_rows())
    for other in root.glob("*"):
        if other.name != table_name:
            shutil.rmtree(other, ignore_errors=True)
    return view


def doc_rows(table: Any, doc_id: str, dimension: int) -> tuple[str, str, list[str], np.ndarray]:
    """A document's rows as the table has them: (path, ext, chunk ids, vectors)."""
    rows = (
        table.search()
        .where(f"doc_id = {quote(doc_id)}")
        .select(["chunk_id", "path", "ext", "vector"])
        .limit(None)
        .to_arrow()
        .to_pylist()
    )
    vectors = np.asarray([r["vector"] for r in rows], dtype=np.float32)
    vectors = vectors.reshape(len(rows), dimension)
    path = rows[0]["path"] if rows else ""
    ext = rows[0]["ext"] if rows else ""
    return path, ext, [r["chunk_id"] for r in rows], vectors


def rebuild(
    *,
    view: IvfView,
    db: Any,
    table: Any,
    table_name: str,
    write_lock: threading.Lock,
    rows_per_partition: int,
    retrain: bool,
) -> tuple[int, Path, dict[str, Any]]:
    """Write a new generation from a snapshot of the table. The snapshot's
    version and the journal's sequence number are read under the write lock,
    so every later write is in the delta. Returns (seq, folder, figures);
    the caller makes it current with `view.finish_build`."""
    with write_lock:
        seq, target = view.start_build()
        version = table.version
        rows = table.count_rows()
    snapshot = db.open_table(table_name)
    snapshot.checkout(version)
    old = view.generation
    partitions = partitions_for(rows, rows_per_partition=rows_per_partition)
    reuse = not retrain and old is not None and old.partitions == partitions
    reader = snapshot.search().select(_VIEW_COLUMNS).limit(None).to_batches(_READ_BATCH)
    built = write_generation(
        folder=target,
        batches=reader,
        rows_hint=rows,
        dimension=view.dimension,
        partitions=partitions,
        centroids=old.centroids if reuse and old is not None else None,
    )
    return seq, target, built


def step(
    *,
    view: IvfView,
    table_rows: Callable[[], int],
    policy: Any,
    rebuild: Callable[[bool], object],
    due: bool,
    force: bool,
) -> str | None:
    """The maintainer's step for the view: build it once the table has
    `policy.min_rows`, rebuild it when stale, and fold the delta in when it has
    `policy.optimize_after_rows` rows or the interval is due. Centroids are
    retrained when the live rows doubled or halved since they were trained."""
    if not view.ready:
        if not view.active and table_rows() < policy.min_rows:
            return None
        rebuild(True)
        return "view-built"
    if force or view.delta_rows >= policy.optimize_after_rows or (due and view.delta_rows):
        gen = view.generation
        live = view.live_rows()
        rebuild(gen is None or live > 2 * gen.rows or 2 * live < gen.rows)
        return "view-folded"
    return None
