"""One file into the store: skip if unchanged, else parse, chunk, embed, swap."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import ParseError
from engine.ingest.chunker import chunk_document
from engine.ingest.embedder import Embedder
from engine.ingest.parsers import parse_file
from engine.store.lance_store import LanceStore
from engine.store.records import ChunkRecord, DocumentRecord, EmbeddedChunks, PageRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class ChunkingParams:
    max_tokens: int = 200
    overlap_tokens: int = 40


@dataclass(frozen=True, kw_only=True)
class FileOutcome:
    status: str  # "indexed" | "unchanged" | "error"
    chunks: int = 0
    embedded: int = 0  # chunks whose vectors were computed (not reused)
    reason: str | None = None


def doc_id_for(path: Path) -> str:
    return hashlib.sha1(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:20]


def content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def index_file(
    *, path: Path, store: LanceStore, embedder: Embedder, params: ChunkingParams
) -> FileOutcome:
    """Never raises for a bad file: the outcome carries the reason."""
    doc_id = doc_id_for(path)
    try:
        stat = path.stat()
        known = store.document_by_path(path=str(path))
        if known and (known.size, known.mtime) == (stat.st_size, stat.st_mtime):
            return FileOutcome(
                status="unchanged" if known.status == "indexed" else "error",
                chunks=known.chunks,
                reason=known.error,
            )
        digest = content_hash(path)
        if known and known.content_hash == digest and known.status == "indexed":
            # Touched but not changed: remember the new mtime, embed nothing.
            store.record_document(doc=_with_stat(known, stat.st_size, stat.st_mtime))
            return FileOutcome(status="unchanged", chunks=known.chunks)
        parsed = parse_file(path=path)
        chunks = chunk_document(
            doc=parsed,
            tokenizer=embedder.tokenizer,
            max_tokens=params.max_tokens,
            overlap_tokens=params.overlap_tokens,
        )
        if not chunks:
            raise ParseError("no text found in the file")
    except ParseError as e:
        return _record_error(store=store, path=path, doc_id=doc_id, reason=e.reason)
    except FileNotFoundError:
        return _record_error(
            store=store,
            path=path,
            doc_id=doc_id,
            reason="the file disappeared while it was being read",
        )
    except PermissionError:
        return _record_error(store=store, path=path, doc_id=doc_id, reason="permission denied")
    except OSError as e:
        return _record_error(
            store=store,
            path=path,
            doc_id=doc_id,
            reason=f"could not read the file: {e.strerror or e}",
        )

    records = [
        ChunkRecord(
            chunk_id=f"{doc_id}:{c.ordinal}",
            doc_id=doc_id,
            path=str(path),
            ordinal=c.ordinal,
            page=c.page,
            char_start=c.char_start,
            char_end=c.char_end,
            text=c.text,
            text_hash=hashlib.sha1(c.text.encode("utf-8", "surrogatepass")).hexdigest(),
        )
        for c in chunks
    ]
    vectors, embedded = _vectors_for(
        records=records, store=store, embedder=embedder, doc_id=doc_id, reuse=known is not None
    )
    doc = DocumentRecord(
        doc_id=doc_id,
        path=str(path),
        size=stat.st_size,
        mtime=stat.st_mtime,
        content_hash=digest,
        status="indexed",
        error=None,
        pages=parsed.page_count,
        chunks=len(records),
    )
    pages = [PageRecord(doc_id=doc_id, page=p.number, text=p.text) for p in parsed.pages]
    store.replace_document(
        doc=doc, pages=pages, embedded=EmbeddedChunks(chunks=records, vectors=vectors)
    )
    return FileOutcome(status="indexed", chunks=len(records), embedded=embedded)


def _vectors_for(
    *,
    records: list[ChunkRecord],
    store: LanceStore,
    embedder: Embedder,
    doc_id: str,
    reuse: bool,
) -> tuple[np.ndarray, int]:
    """Vectors for every chunk; those whose text did not change are reused."""
    old = store.vectors_by_text_hash(doc_id=doc_id) if reuse else {}
    todo = [i for i, r in enumerate(records) if r.text_hash not in old]
    fresh = embedder.embed([records[i].text for i in todo])
    out = np.zeros((len(records), embedder.info.dimension), dtype=np.float32)
    for row, i in enumerate(todo):
        out[i] = fresh[row]
    for i, r in enumerate(records):
        if r.text_hash in old:
            out[i] = old[r.text_hash]
    return out, len(todo)


def _with_stat(doc: DocumentRecord, size: int, mtime: float) -> DocumentRecord:
    return DocumentRecord(**{**doc.__dict__, "size": size, "mtime": mtime})


def _record_error(*, store: LanceStore, path: Path, doc_id: str, reason: str) -> FileOutcome:
    log.info("could not ingest %s: %s", path, reason)
    size, mtime = _stat_or_zero(path)
    # The old chunks of a file that became unreadable go: its content is unknown.
    store.remove_document(doc_id=doc_id)
    store.record_document(
        doc=DocumentRecord(
            doc_id=doc_id,
            path=str(path),
            size=size,
            mtime=mtime,
            content_hash="",
            status="error",
            error=reason,
            pages=None,
            chunks=0,
        )
    )
    return FileOutcome(status="error", reason=reason)


def _stat_or_zero(path: Path) -> tuple[int, float]:
    try:
        st = path.stat()
    except OSError:
        return 0, 0.0
    return st.st_size, st.st_mtime
