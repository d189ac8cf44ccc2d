"""Writing documents into the store, and keeping its tables' history short.

A group of documents goes in with four commits whatever its size (old rows
blanked, pages, chunks, journal rows), where one commit per table per file made
every LanceDB version's manifest longer than the last: at 4,000 files the
manifests outweighed the text 45 to 1. The journal rows are written last, so
a crash mid-group leaves rows without a journal row, which the next start
removes (`journal.remove_orphans`), and every file is read again exactly once.

`compact` folds the small files of many commits together and drops old
versions; a write that finds the disk full raises `DiskFullError`, never a
raw Lance error.
"""

from __future__ import annotations

import dataclasses
import datetime
import errno
import logging
import os
import shutil
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pyarrow as pa

from engine.errors import DiskFullError
from engine.rag.store.fulltext import cut_words
from engine.rag.store.records import DocumentContent
from engine.rag.store.schema import PAGES_SCHEMA
from engine.rag.store.search import file_type
from engine.rag.store.search import quote as _quote

log = logging.getLogger(__name__)
_NO_SPACE = ("no space left on device", "os error 28", "disk quota exceeded", "os error 122")
# Room a group's commits need beyond its rows: each of the four commits writes a data
# file, a manifest and a transaction file; the IVF view notes each document; and the
# compaction and full-text index that follow a job need some too. Measured on a tmpfs
# (docs/hardening.md): a file's 126 chunks took 110-130 KB in all.
_COMMIT_SLACK_BYTES = 512 * 1024
_ROW_OVERHEAD_BYTES = 256  # per chunk or page row: ids, path, spans, Arrow offsets


def is_disk_full_text(text: str) -> bool:
    """Whether a reason or message says a disk is full (a file recorded so by an
    older version: its reading failed for want of room, not for its content)."""
    lowered = text.lower()
    return any(s in lowered for s in _NO_SPACE) or (
        "the disk at" in lowered and "is full" in lowered
    )


def is_disk_full(e: BaseException) -> bool:
    """ENOSPC (or a quota) however it comes: an OSError, or Lance's text."""
    while e is not None:
        if isinstance(e, DiskFullError):
            return True
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(s in str(e).lower() for s in _NO_SPACE):
            return True
        e = e.__cause__ or e.__context__  # type: ignore[assignment]
    return False


def mount_of(folder: Path) -> Path:
    path = folder.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    while not os.path.ismount(path) and path != path.parent:
        path = path.parent
    return path


def disk_full_error(folder: Path) -> DiskFullError:
    try:
        free: int | None = shutil.disk_usage(folder).free
    except OSError:
        free = None
    return DiskFullError(folder=str(folder), mount=str(mount_of(folder)), free_bytes=free)


@contextmanager
def disk_full_raised(folder: Path) -> Iterator[None]:
    """Turn a full disk under `folder` into DiskFullError; other errors pass."""
    try:
        yield
    except DiskFullError:
        raise
    except Exception as e:
        if is_disk_full(e):
            raise disk_full_error(folder) from e
        raise


def in_filter(column: str, values: Sequence[str]) -> str:
    return f"{column} IN ({', '.join(_quote(v) for v in values)})"


def replace_documents(
    *,
    store: Any,
    lock: threading.Lock,
    items: Sequence[DocumentContent],
) -> None:
    """Swap in the pages, chunks and journal rows of `items` (a LanceStore's
    tables, under its write lock), four commits for the whole group."""
    if not items:
        return
    ids = [it.doc.doc_id for it in items]
    doc_filter = in_filter("doc_id", ids)
    blanked = [
        dataclasses.asdict(dataclasses.replace(it.previous, content_hash=""))
        for it in items
        if it.previous is not None and it.previous.content_hash
    ]
    page_rows = [
        {"page_key": f"{p.doc_id}:{p.page}", "doc_id": p.doc_id, "page": p.page, "text": p.text}
        for it in items
        for p in it.pages
    ]
    chunk_rows = [
        {**c.__dict__, "vector": v, "ext": file_type(c.path), "words": cut_words(c.text)}
        for it in items
        for c, v in zip(it.embedded.chunks, it.embedded.vectors.tolist(), strict=True)
    ]
    view = store.view
    need = _bytes_needed(items=items, pages=page_rows)
    with disk_full_raised(store.folder), lock:
        # A group is written only where it fits whole: on a disk that fills between
        # its chunks and its journal rows, the chunks were served with no row.
        _ensure_room(folder=store.folder, need=need)
        if blanked:
            upsert_documents(table=store.documents, rows=blanked)
        if view is not None:
            for doc_id in ids:
                view.begin(doc_id=doc_id)
        undo: list[Any] = []  # what to delete of this group's rows if a write fails
        try:
            replace_rows(
                store.pages,
                key="page_key",
                rows=page_rows,
                doc_filter=doc_filter,
                schema=PAGES_SCHEMA,
            )
            undo = [store.pages]
            replace_rows(
                store.chunks,
                key="chunk_id",
                rows=chunk_rows,
                doc_filter=doc_filter,
                schema=store.chunks.schema,
            )
            undo = [store.chunks, store.pages, store.documents]
            upsert_documents(table=store.documents, rows=[it.doc.__dict__ for it in items])
        except Exception:
            # Filled meanwhile (by another program): what this group wrote goes
            # again, so that nothing of it is served without its row. Once its chunks
            # replaced a changed file's, that file's old row goes too (read again).
            _undo(tables=undo, doc_filter=doc_filter, folder=store.folder)
            raise
        if view is not None:
            for it in items:
                view.commit(
                    doc_id=it.doc.doc_id,
                    path=it.doc.path,
                    ext=file_type(it.doc.path),
                    ids=[c.chunk_id for c in it.embedded.chunks],
                    vectors=it.embedded.vectors,
                )
            view.table_version = store.chunks.version
    store.maintainer.wake()


def _bytes_needed(*, items: Sequence[DocumentContent], pages: list[dict[str, Any]]) -> int:
    """What a group's rows take on disk, roughly, and the slack its commits need."""
    rows = 0
    for it in items:
        vectors = it.embedded.vectors
        rows += int(vectors.size) * vectors.itemsize
        rows += sum(
            len(c.text.encode("utf-8", "replace")) + _ROW_OVERHEAD_BYTES for c in it.embedded.chunks
        )
    rows += sum(len(p["text"].encode("utf-8", "replace")) + _ROW_OVERHEAD_BYTES for p in pages)
    return 2 * rows + _COMMIT_SLACK_BYTES


def _ensure_room(*, folder: Path, need: int) -> None:
    try:
        free = shutil.disk_usage(folder).free
    except OSError:
        return  # unknown: the write itself says
    if free < need:
        log.warning("not writing a group: %d bytes free at %s, %d needed", free, folder, need)
        raise disk_full_error(folder)


def _undo(*, tables: list[Any], doc_filter: str, folder: Path) -> None:
    """Delete a failed group's rows from `tables`, in order (chunks first: what search serves).
    Best effort: if this fails too, the next start removes chunks without a row
    (journal.remove_orphans), and a blanked row never passes for the content stored,
    so its file is read again."""
    for table in tables:
        try:
            table.delete(doc_filter)
        except Exception:  # the write's own failure is what is raised
            log.warning("could not undo a failed write in %s", folder, exc_info=True)
            return


def upsert_documents(*, table: Any, rows: list[dict[str, Any]]) -> None:
    (
        table.merge_insert("doc_id")
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute(rows)
    )


def replace_rows(
    table: Any, *, key: str, rows: list[dict[str, Any]], doc_filter: str, schema: pa.Schema
) -> None:
    if rows:
        (
            table.merge_insert(key)
            .when_matched_update_all()
            .when_not_matched_insert_all()
            .when_not_matched_by_source_delete(doc_filter)
            .execute(pa.Table.from_pylist(rows, schema=schema))
        )
    else:
        table.delete(doc_filter)


def compact(*, tables: Sequence[Any], keep_versions_s: float) -> None:
    """Fold the small files of many commits into few and drop the versions
    older than `keep_versions_s` (readers in flight may still use newer ones)."""
    for table in tables:
        table.optimize(cleanup_older_than=datetime.timedelta(seconds=keep_versions_s))
