"""Watching folders: file events in, debounced batches of changes out.

Editors save in bursts (write a temporary file, rename it over the old one,
touch it again); events for a path are merged until the folder has been quiet
for `quiet_s` (or `max_wait_s` passed under constant churn), then handed on as
one batch: paths to bring up to date and paths that are gone. A rename is both,
in one batch, so the job can give the new name the old name's vectors (same
content hash) before the old name is dropped. Which names count is decided by
engine/rag/ingest/discovery.py, the same rules as a folder scan.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer
from watchdog.observers.api import ObservedWatch

from engine.rag.ingest.discovery import is_candidate, is_ignored
from engine.rag.ingest.parsers import SUPPORTED_SUFFIXES

log = logging.getLogger(__name__)


@dataclass(frozen=True, kw_only=True)
class FolderChanges:
    upserted: list[str] = field(default_factory=list)  # files or folders to (re)index
    removed: list[str] = field(default_factory=list)  # files or folders that are gone


class _Handler(FileSystemEventHandler):
    def __init__(self, *, root: Path, watcher: FolderWatcher) -> None:
        self._root = root
        self._watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        kind = event.event_type
        src = Path(os.fsdecode(event.src_path))
        if event.is_directory and kind in ("modified", "closed"):
            return  # a folder's own mtime changes with every file in it: no news
        if kind in ("created", "modified", "closed"):
            self._watcher.note(root=self._root, path=src, directory=event.is_directory, gone=False)
        elif kind == "deleted":
            self._watcher.note(root=self._root, path=src, directory=event.is_directory, gone=True)
        elif kind == "moved":
            dest = Path(os.fsdecode(event.dest_path))
            self._watcher.note(root=self._root, path=src, directory=event.is_directory, gone=True)
            self._watcher.note(root=self._root, path=dest, directory=event.is_directory, gone=False)


class FolderWatcher:
    def __init__(
        self,
        *,
        on_changes: Callable[[FolderChanges], object],
        suffixes: frozenset[str] = SUPPORTED_SUFFIXES,
        quiet_s: float = 1.0,
        max_wait_s: float = 10.0,
    ) -> None:
        self._on_changes = on_changes
        self._suffixes = suffixes
        self._quiet_s = quiet_s
        self._max_wait_s = max_wait_s
        self._lock = threading.Condition()
        self._pending: dict[Path, bool] = {}  # path -> gone (the last event wins)
        self._first_at = self._last_at = 0.0
        self._closed = False
        self._watches: dict[Path, ObservedWatch] = {}
        self._observer = Observer()
        self._observer.daemon = True
        self._observer.start()
        self._flusher = threading.Thread(target=self._serve, name="folder-watcher", daemon=True)
        self._flusher.start()

    # -- folders -------------------------------------------------------------------

    def watch(self, *, folder: Path) -> bool:
        """Start watching a folder and its subfolders. False when the system
        refuses (e.g. the inotify watch limit): the start-up rescan still
        keeps the folder in step, only not live."""
        folder = folder.resolve()
        with self._lock:
            if folder in self._watches:
                return True
        try:
            watch = self._observer.schedule(
                _Handler(root=folder, watcher=self), str(folder), recursive=True
            )
        except OSError as e:
            log.warning("cannot watch %s (%s); it is rescanned at each start", folder, e)
            return False
        with self._lock:
            self._watches[folder] = watch
        return True

    def unwatch(self, *, folder: Path) -> None:
        folder = folder.resolve()
        with self._lock:
            watch = self._watches.pop(folder, None)
            # Changes under it that were not handed on yet no longer matter.
            self._pending = {
                p: g
                for p, g in self._pending.items()
                if not (p == folder or p.is_relative_to(folder))
            }
        if watch is not None:
            with contextlib.suppress(KeyError, OSError):
                self._observer.unschedule(watch)

    def watched(self) -> list[Path]:
        with self._lock:
            return sorted(self._watches)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._lock.notify_all()
        self._observer.stop()
        self._observer.join(timeout=5)
        self._flusher.join(timeout=5)

    # -- events ----------------------------------------------------------------------

    def note(self, *, root: Path, path: Path, directory: bool, gone: bool) -> None:
        """One event: `path` changed (gone=False) or disappeared (gone=True)."""
        if path == root:
            return
        if directory:
            try:
                parts = path.relative_to(root).parts
            except ValueError:
                return
            if any(is_ignored(p) for p in parts):
                return
        elif not is_candidate(path=path, root=root, suffixes=self._suffixes):
            return
        with self._lock:
            now = time.monotonic()
            if not self._pending:
                self._first_at = now
            self._last_at = now
            self._pending[path] = gone
            self._lock.notify_all()

    def flush(self) -> FolderChanges | None:
        """Hand on what is pending now (also used by tests and at close)."""
        with self._lock:
            pending, self._pending = self._pending, {}
        if not pending:
            return None
        changes = FolderChanges(
            upserted=sorted(str(p) for p, gone in pending.items() if not gone),
            removed=sorted(str(p) for p, gone in pending.items() if gone),
        )
        try:
            self._on_changes(changes)
        except Exception:  # the watcher must outlive a failing consumer
            log.exception("handing on folder changes failed")
        return changes

    def _serve(self) -> None:
        while True:
            with self._lock:
                while not self._closed:
                    if self._pending:
                        now = time.monotonic()
                        due = min(self._last_at + self._quiet_s, self._first_at + self._max_wait_s)
                        if now >= due:
                            break
                        self._lock.wait(timeout=due - now)
                    else:
                        self._lock.wait()
                if self._closed:
                    return
            self.flush()
