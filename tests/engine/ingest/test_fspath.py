from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from engine.ingest.fspath import from_store, to_store


def test_non_utf8_names_round_trip_through_arrow(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/caf\xe9 \xff notes.txt"
    path = Path(os.fsdecode(raw))
    stored = to_store(path)
    assert pa.array([stored]).to_pylist() == [stored]  # Arrow takes it
    assert os.fsencode(from_store(stored)) == raw
    plain = tmp_path / "ordinary name é.txt"
    assert to_store(plain) == str(plain) and from_store(str(plain)) == plain
