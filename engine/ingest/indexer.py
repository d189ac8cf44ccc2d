"""One file into the store, in steps a job can pipeline:

1. `triage`: stat and content hash against the journal. Unchanged files end
   here (no parsing, no embedding); a file whose content an indexed document
   already has (a rename, a copy) gets that document's chunks and vectors.
2. parsing, by whoever runs the parser (a sandboxed child in a job).
3. `prepare`: chunk; find which chunks need vectors (text not seen before).
4. `commit`: swap the document's pages and chunks in, then its journal row.

`index_file` runs the four in-process for one file. Bad files never raise: the
outcome carries the reason, and the journal records it.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import logging
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from engine.errors import ParseError
from engine.ingest.chunker import chunk_document
from engine.ingest.discovery import IgnoreRules
from engine.ingest.embedder import Embedder
from engine.ingest.fspath import to_store
from engine.ingest.journal import Journal, copy_document
from engine.ingest.parsers import ParsedDocument, parse_file
from engine.store.lance_store import LanceStore
from engine.store.records import ChunkRecord, DocumentRecord, EmbeddedChunks, PageRecord

log = logging.getLogger(__name__)
CHANGED_WHILE_READ = "the file kept changing while it was being read"


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
    # What is embedded for each record: its text under its document's title and its
    # section's (`embedding_text`); the stored text stays the page's exact span.
    embed_texts: list[str] = dataclasses.field(default_factory=list)


def doc_id_for(path: Path) -> str:
    return hashlib.sha1(str(path).encode("utf-8", "surrogateescape")).hexdigest()[:20]


def content_hash(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
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
        if known and (known.size, known.mtime) == (stat.size, stat.mtime):
            if known.status == "indexed":
                return FileOutcome(status="unchanged", chunks=known.chunks)
            return FileOutcome(status="error", reason=known.error)
        digest = content_hash(path)
        if known and known.content_hash == digest and known.status == "indexed":
            # Touched but not changed: remember the new mtime, embed nothing.
            journal.touch(dataclasses.replace(known, size=stat.size, mtime=stat.mtime))
            return FileOutcome(status="unchanged", chunks=known.chunks)
        source = journal.with_content(digest=digest)
        if source is not None and source.doc_id != doc_id:
            target = _document(doc_id=doc_id, path=path, stat=stat, digest=digest)
            copied = copy_document(store=store, source=source, target=target)
            if copied:
                journal.remember(dataclasses.replace(target, pages=source.pages, chunks=copied))
                return FileOutcome(status="copied", chunks=copied, pages=source.pages or 0)
        return ToParse(path=path, doc_id=doc_id, stat=stat, digest=digest, known=known)
    except (ParseError, OSError) as e:
        return record_error(store=store, journal=journal, path=path, reason=_reason(e))


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
    title = getattr(parsed, "title", None) or readable_title(plan.path)
    embed_texts = [
        embedding_text(title=title, section=getattr(c, "section", None), text=c.text)
        for c in chunks
    ]
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
            # Of the embedded text: a vector is reused only for the very text it embeds.
            text_hash=hashlib.sha1(t.encode("utf-8", "surrogatepass")).hexdigest(),
        )
        for c, t in zip(chunks, embed_texts, strict=True)
    ]
    # Also after a crash that left this document's new chunks without their
    # journal row: those vectors are reused, not recomputed.
    old = store.vectors_by_text_hash(doc_id=plan.doc_id)
    vectors = np.zeros((len(records), dimension), dtype=np.float32)
    todo: list[int] = []
    for i, r in enumerate(records):
        if r.text_hash in old:
            vectors[i] = old[r.text_hash]
        else:
            todo.append(i)
    doc = dataclasses.replace(
        _document(doc_id=plan.doc_id, path=plan.path, stat=plan.stat, digest=plan.digest),
        pages=parsed.page_count,
        chunks=len(records),
    )
    pages = [PageRecord(doc_id=plan.doc_id, page=p.number, text=p.text) for p in parsed.pages]
    return Prepared(
        plan=plan,
        doc=doc,
        pages=pages,
        records=records,
        vectors=vectors,
        todo=todo,
        embed_texts=embed_texts,
    )


def readable_title(path: Path) -> str:
    """A document's title from its file name when it names none itself:
    "debian-reference.pdf" -> "debian reference"."""
    # A name that is not valid UTF-8 arrives with surrogate escapes: the tokenizer
    # refuses those, so the title shows the undecodable bytes as U+FFFD.
    stem = path.stem.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    return " ".join(w for w in re.split(r"[-_.\s]+", stem) if w) or "document"


def embedding_text(*, title: str, section: str | None, text: str) -> str:
    """The chunk as the embedder reads it: under its document's title and its section's,
    so that a passage saying "the option" is found by a question naming the program."""
    head = f"{title} — {section}" if section else title
    return f"{head}\n{text}" if head else text


def commit(*, prepared: Prepared, store: LanceStore, journal: Journal) -> FileOutcome:
    """Swap the document in. Its journal row is written last; a changed file's
    old row loses its hash first, so that a crash between the two commits
    leaves a row that cannot pass for the content now stored."""
    known = prepared.plan.known
    if known is not None and known.content_hash:
        store.record_document(doc=dataclasses.replace(known, content_hash=""))
    store.replace_document(
        doc=prepared.doc,
        pages=prepared.pages,
        embedded=EmbeddedChunks(chunks=prepared.records, vectors=prepared.vectors),
    )
    journal.remember(prepared.doc)
    return FileOutcome(
        status="indexed",
        chunks=len(prepared.records),
        embedded=len(prepared.todo),
        pages=prepared.doc.pages or 1,
    )


def record_error(*, store: LanceStore, journal: Journal, path: Path, reason: str) -> FileOutcome:
    log.info("could not ingest %s: %s", path, reason)
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
    """One embedding call for the new chunks of several files; returns how many."""
    texts = [
        p.embed_texts[i] if p.embed_texts else p.records[i].text for p in prepared for i in p.todo
    ]
    fresh = embedder.embed(texts)
    row = 0
    for p in prepared:
        for i in p.todo:
            p.vectors[i] = fresh[row]
            row += 1
    return len(texts)


_GONE = "the file disappeared while it was being read"


def _reason(e: BaseException) -> str:
    if isinstance(e, ParseError):
        return e.reason
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
    )


def _stat_or_zero(path: Path) -> tuple[int, float]:
    try:
        st = os.stat(path)
    except OSError:
        return 0, 0.0
    return st.st_size, st.st_mtime
