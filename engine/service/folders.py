"""The watched folders: which folders the person added, kept as JSON in the
config folder. Every request that names a path is checked against them."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from engine.json_file import set_aside, write_json
from engine.rag.ingest.fspath import from_store
from engine.wire import WatchedFolder, from_json_dict, to_json_dict


class FolderRegistry:
    def __init__(self, *, file: Path) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._folders = self._load()

    def list(self) -> list[WatchedFolder]:
        with self._lock:
            return list(self._folders)

    def add(self, *, path: str | Path, collection: str = "default") -> WatchedFolder:
        """Register a folder (idempotent). Raises FileNotFoundError or
        NotADirectoryError for a path that is not an existing folder."""
        folder = Path(path).expanduser().resolve()
        if not folder.exists():
            raise FileNotFoundError(f"no such folder: {folder}")
        if not folder.is_dir():
            raise NotADirectoryError(f"not a folder: {folder}")
        with self._lock:
            for existing in self._folders:
                if existing.path == str(folder):
                    return existing
            added = WatchedFolder(path=str(folder), collection=collection, added_at=time.time())
            self._folders = [*self._folders, added]
            self._save()
            return added

    def remove(self, *, path: str | Path) -> WatchedFolder | None:
        target = str(Path(path).expanduser().resolve())
        with self._lock:
            kept = [f for f in self._folders if f.path != target]
            if len(kept) == len(self._folders):
                return None
            removed = next(f for f in self._folders if f.path == target)
            self._folders = kept
            self._save()
            return removed

    def containing(self, *, path: str | Path) -> WatchedFolder | None:
        """The watched folder a path lies in, after resolving symlinks and
        `..`; None when it lies in none (the request must be refused). A `str` is a
        path as the store and the API keep it (engine/rag/ingest/fspath.py), a `Path` a
        real one: decoding a real name again could turn it into another."""
        try:
            real = from_store(path) if isinstance(path, str) else path
            resolved = real.expanduser().resolve()
        except (OSError, RuntimeError):  # symlink loop, unreadable
            return None
        with self._lock:
            for folder in self._folders:
                if resolved == Path(folder.path) or resolved.is_relative_to(folder.path):
                    return folder
        return None

    def _load(self) -> list[WatchedFolder]:
        try:
            data = json.loads(self._file.read_text(encoding="utf-8"))
            return [from_json_dict(WatchedFolder, item) for item in data["folders"]]
        except FileNotFoundError:
            return []
        except (ValueError, TypeError, KeyError) as e:
            set_aside(file=self._file, what="folders file", error=e)
            return []

    def _save(self) -> None:
        write_json(file=self._file, data={"folders": [to_json_dict(f) for f in self._folders]})
