from __future__ import annotations

import os
from pathlib import Path

from engine.rag.ingest.discovery import discover

SUFFIXES = frozenset({".pdf", ".txt", ".md"})


def test_walks_folders_skipping_hidden_locks_and_other_types(tmp_path: Path) -> None:
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    (tmp_path / ".hidden").mkdir()
    for name in (
        "a.txt",
        "sub/b.md",
        "sub/deeper/c.PDF",
        ".hidden/d.txt",
        "~$lock.txt",
        ".~lock.e.txt#",
        "notes.txt~",
        "image.png",
        "sub/.secret.md",
    ):
        (tmp_path / name).write_text("x")
    found = discover(paths=[str(tmp_path)], suffixes=SUFFIXES)
    names = sorted(p.relative_to(tmp_path).as_posix() for p in found.files)
    assert names == ["a.txt", "sub/b.md", "sub/deeper/c.PDF"]
    assert found.errors == []
    assert found.folders == [tmp_path.resolve()]


def test_missing_and_unsupported_paths_are_errors_not_crashes(tmp_path: Path) -> None:
    (tmp_path / "x.png").write_text("x")
    found = discover(paths=[str(tmp_path / "gone.pdf"), str(tmp_path / "x.png")], suffixes=SUFFIXES)
    assert found.files == []
    reasons = sorted(e.reason for e in found.errors)
    assert reasons == ["not found", "unsupported file type .png"]


def test_symlink_loop_terminates_and_duplicates_collapse(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.txt").write_text("x")
    os.symlink(tmp_path, tmp_path / "docs" / "loop")
    os.symlink(tmp_path / "docs" / "a.txt", tmp_path / "docs" / "alias.txt")
    found = discover(paths=[str(tmp_path), str(tmp_path / "docs" / "a.txt")], suffixes=SUFFIXES)
    assert [p.name for p in found.files] == ["a.txt"]


def test_unreadable_folder_is_reported(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "ok.txt").write_text("x")

    def fake_walk(top, onerror=None, followlinks=False):  # type: ignore[no-untyped-def]
        onerror(PermissionError(13, "Permission denied", str(tmp_path / "locked")))
        yield str(tmp_path), [], ["ok.txt"]

    monkeypatch.setattr(os, "walk", fake_walk)
    found = discover(paths=[str(tmp_path)], suffixes=SUFFIXES)
    assert [p.name for p in found.files] == ["ok.txt"]
    assert found.errors[0].path.endswith("locked")
    assert "Permission denied" in found.errors[0].reason


def test_one_set_of_rules_for_scans_and_the_watcher(tmp_path: Path) -> None:
    from engine.rag.ingest.discovery import IgnoreRules, is_candidate, is_ignored

    for name in ("~$report.docx", ".~lock.a.odt#", "#draft.md#", "save.TMP", "x.swp", "a.md~"):
        assert is_ignored(name), name
    for name in ("report.docx", "notes #3.md", "tmp notes.txt"):
        assert not is_ignored(name), name
    root = tmp_path / "docs"
    assert is_candidate(path=root / "sub" / "a.md", root=root, suffixes=SUFFIXES)
    assert not is_candidate(path=root / ".git" / "a.md", root=root, suffixes=SUFFIXES)
    assert not is_candidate(path=root / "a.png", root=root, suffixes=SUFFIXES)
    assert not is_candidate(path=tmp_path / "elsewhere.md", root=root, suffixes=SUFFIXES)
    rules = IgnoreRules(max_file_bytes=1024 * 1024)
    assert rules.too_large(1024 * 1024) is None
    assert rules.too_large(1024 * 1024 + 1) == "larger than the size limit (1 MB)"


def test_a_file_symlink_loop_is_reported_as_such(tmp_path: Path) -> None:
    os.symlink(tmp_path / "loop.txt", tmp_path / "loop.txt")
    os.symlink(tmp_path / "missing.txt", tmp_path / "dangling.txt")
    found = discover(paths=[str(tmp_path)], suffixes=SUFFIXES)
    assert found.files == []
    assert sorted((Path(e.path).name, e.reason) for e in found.errors) == [
        ("dangling.txt", "broken symbolic link"),
        ("loop.txt", "symbolic link loop"),
    ]


def test_a_link_out_of_the_watched_folders_is_listed_not_followed(tmp_path: Path) -> None:
    from engine.rag.ingest.discovery import OUTSIDE

    docs, outside = tmp_path / "docs", tmp_path / "outside"
    docs.mkdir()
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    (docs / "real.txt").write_text("real")
    os.symlink(outside / "secret.txt", docs / "out.txt")
    os.symlink(docs / "real.txt", docs / "in.txt")

    def inside(path: Path) -> bool:
        return path.resolve().is_relative_to(docs)

    suffixes = frozenset({".txt"})
    walked = discover(paths=[str(docs)], suffixes=suffixes, inside=inside)
    assert walked.files == [docs / "real.txt"]
    assert [(Path(e.path).name, e.reason) for e in walked.errors] == [("out.txt", OUTSIDE)]
    named = discover(paths=[str(docs / "out.txt")], suffixes=suffixes, inside=inside)
    assert named.files == [] and named.errors[0].reason == OUTSIDE
    # Without watched folders to keep to (a benchmark's own queue), links are followed.
    assert outside / "secret.txt" in discover(paths=[str(docs)], suffixes=suffixes).files
