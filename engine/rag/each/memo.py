"""Answers of earlier per-document runs, kept so that a re-run asks only what changed.

A row is reused when the same question was asked of the same document, answered the
same way (the answer mode with its model, embedder and ranker, k, whole document or
passages), and the document's content hash (the one ingestion keeps) is the one it
was answered at. Failed and cancelled rows are never kept: a re-run asks them again.
The file holds at most MAX_ROWS rows, the least recently used going first; it is
written when a run ends (a cancelled one too), not row by row.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import threading
from pathlib import Path
from typing import Any

from engine.json_file import set_aside, write_json
from engine.wire_each import DocumentAnswer
from engine.wire_events import from_json_dict, to_json_dict

MAX_ROWS = 5_000  # a row holds its passages' text: a few kB
_KEPT = ("answered", "not_stated")


@dataclasses.dataclass(frozen=True, kw_only=True)
class AnsweredHow:
    """Everything besides the document that decides a row's answer."""

    question: str
    k: int
    whole_document: bool
    answerer: str  # "extractive", or the model's id
    embedder: str
    reranker: str

    def key(self, *, path: str) -> str:
        fields = {**dataclasses.asdict(self), "question": " ".join(self.question.split())}
        text = json.dumps([fields, path], sort_keys=True)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()


class EachMemo:
    """The rows kept on disk (`file`); thread-safe."""

    def __init__(self, *, file: Path) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._rows: dict[str, dict[str, Any]] | None = None  # read at first use
        self._dirty = False

    def get(self, *, how: AnsweredHow, path: str, content_hash: str) -> DocumentAnswer | None:
        """The row answered for this document at this content, if kept."""
        key = how.key(path=path)
        with self._lock:
            rows = self._loaded()
            kept = rows.get(key)
            if kept is None or kept.get("content_hash") != content_hash or not content_hash:
                return None
            rows[key] = rows.pop(key)  # most recently used last
        try:
            return from_json_dict(DocumentAnswer, kept)
        except (TypeError, ValueError):
            return None  # written by another version: answered again

    def put(self, *, how: AnsweredHow, row: DocumentAnswer) -> None:
        if row.status not in _KEPT or not row.content_hash:
            return
        key = how.key(path=row.path)
        with self._lock:
            rows = self._loaded()
            rows.pop(key, None)
            rows[key] = to_json_dict(row)
            while len(rows) > MAX_ROWS:
                rows.pop(next(iter(rows)))
            self._dirty = True

    def flush(self) -> None:
        """Write the rows kept since the last flush (a run's end: once, not per row)."""
        with self._lock:
            if self._rows is None or not self._dirty:
                return
            write_json(file=self._file, data=self._rows, indent=None)
            self._dirty = False

    def _loaded(self) -> dict[str, dict[str, Any]]:
        if self._rows is None:
            self._rows = {}
            if self._file.exists():
                try:
                    data = json.loads(self._file.read_text(encoding="utf-8"))
                    if not isinstance(data, dict):
                        raise ValueError("not an object")
                    self._rows = data
                except (OSError, ValueError) as e:
                    set_aside(file=self._file, what="the kept per-document answers", error=e)
        return self._rows
