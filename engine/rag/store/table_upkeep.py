"""The store's tables kept in the shape its reads expect: the columns a table written by
an earlier version lacks, added where the table is opened, and the scalar indices that
point lookups and the file-type filter read.

A column is added in place, derived from the rows or left empty, so an index from an
earlier version opens without its files being read again. Kept apart from LanceStore,
which holds the connection and the write lock and says when these run (opening a table;
the index maintainer's scalar-index step).
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger(__name__)
# Columns with a scalar index once the table has rows: point lookups (chunk(),
# a document's rows) and the file-type filter then read an index, not the table.
_CHUNK_SCALAR_INDICES = {"chunk_id": "BTREE", "doc_id": "BTREE", "ext": "BITMAP"}
# SQL for the `ext` column of a store written before it existed: the lower-case
# extension with its dot, as `search.file_type` computes it for new rows.
_EXT_SQL = r"lower(regexp_replace(path, '^.*?(\.[^./\\]*)?$', '\1'))"


def with_document_columns(documents: Any) -> Any:
    """The documents table `documents`, given the columns added since it was written.
    Without the reader column its files count as read by reader 0, so the next scan
    reads them again."""
    if "reader" not in documents.schema.names:
        documents.add_columns({"reader": "CAST(0 AS INT)"})
    if "languages" not in documents.schema.names:
        # Unknown until the file is read again (READER_VERSION 3 detects them).
        documents.add_columns({"languages": "CAST('' AS STRING)"})
    return documents


def with_chunk_columns(table: Any, *, name: str) -> Any:
    """The chunks table `table` (named `name`), given the columns added since it was
    written."""
    if "ext" not in table.schema.names:
        # A store from before file-type filters: derive the column in place.
        log.info("adding the file-type column to %s", name)
        table.add_columns({"ext": _EXT_SQL})
    if "section" not in table.schema.names:
        # A store from before section titles: its chunks have none.
        log.info("adding the section column to %s", name)
        table.add_columns({"section": "CAST('' AS STRING)"})
    if "words" not in table.schema.names:
        # A store from before cut words: filled when its search needs them
        # (`LanceStore.refresh_fulltext_index`).
        log.info("adding the cut-words column to %s", name)
        table.add_columns({"words": "CAST('' AS STRING)"})
    return table


def ensure_scalar_indices(*, chunks: Any, pages: Any) -> None:
    """The scalar indices of the chunks table (None before there is an embedder) and
    of the pages table, each built once its table has rows."""
    from lancedb.index import Bitmap, BTree

    configs = {"BTREE": BTree, "BITMAP": Bitmap}
    wanted = [(chunks, col, kind) for col, kind in _CHUNK_SCALAR_INDICES.items()]
    wanted.append((pages, "page_key", "BTREE"))
    for table, column, kind in wanted:
        if table is None or table.count_rows() == 0:
            continue
        have = {tuple(getattr(i, "columns", [])) for i in table.list_indices()}
        if (column,) not in have:
            table.create_index(column, config=configs[kind](), replace=True)
