"""The folder watcher: real inotify events from real file operations, merged
into debounced batches, with discovery's ignore rules."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from engine.rag.ingest.watcher import FolderChanges, FolderWatcher

SUFFIXES = frozenset({".txt", ".md", ".pdf"})


class _Collector:
    def __init__(self) -> None:
        self.batches: list[FolderChanges] = []
        self._cond = threading.Condition()

    def __call__(self, changes: FolderChanges) -> None:
        with self._cond:
            self.batches.append(changes)
            self._cond.notify_all()

    def wait(self, *, count: int = 1, timeout_s: float = 10.0) -> list[FolderChanges]:
        with self._cond:
            assert self._cond.wait_for(lambda: len(self.batches) >= count, timeout=timeout_s)
            return list(self.batches)


def _watcher(folder: Path, quiet_s: float = 0.3) -> tuple[FolderWatcher, _Collector]:
    collector = _Collector()
    watcher = FolderWatcher(on_changes=collector, suffixes=SUFFIXES, quiet_s=quiet_s)
    assert watcher.watch(folder=folder)
    return watcher, collector


def test_create_modify_delete_and_rename_arrive_as_debounced_batches(tmp_path: Path) -> None:
    watcher, seen = _watcher(tmp_path)
    try:
        doc = tmp_path / "notes.txt"
        for i in range(5):  # an editor saving in a burst
            doc.write_text(f"version {i}")
        (tmp_path / "sub").mkdir()
        (tmp_path / "sub" / "deep.md").write_text("# deep")
        [first] = seen.wait()
        assert str(doc) in first.upserted and first.removed == []
        assert (
            str(tmp_path / "sub" / "deep.md") in first.upserted
            or str(tmp_path / "sub") in first.upserted
        )

        os.rename(doc, tmp_path / "renamed.txt")
        second = seen.wait(count=2)[1]
        assert second.upserted == [str(tmp_path / "renamed.txt")]
        assert second.removed == [str(doc)]

        (tmp_path / "renamed.txt").unlink()
        third = seen.wait(count=3)[2]
        assert third.removed == [str(tmp_path / "renamed.txt")] and third.upserted == []
    finally:
        watcher.close()


def test_ignored_names_and_other_types_make_no_batch(tmp_path: Path) -> None:
    watcher, seen = _watcher(tmp_path, quiet_s=0.2)
    try:
        (tmp_path / ".hidden").mkdir()
        for name in (
            ".hidden/a.txt",
            "~$report.txt",
            ".~lock.report.txt#",
            "draft.txt~",
            "save.tmp",
            "photo.png",
            ".dotfile.md",
        ):
            (tmp_path / name).write_text("x")
        time.sleep(1.0)
        assert seen.batches == []
        (tmp_path / "real.md").write_text("# real")
        [batch] = seen.wait()
        assert batch.upserted == [str(tmp_path / "real.md")]
    finally:
        watcher.close()


def test_a_save_through_a_temporary_file_is_one_change_of_the_real_name(tmp_path: Path) -> None:
    doc = tmp_path / "report.md"
    doc.write_text("# old")
    watcher, seen = _watcher(tmp_path)
    try:
        tmp = tmp_path / "report.md.tmp"  # how many editors and office suites save
        tmp.write_text("# new")
        os.replace(tmp, doc)
        [batch] = seen.wait()
        assert batch.upserted == [str(doc)]
        assert batch.removed == []
    finally:
        watcher.close()


def test_unwatch_stops_events_and_drops_pending_ones(tmp_path: Path) -> None:
    watcher, seen = _watcher(tmp_path, quiet_s=5.0)
    try:
        (tmp_path / "a.txt").write_text("x")
        time.sleep(0.5)
        watcher.unwatch(folder=tmp_path)
        assert watcher.watched() == []
        (tmp_path / "b.txt").write_text("x")
        assert watcher.flush() is None
        assert seen.batches == []
    finally:
        watcher.close()
