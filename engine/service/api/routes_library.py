"""Watched folders, collections and search.

Adding a folder is the explicit grant: from then on requests may name paths
inside it (POST /v1/ingest), and nothing outside any watched folder.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from fastapi import APIRouter, HTTPException, Query

from engine.rag.ingest.fspath import from_store, to_store
from engine.rag.pipeline.answer_stream import citation_for
from engine.rag.store.records import SearchHit
from engine.service.api.bodies import FolderBody, SearchBody
from engine.service.core import Engine
from engine.wire import (
    CollectionInfo,
    FolderAdded,
    SearchResponse,
    WatchedFolder,
)

UNFILED = "(not in a watched folder)"


def library_router(*, engine: Engine) -> APIRouter:
    router = APIRouter(tags=["library"])

    @router.get("/v1/folders", response_model=dict[str, list[WatchedFolder]])
    def list_folders() -> dict[str, Any]:
        return {"folders": [_shown(f) for f in engine.library.folders()]}

    @router.post(
        "/v1/folders",
        response_model=FolderAdded,
        responses={400: {"description": "Not an existing folder, or too broad"}},
    )
    def add_folder(body: FolderBody) -> FolderAdded:
        if "\x00" in body.path:
            raise HTTPException(status_code=400, detail="a path cannot contain a NUL character")
        try:
            resolved = from_store(body.path).expanduser().resolve()
        except (OSError, RuntimeError) as e:
            raise HTTPException(status_code=400, detail=f"cannot resolve {body.path}: {e}") from e
        if resolved == Path(resolved.anchor):
            raise HTTPException(
                status_code=400, detail="a whole drive cannot be watched: choose a folder in it"
            )
        try:
            if body.ingest:
                folder, job = engine.add_folder(path=str(resolved), collection=body.collection)
                return FolderAdded(folder=_shown(folder), job=job.snapshot())
            folder = engine.watch_folder(path=str(resolved), collection=body.collection)
        except (FileNotFoundError, NotADirectoryError, PermissionError) as e:
            raise HTTPException(status_code=400, detail=to_store(str(e))) from e
        return FolderAdded(folder=_shown(folder))

    @router.delete(
        "/v1/folders",
        response_model=WatchedFolder,
        responses={404: {"description": "Not a watched folder"}},
    )
    def remove_folder(path: str = Query(min_length=1, max_length=4096)) -> WatchedFolder:
        """Forget a folder; its documents leave the index. The files are never touched."""
        try:
            removed = engine.remove_folder(path=str(from_store(path)))
        except (OSError, RuntimeError, ValueError) as e:
            raise HTTPException(status_code=400, detail=str(e)) from e
        if removed is None:
            raise HTTPException(status_code=404, detail=f"not a watched folder: {path}")
        return _shown(removed)

    @router.get("/v1/collections", response_model=dict[str, list[CollectionInfo]])
    def collections() -> dict[str, Any]:
        folders: dict[str, list[str]] = {}
        for folder in engine.library.folders():
            folders.setdefault(folder.collection, []).append(to_store(folder.path))
        docs: dict[str, int] = dict.fromkeys(folders, 0)
        chunks: dict[str, int] = dict.fromkeys(folders, 0)
        for doc in engine.documents():
            if doc.status != "indexed":
                continue
            owner = engine.library.folder_of(path=doc.path)
            name = owner.collection if owner is not None else UNFILED
            docs[name] = docs.get(name, 0) + 1
            chunks[name] = chunks.get(name, 0) + doc.chunks
        return {
            "collections": [
                CollectionInfo(
                    name=name,
                    folders=folders.get(name, []),
                    documents=docs[name],
                    chunks=chunks[name],
                )
                for name in sorted(docs)
            ]
        }

    @router.post("/v1/search", response_model=SearchResponse)
    def search(body: SearchBody) -> SearchResponse:
        """Passages that match the query, best first, without writing an answer."""
        query = body.query.strip()
        if not query:
            raise HTTPException(status_code=400, detail="the query is empty")
        wanted = body.k if body.collection is None else min(200, body.k * 8)
        hits = engine.retrieve(question=query, k=wanted)
        if body.collection is not None:
            hits = [h for h in hits if _collection(engine, h) == body.collection]
        return SearchResponse(
            query=query, hits=[citation_for(i + 1, h) for i, h in enumerate(hits[: body.k])]
        )

    return router


def _shown(folder: WatchedFolder) -> WatchedFolder:
    """A folder as the API shows every path: a name that is not UTF-8 in the store's
    encoding (engine/rag/ingest/fspath.py); requests give paths back in it."""
    return dataclasses.replace(folder, path=to_store(folder.path))


def _collection(engine: Engine, hit: SearchHit) -> str | None:
    folder = engine.library.folder_of(path=hit.chunk.path)
    return folder.collection if folder is not None else None
