"""What the library routes read of the index: documents, the files that could not be
read, and a passage's page. The source route serves a passage only while its file's
path still lies in a watched folder with no symbolic link on its way (a folder
swapped for a link leads elsewhere now)."""

from __future__ import annotations

from collections.abc import Callable

from engine.rag.ingest.fspath import from_store
from engine.rag.ingest.safe_open import is_plain_path
from engine.rag.store.lance_store import LanceStore
from engine.wire import DocumentInfo, FileError, SourceView


def documents(*, store: LanceStore) -> list[DocumentInfo]:
    return [
        DocumentInfo(
            doc_id=d.doc_id,
            path=d.path,
            size=d.size,
            mtime=d.mtime,
            status=d.status,
            error=d.error,
            chunks=d.chunks,
            pages=d.pages,
        )
        for d in store.list_documents()
    ]


def errors(*, store: LanceStore) -> list[FileError]:
    return [
        FileError(path=d.path, reason=d.error or "unknown error")
        for d in store.list_documents()
        if d.status == "error"
    ]


def source(
    *, store: LanceStore, chunk_id: str, watched: Callable[[str], bool]
) -> SourceView | None:
    """A passage and its page; None when there is none, or when its path (as the
    store keeps it) is no longer in a watched folder (`watched`) or leads through a
    symbolic link now."""
    chunk = store.chunk(chunk_id=chunk_id)
    if chunk is None or not watched(chunk.path) or not is_plain_path(from_store(chunk.path)):
        return None
    page = store.page(doc_id=chunk.doc_id, page=chunk.page)
    doc = store.document_by_path(path=chunk.path)
    return SourceView(
        chunk_id=chunk_id,
        path=chunk.path,
        page=chunk.page,
        page_count=doc.pages if doc else None,
        page_text=page.text if page else chunk.text,
        char_start=chunk.char_start if page else 0,
        char_end=chunk.char_end if page else len(chunk.text),
    )
