"""Which documents a per-document question covers: a collection, a folder, or one file.

A scope names a collection (the watched folders filed under that name) or a path in
a watched folder: a folder stands for every document under it, a file for itself.
Only documents read into the index count; a file that failed to parse has no text
to answer from (it stays in the library's error list).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from engine.errors import RagdollError
from engine.rag.ingest.fspath import from_store, to_store
from engine.rag.store.records import DocumentRecord
from engine.rag.store.search import folder_prefix
from engine.wire import WatchedFolder


class ScopeError(RagdollError, ValueError):
    """The scope names no collection and no path in a watched folder, or holds no document."""


def documents_in(
    *,
    scope: str,
    folders: Sequence[WatchedFolder],
    documents: Sequence[DocumentRecord],
) -> list[DocumentRecord]:
    """The indexed documents of `scope`, by path. Raises ScopeError."""
    scope = scope.strip()
    if not scope:
        raise ScopeError("name a collection, a folder or a file to ask each document of")
    indexed = [d for d in documents if d.status == "indexed"]
    named = [f for f in folders if f.collection == scope]
    if named:
        prefixes = [folder_prefix(to_store(f.path)) for f in named]
        found = [d for d in indexed if d.path.startswith(tuple(prefixes))]
        what = f"the collection {scope!r}"
    else:
        path = _inside(scope=scope, folders=folders)
        key = to_store(path)
        found = [d for d in indexed if d.path == key]
        if not found:
            found = [d for d in indexed if d.path.startswith(folder_prefix(key))]
        what = str(path)
    if not found:
        raise ScopeError(f"{what} holds no indexed document yet")
    return sorted(found, key=lambda d: d.path)


def _inside(*, scope: str, folders: Sequence[WatchedFolder]) -> Path:
    try:
        path = from_store(scope).expanduser().resolve()
    except (OSError, RuntimeError) as e:
        raise ScopeError(f"cannot read the path {scope!r}: {e}") from e
    for f in folders:
        if path == Path(f.path) or path.is_relative_to(f.path):
            return path
    names = sorted({f.collection for f in folders})
    known = f" (collections: {', '.join(names)})" if names else ""
    raise ScopeError(f"{scope!r} is neither a collection{known} nor a path in a watched folder")
