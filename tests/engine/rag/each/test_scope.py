from __future__ import annotations

from pathlib import Path

import pytest

from engine.rag.each.scope import ScopeError, documents_in
from engine.rag.store.records import DocumentRecord
from engine.wire import WatchedFolder


def _doc(path: Path, *, status: str = "indexed") -> DocumentRecord:
    return DocumentRecord(
        doc_id=path.name,
        path=str(path),
        size=1,
        mtime=1.0,
        content_hash="h",
        status=status,
        error=None,
        pages=1,
        chunks=1,
    )


@pytest.fixture
def library(tmp_path: Path) -> tuple[list[WatchedFolder], list[DocumentRecord]]:
    for name in ("papers", "papers2", "manuals"):
        (tmp_path / name).mkdir()
    folders = [
        WatchedFolder(path=str(tmp_path / "papers"), collection="work"),
        WatchedFolder(path=str(tmp_path / "papers2"), collection="work"),
        WatchedFolder(path=str(tmp_path / "manuals"), collection="home"),
    ]
    docs = [
        _doc(tmp_path / "papers" / "b.pdf"),
        _doc(tmp_path / "papers" / "a.pdf"),
        _doc(tmp_path / "papers" / "sub" / "c.html"),
        _doc(tmp_path / "papers" / "broken.pdf", status="error"),
        _doc(tmp_path / "papers2" / "d.pdf"),
        _doc(tmp_path / "manuals" / "e.txt"),
    ]
    return folders, docs


def _names(found: list[DocumentRecord]) -> list[str]:
    return [Path(d.path).name for d in found]


def test_a_collection_is_every_indexed_document_of_its_folders(library, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folders, docs = library
    found = documents_in(scope="work", folders=folders, documents=docs)
    assert _names(found) == ["a.pdf", "b.pdf", "c.html", "d.pdf"]  # by path; no failed file


def test_a_folder_is_what_lies_under_it_and_a_file_itself(library, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folders, docs = library
    # "papers" must not take in "papers2", whose name it begins.
    assert _names(
        documents_in(scope=str(tmp_path / "papers"), folders=folders, documents=docs)
    ) == [
        "a.pdf",
        "b.pdf",
        "c.html",
    ]
    one = documents_in(scope=str(tmp_path / "papers" / "b.pdf"), folders=folders, documents=docs)
    assert _names(one) == ["b.pdf"]


def test_what_names_nothing_is_refused_clearly(library, tmp_path) -> None:  # type: ignore[no-untyped-def]
    folders, docs = library
    with pytest.raises(ScopeError, match=r"neither a collection \(collections: home, work\)"):
        documents_in(scope=str(tmp_path / "elsewhere"), folders=folders, documents=docs)
    with pytest.raises(ScopeError, match="no indexed document"):
        documents_in(scope=str(tmp_path / "papers" / "broken.pdf"), folders=folders, documents=docs)
    with pytest.raises(ScopeError, match="name a collection"):
        documents_in(scope="  ", folders=folders, documents=docs)
