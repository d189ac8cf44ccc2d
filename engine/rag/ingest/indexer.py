"""One file into the store, in steps a job can pipeline:

1. `triage`: stat and content hash against the journal. Unchanged files end
   here (no parsing, no embedding); a file whose content an indexed document
   already has (a rename, a copy) gets that document's chunks and vectors.
2. parsing, by whoever runs the parser (a sandboxed child in a job).
3. `prepare`: chunk; find which chunks need vectors (text not seen before).
4. `commit_group`: swap a group of documents' pages and chunks in, then their
   journal rows (four LanceDB commits for the whole group).

`index_file` runs the four in-process for one file. Bad files never raise: the
outcome carries the reason, and the journal records it.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import LinkedPathError, ParseError
from engine.rag.ingest.chunker import chunk_document
from engine.rag.ingest.discovery import ENTRY_REASONS, IgnoreRules
from engine.rag.ingest.embedder import Embedder
from engine.rag.ingest.fspath import to_store
from engine.rag.ingest.journal import Journal, copy_document
from engine.rag.ingest.parsers import ParsedDocument, parse_file
from engine.rag.ingest.safe_open import SWAPPED, open_listed
from engine.rag.store.doc_writes import is_disk_full, is_disk_full_text
from engine.rag.store.lance_store import LanceStore
from engine.rag.store.records import (
    ChunkRecord,
    DocumentContent,
    DocumentRecord,
    EmbeddedChunks,
    PageRecord,
    embedded_hash,
    embedded_text,
)

log = logging.getLogger(__name__)
# What a file reads as: raised whenever parsing, text clean-up or chunking changes
# the text or chunks a file gives. A file read by an older reader is read again at
# the next scan (start-up's rescan), its unchanged chunks keeping their vectors, so
# an upgrade's better reading reaches files that did not change.
# 2: HTML sections where the headings stand (not in the page's contents list), .odt
# files pandoc wrote (read as empty before), LibreOffice EPUB sections.
READER_VERSION = 2
CHANGED_WHILE_READ = "the file kept changing while it was being read"
_PATH_REASONS = ENTRY_REASONS | {SWAPPED}


@dataclass(frozen=True, kw_only=True)
class ChunkingParams:
    max_tokens: int = 200
    overlap_tokens: int = 40


@dataclass(frozen=True, kw_only=True)
class FileOutcome:
    # "indexed" | "unchanged" | "copied" (a moved/copied file: its vectors reused)
    # | "changed" (modified while read: try again) | "error"
    status: str
    chunks: int = 0
    embedded: int = 0  # chunks whose vectors were computed (not reused)
    pages: int = 0
    reason: str | None = None


@dataclass(frozen=True, kw_only=True)
class FileStat:
    size: int
    mtime: float
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStat:
        st = path.stat()
        return cls(size=st.st_size, mtime=st.st_mtime, mtime_ns=st.st_mtime_ns)


@dataclass(frozen=True, kw_only=True)
class ToParse:
    """A file that must be parsed: new, or its content changed."""

    path: Path
    doc_id: str
    stat: FileStat
    digest: str
    known: DocumentRecord | None


@dataclass(frozen=True, kw_only=True)
class Prepared:
    """A parsed and chunked file; `vectors` rows listed in `todo` still need embedding."""

    plan: ToParse
    doc: DocumentRecord
    pages: list[PageRecord]
    records: list[ChunkRecord]
    vectors: np.ndarray
    todo: list[int]
    notes: tuple[str, ...] = ()  # the parser's notes about the file


def doc_id_for(path: Path) -> str:
    return hashlib.sha1(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:20]


def content_hash(path: Path) -> str:
    """The file's SHA-256, read through `open_listed`: no symbolic link on its way."""
    digest = hashlib.sha256()
    with open_listed(path) as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def triage(
    *, path: Path, store: LanceStore, journal: Journal, rules: IgnoreRules
) -> FileOutcome | ToParse:
    doc_id = doc_id_for(path)
    key = to_store(path)
    try:
        stat = FileStat.of(path)
        if not path.is_file():
            raise ParseError("not a regular file")
        too_large = rules.too_large(stat.size)
        if too_large:
            raise ParseError(too_large)
        known = journal.get(path=key)
        current = known is not None and known.reader >= READER_VERSION
        if known and current and (known.size, known.mtime) == (stat.size, stat.mtime):
            if known.status == "indexed":
                return FileOutcome(status="unchanged", chunks=known.chunks)
            if not read_again(known.error):
                return FileOutcome(status="error", reason=known.error)
        digest = content_hash(path)
        if known and current and known.content_hash == digest and known.status == "indexed":
            # Touched but not changed: remember the new mtime, embed nothing.
            journal.touch(dataclasses.replace(known, size=stat.size, mtime=stat.mtime))
            return FileOutcome(status="unchanged", chunks=known.chunks)
        source = journal.with_content(digest=digest)
        if source is not None and source.doc_id != doc_id and source.reader >= READER_VERSION:
            target = _document(doc_id=doc_id, path=path, stat=stat, digest=digest)
            copied = copy_document(store=store, source=source, target=target)
            if copied:
                journal.remember(dataclasses.replace(target, pages=source.pages, chunks=copied))
                return FileOutcome(status="copied", chunks=copied, pages=source.pages or 0)
        return ToParse(path=path, doc_id=doc_id, stat=stat, digest=digest, known=known)
    except (ParseError, OSError) as e:
        if is_disk_full(e):
            raise  # the index's disk (a copy's rows): the job stops; nothing is the file's fault
        return record_error(store=store, journal=journal, path=path, reason=_reason(e))


def read_again(reason: str | None) -> bool:
    """Whether a file recorded with this error is read again although it did not
    change: the error was the disk's (an older version recorded "the disk is full"
    as the file's state), or the path's nature (a link, a folder swapped for one),
    which can change while the file's size and time stay."""
    return reason is not None and (is_disk_full_text(reason) or reason in _PATH_REASONS)


def prepare(
    *,
    plan: ToParse,
    parsed: ParsedDocument,
    store: LanceStore,
    tokenizer: object,
    dimension: int,
    params: ChunkingParams,
) -> Prepared | FileOutcome:
    """Chunk a parsed file and reuse the vectors of chunks whose text the
    document already had. A file that changed since triage is not used: what
    was parsed may be half the old and half the new content."""
    try:
        if FileStat.of(plan.path) != plan.stat:
            return FileOutcome(status="changed", reason=CHANGED_WHILE_READ)
    except OSError:
        return FileOutcome(status="changed", reason=CHANGED_WHILE_READ)
    chunks = chunk_document(
        doc=parsed,
        tokenizer=tokenizer,
        max_tokens=params.max_tokens,
        overlap_tokens=params.overlap_tokens,
    )
    if not chunks:
        return FileOutcome(status="error", reason="no text found in the file")
    key = to_store(plan.path)
    records = [
        ChunkRecord(
            chunk_id=f"{plan.doc_id}:{c.ordinal}",
            doc_id=plan.doc_id,
            path=key,
            ordinal=c.ordinal,
            page=c.page,
            char_start=c.char_start,
            char_end=c.char_end,
            text=c.text,
            text_hash=embedded_hash(section=c.section, text=c.text),
            section=c.section,
        )
        for c in chunks
    ]
    # A file new to the journal has no rows to reuse (what a crash left of
    # one is removed at the engine's start): no lookup per new file.
    old = store.vectors_by_text_hash(doc_id=plan.doc_id) if plan.known is not None else {}
    vectors = np.zeros((len(records), dimension), dtype=np.float32)
    todo: list[int] = []
    for i, r in enumerate(records):
        if r.text_hash in old:
            vectors[i] = old[r.text_hash]
        else:
            todo.append(i)
    notes = tuple(parsed.notes)
    doc = dataclasses.replace(
        _document(doc_id=plan.doc_id, path=plan.path, stat=plan.stat, digest=plan.digest),
        pages=parsed.page_count,
        chunks=len(records),
        # An indexed document's `error` carries the notes about its reading:
        # the library shows them with the document.
        error="; ".join(notes) or None,
    )
    pages = [PageRecord(doc_id=plan.doc_id, page=p.number, text=p.text) for p in parsed.pages]
    return Prepared(
        plan=plan, doc=doc, pages=pages, records=records, vectors=vectors, todo=todo, notes=notes
    )


def commit_group(
    *, group: Sequence[Prepared], store: LanceStore, journal: Journal
) -> list[FileOutcome]:
    """Swap a group of embedded documents in (doc_writes.replace_documents):
    journal rows last, and a changed file's old row loses its hash first, so
    that a crash midway leaves rows that cannot pass for the content now stored."""
    store.replace_documents(
        items=[
            DocumentContent(
                doc=p.doc,
                pages=p.pages,
                embedded=EmbeddedChunks(chunks=p.records, vectors=p.vectors),
                previous=p.plan.known,
            )
            for p in group
        ]
    )
    for p in group:
        journal.remember(p.doc)
    return [
        FileOutcome(
            status="indexed", chunks=len(p.records), embedded=len(p.todo), pages=p.doc.pages or 1
        )
        for p in group
    ]


def commit(*, prepared: Prepared, store: LanceStore, journal: Journal) -> FileOutcome:
    """One document: `commit_group` of one."""
    (outcome,) = commit_group(group=[prepared], store=store, journal=journal)
    return outcome


def record_error(*, store: LanceStore, journal: Journal, path: Path, reason: str) -> FileOutcome:
    log.info("could not ingest %s: %s", path, reason)
    if is_disk_full_text(reason):
        # A disk that was full when the file was read (the parser's temporary files)
        # is not the file's state: listed by the job, no row, read again next time.
        return FileOutcome(status="error", reason=reason)
    doc_id = doc_id_for(path)
    size, mtime = _stat_or_zero(path)
    # The old chunks of a file that became unreadable go: its content is unknown.
    store.remove_document(doc_id=doc_id)
    doc = DocumentRecord(
        doc_id=doc_id,
        path=to_store(path),
        size=size,
        mtime=mtime,
        content_hash="",
        status="error",
        error=reason,
        pages=None,
        chunks=0,
        reader=READER_VERSION,
    )
    store.record_document(doc=doc)
    journal.remember(doc)
    return FileOutcome(status="error", reason=reason)


def index_file(
    *,
    path: Path,
    store: LanceStore,
    embedder: Embedder,
    params: ChunkingParams,
    journal: Journal | None = None,
    rules: IgnoreRules | None = None,
    parse: Callable[..., ParsedDocument] = parse_file,
) -> FileOutcome:
    """All steps for one file, parsing in this process (tests, tools)."""
    journal = journal or Journal(store=store)
    step = triage(path=path, store=store, journal=journal, rules=rules or IgnoreRules())
    journal.flush()
    if isinstance(step, FileOutcome):
        return step
    try:
        parsed = parse(path=path)
    except ParseError as e:
        return record_error(store=store, journal=journal, path=path, reason=e.reason)
    ready = prepare(
        plan=step,
        parsed=parsed,
        store=store,
        tokenizer=embedder.tokenizer,
        dimension=embedder.info.dimension,
        params=params,
    )
    if isinstance(ready, FileOutcome):
        if ready.status == "changed" and not path.exists():
            return record_error(store=store, journal=journal, path=path, reason=_GONE)
        if ready.status == "error":
            return record_error(store=store, journal=journal, path=path, reason=ready.reason or "")
        return ready
    embed_into(prepared=[ready], embedder=embedder)
    return commit(prepared=ready, store=store, journal=journal)


def embed_into(*, prepared: list[Prepared], embedder: Embedder) -> int:
    """The new chunks of several files, embedded as background work (a question
    goes first between batches); returns how many."""
    rows = [(p, i) for p in prepared for i in p.todo]
    embed_rows(rows=rows, embedder=embedder)
    return len(rows)


def by_length(
    *, rows: Sequence[tuple[Prepared, int]], embedder: Embedder
) -> list[tuple[Prepared, int]]:
    """These (file, chunk row) pairs, shortest embedded text first (in word pieces)."""
    texts = [embedded_text(section=p.records[i].section, text=p.records[i].text) for p, i in rows]
    counts = embedder.piece_counts(texts)
    return [rows[k] for k in sorted(range(len(rows)), key=counts.__getitem__)]


def embed_rows(*, rows: Sequence[tuple[Prepared, int]], embedder: Embedder) -> None:
    """Vectors for these (file, chunk row) pairs, in one background call."""
    if not rows:
        return
    texts = [embedded_text(section=p.records[i].section, text=p.records[i].text) for p, i in rows]
    fresh = embedder.embed(texts, background=True)
    for (p, i), vector in zip(rows, fresh, strict=True):
        p.vectors[i] = vector


_GONE = "the file disappeared while it was being read"


def _reason(e: BaseException) -> str:
    if isinstance(e, ParseError):
        return e.reason
    if isinstance(e, LinkedPathError):
        return SWAPPED
    if isinstance(e, FileNotFoundError):
        return _GONE
    if isinstance(e, PermissionError):
        return "permission denied"
    if isinstance(e, OSError) and e.errno == errno.ELOOP:
        return "symbolic link loop"
    if isinstance(e, OSError):
        return f"could not read the file: {e.strerror or e}"
    return str(e)


def _document(*, doc_id: str, path: Path, stat: FileStat, digest: str) -> DocumentRecord:
    return DocumentRecord(
        doc_id=doc_id,
        path=to_store(path),
        size=stat.size,
        mtime=stat.mtime,
        content_hash=digest,
        status="indexed",
        error=None,
        pages=None,
        chunks=0,
        reader=READER_VERSION,
    )


def _stat_or_zero(path: Path) -> tuple[int, float]:
    try:
        st = os.stat(path)
    except OSError:
        return 0, 0.0
    return st.st_size, st.st_mtime
