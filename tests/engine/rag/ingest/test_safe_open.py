"""engine/rag/ingest/safe_open.py: a listed file opens only while no component of its
path is a symbolic link, wherever on the path the link is put, and the parsers and
triage read through it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from engine.errors import LinkedPathError, ParseError
from engine.rag.ingest.indexer import content_hash
from engine.rag.ingest.parsers import parse_file
from engine.rag.ingest.safe_open import SWAPPED, is_plain_path, open_listed

pytestmark = pytest.mark.skipif(os.name != "posix", reason="symbolic links as on POSIX")


def _tree(root: Path) -> tuple[Path, Path]:
    inside = root / "docs" / "sub" / "deep" / "note.txt"
    inside.parent.mkdir(parents=True)
    inside.write_text("Inside: the well is 12 m deep.\n")
    outside = root / "outside" / "sub" / "deep" / "note.txt"
    outside.parent.mkdir(parents=True)
    outside.write_text("Outside: the safe opens with 31-41-59.\n")
    return inside, root / "outside"


@pytest.mark.parametrize("swapped", ["docs/sub", "docs/sub/deep", "docs/sub/deep/note.txt"])
def test_a_link_anywhere_on_the_listed_path_is_refused(tmp_path: Path, swapped: str) -> None:
    inside, outside = _tree(tmp_path)
    with open_listed(inside) as f:
        assert f.read().startswith(b"Inside")
    assert is_plain_path(inside)
    moved = tmp_path / "docs-moved"
    component = tmp_path / swapped
    os.rename(component, moved)
    os.symlink(outside / Path(swapped).relative_to("docs"), component)
    assert inside.read_text().startswith("Outside")  # what plain open() now reads
    with pytest.raises(LinkedPathError):
        open_listed(inside).__enter__()
    with pytest.raises(LinkedPathError):
        content_hash(inside)
    with pytest.raises(ParseError) as refused:
        parse_file(path=inside)
    assert refused.value.reason == SWAPPED
    assert not is_plain_path(inside)


def test_only_regular_files_open(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        open_listed(fifo).__enter__()  # would block a reader forever otherwise
    with pytest.raises(FileNotFoundError):
        open_listed(tmp_path / "missing.txt").__enter__()
