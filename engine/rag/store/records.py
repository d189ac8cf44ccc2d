"""Rows of the store, as the rest of the engine sees them."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True, kw_only=True)
class ChunkRecord:
    chunk_id: str
    doc_id: str
    path: str
    ordinal: int
    page: int | None
    char_start: int
    char_end: int
    text: str
    text_hash: str
    # Title of the chunk's section (PDF outline, document headings); "" if none.
    section: str = ""


def embedded_text(*, section: str, text: str) -> str:
    """What a chunk is embedded as: its section's title over its text. The title
    puts a chunk whose own words never name its subject near the questions that
    do (docs/benchmarks-history.md, "Section titles in the embedded text"); the stored,
    shown and quoted text stays the chunk's own. Ingestion and the embedder
    switch's re-embedding both embed this, so one index holds one kind of vector."""
    title = section.strip()
    return f"{title}\n{text}" if title else text


def embedded_hash(*, section: str, text: str) -> str:
    """`text_hash`: of the embedded text, so a chunk is re-embedded when its
    section changes and reused when neither did. Untitled chunks hash as their
    text alone, as before titles were embedded."""
    data = embedded_text(section=section, text=text).encode("utf-8", "surrogatepass")
    return hashlib.sha1(data).hexdigest()


@dataclass(frozen=True, kw_only=True)
class DocumentRecord:
    doc_id: str
    path: str
    size: int
    mtime: float
    content_hash: str
    status: str  # "indexed" | "error"
    error: str | None
    pages: int | None
    chunks: int
    # The READER_VERSION (engine/rag/ingest/indexer.py) that read the file; 0: read
    # before versions were kept.
    reader: int = 0
    # The languages its text is written in (ISO 639-1, most text first, comma-separated;
    # engine/rag/ingest/language.py); "" when unknown (read before they were detected).
    languages: str = ""


@dataclass(frozen=True, kw_only=True)
class PageRecord:
    doc_id: str
    page: int | None
    text: str


@dataclass(frozen=True, kw_only=True)
class SearchHit:
    chunk: ChunkRecord
    similarity: float  # cosine similarity of the chunk to the question
    fused: float  # reciprocal-rank fusion of the vector and full-text ranks


@dataclass(frozen=True, kw_only=True)
class IndexMeta:
    embedder_id: str
    dimension: int
    chunks_table: str


@dataclass(frozen=True, kw_only=True)
class EmbeddedChunks:
    """A document's new chunks with their vectors, ready to replace the old."""

    chunks: list[ChunkRecord]
    vectors: np.ndarray  # (len(chunks), dimension) float32, L2-normalised


@dataclass(frozen=True, kw_only=True)
class DocumentContent:
    """A document's new journal row, pages and chunks, for a group write."""

    doc: DocumentRecord
    pages: list[PageRecord]
    embedded: EmbeddedChunks
    # Its row before, when the file changed: the row loses its content hash
    # first, so that a crash mid-write leaves a row that cannot pass for the new content.
    previous: DocumentRecord | None = None


@dataclass(frozen=True, kw_only=True)
class SearchFilters:
    """Which chunks a search may return. Empty means no restriction.

    `folders` are path prefixes (a folder and everything under it); `types` are
    file extensions, with or without the dot, in any case ("pdf", ".PDF"); `paths`
    are whole file paths as the store keeps them (one document's question)."""

    folders: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not self.folders and not self.types and not self.paths


@dataclass(frozen=True, kw_only=True)
class SearchResult:
    """One question's hits, best first, and whether they are too weak to use."""

    hits: tuple[SearchHit, ...]
    best_similarity: float  # highest cosine similarity among the hits; -1.0 when none
    not_found: bool  # nothing in the documents relates to the question
    # How much a conversation's earlier turn weighed in the ranking, 0 to 1 (1 for a
    # follow-up; engine/rag/answer/conversation.py `lean` for a question judged standalone).
    leaned: float = 0.0
    # The earlier turn moved the hits of a question judged standalone: they are not
    # its own search's (the window then shows what was searched, as for a follow-up).
    history_changed: bool = False
