from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from engine.rag.ingest.fspath import from_store, to_store


def test_non_utf8_names_round_trip_through_arrow(tmp_path: Path) -> None:
    raw = os.fsencode(tmp_path) + b"/caf\xe9 \xff notes.txt"
    path = Path(os.fsdecode(raw))
    stored = to_store(path)
    assert pa.array([stored]).to_pylist() == [stored]  # Arrow takes it
    assert os.fsencode(from_store(stored)) == raw
    plain = tmp_path / "ordinary name é.txt"
    assert to_store(plain) == str(plain) and from_store(str(plain)) == plain


def test_the_encoding_is_one_to_one() -> None:
    """A byte that is not UTF-8 and a real character that looks like its encoding,
    or like the escape, never share a stored form; folders stay prefixes."""
    names = [
        os.fsdecode(b"lamp\xe9.txt"),
        "lamp\uefe9.txt",
        "lamp\uef7f.txt",
        "lamp\uef7f\uefe9.txt",
        os.fsdecode(b"lamp\xe9") + "\uefe9.txt",
        "lamp\uef7f" + os.fsdecode(b"\xe9") + ".txt",
        "lamp\uef7f\uef7f.txt",
    ]
    stored = [to_store(n) for n in names]
    assert len(set(stored)) == len(names)
    assert [str(from_store(s)) for s in stored] == names
    folder = "/docs/x\uefe9" + os.fsdecode(b"\xff")
    assert to_store(folder + "/a.txt").startswith(to_store(folder) + "/")
