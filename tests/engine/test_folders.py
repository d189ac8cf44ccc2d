from pathlib import Path

import pytest

from engine.service.folders import FolderRegistry


def test_added_folders_persist_and_confine_paths(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    (docs / "sub").mkdir(parents=True)
    (tmp_path / "elsewhere").mkdir()
    registry = FolderRegistry(file=tmp_path / "folders.json")
    added = registry.add(path=docs, collection="work")
    assert registry.add(path=docs / "sub" / "..") == added  # idempotent after resolving
    reopened = FolderRegistry(file=tmp_path / "folders.json")
    assert reopened.list() == [added]
    assert reopened.containing(path=docs / "sub" / "a.pdf") == added
    assert reopened.containing(path=docs / ".." / "elsewhere" / "a.pdf") is None
    assert reopened.containing(path=tmp_path / "docs-other" / "a.pdf") is None


def test_a_symlink_out_of_a_folder_is_not_inside_it(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    secret = tmp_path / "secret.txt"
    secret.write_text("x")
    (docs / "link.txt").symlink_to(secret)
    registry = FolderRegistry(file=tmp_path / "folders.json")
    registry.add(path=docs)
    assert registry.containing(path=docs / "link.txt") is None


def test_remove_and_bad_input(tmp_path: Path) -> None:
    registry = FolderRegistry(file=tmp_path / "folders.json")
    with pytest.raises(FileNotFoundError):
        registry.add(path=tmp_path / "missing")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(NotADirectoryError):
        registry.add(path=tmp_path / "f.txt")
    registry.add(path=tmp_path)
    assert registry.remove(path=tmp_path) is not None
    assert registry.remove(path=tmp_path) is None
    assert registry.list() == []


def test_a_damaged_file_is_kept_aside(tmp_path: Path) -> None:
    file = tmp_path / "folders.json"
    file.write_text("{not json")
    assert FolderRegistry(file=file).list() == []
    assert (tmp_path / "folders.broken").exists()


def test_removing_a_folder_removes_its_documents_and_keeps_its_files(tmp_path: Path) -> None:
    from engine.paths import resolve_paths
    from engine.service.core import Engine

    kept, dropped = tmp_path / "kept", tmp_path / "dropped"
    for folder in (kept, dropped):
        folder.mkdir()
        (folder / "note.txt").write_text(f"The {folder.name} folder holds one short note.")
    engine = Engine(
        paths=resolve_paths(env={"RAGDOLL_HOME": str(tmp_path / "home")}), warm_up=False
    )
    try:
        for folder in (kept, dropped):
            _, job = engine.add_folder(path=str(folder))
            version = 0
            while job.snapshot().state not in ("done", "failed", "cancelled"):
                version, _ = job.wait_next(after=version, timeout_s=1.0)
        assert len(engine.documents()) == 2
        assert engine.remove_folder(path=str(dropped)) is not None
        assert [Path(d.path).parent for d in engine.documents()] == [kept]
        assert (dropped / "note.txt").exists()
        assert [f.path for f in engine.folders.list()] == [str(kept)]
    finally:
        engine.close()
