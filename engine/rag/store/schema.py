"""The store's tables as Arrow schemas, and rows read back as records."""

from __future__ import annotations

import re
from typing import Any

import pyarrow as pa

from engine.rag.store.records import ChunkRecord, DocumentRecord

DOCUMENTS_SCHEMA = pa.schema(
    [
        pa.field("doc_id", pa.string()),
        pa.field("path", pa.string()),
        pa.field("size", pa.int64()),
        pa.field("mtime", pa.float64()),
        pa.field("content_hash", pa.string()),
        pa.field("status", pa.string()),
        pa.field("error", pa.string()),
        pa.field("pages", pa.int32()),
        pa.field("chunks", pa.int32()),
        pa.field("reader", pa.int32()),
        pa.field("languages", pa.string()),
    ]
)
PAGES_SCHEMA = pa.schema(
    [
        pa.field("page_key", pa.string()),
        pa.field("doc_id", pa.string()),
        pa.field("page", pa.int32()),
        pa.field("text", pa.string()),
    ]
)


def chunks_schema(dimension: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("chunk_id", pa.string()),
            pa.field("doc_id", pa.string()),
            pa.field("path", pa.string()),
            pa.field("ordinal", pa.int32()),
            pa.field("page", pa.int32()),
            pa.field("char_start", pa.int32()),
            pa.field("char_end", pa.int32()),
            pa.field("text", pa.string()),
            pa.field("text_hash", pa.string()),
            pa.field("vector", pa.list_(pa.float32(), dimension)),
            pa.field("ext", pa.string()),
            pa.field("section", pa.string()),
            # The text with each word cut short, for the full-text search of a
            # collection of several languages (fulltext.py, `cut_words`).
            pa.field("words", pa.string()),
        ]
    )


def slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").lower()[:40] or "embedder"


def document_of(r: dict[str, Any]) -> DocumentRecord:
    """A documents row as a record; a row written without a reader (by a program that
    does not know the column) counts as read by reader 0."""
    fields = {f: r.get(f) for f in DocumentRecord.__dataclass_fields__}
    return DocumentRecord(
        **{**fields, "reader": fields["reader"] or 0, "languages": fields["languages"] or ""}
    )


def chunk_of(r: dict[str, Any]) -> ChunkRecord:
    return ChunkRecord(**{f: r[f] for f in ChunkRecord.__dataclass_fields__})
