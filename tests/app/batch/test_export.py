from __future__ import annotations

import csv
import os
from pathlib import Path

import pytest

from app.batch.export import (
    CSV_COLUMNS,
    format_for,
    to_markdown,
    write_results,
)
from app.batch.runner import BatchResult
from engine.wire import Citation


def _citation(index: int, path: str, page: int | None) -> Citation:
    return Citation(
        index=index,
        chunk_id=f"c{index}",
        path=path,
        page=page,
        text="passage",
        score=0.5,
        char_start=0,
        char_end=7,
    )


RESULTS = [
    BatchResult(
        number=1,
        question='Quotes "inside", commas, and\nnew lines?',
        status="answered",
        answer="Café | crème costs 3 €;\r\nsee [1] and [2].",
        mode="extractive",
        citations=(_citation(1, "/docs/menu.pdf", 2), _citation(2, "/docs/notes; old.md", None)),
        seconds=1.234,
    ),
    BatchResult(
        number=2,
        question='=HYPERLINK("http://example.com")',
        status="failed",
        error="the engine said <no>",
        seconds=0.5,
    ),
    BatchResult(number=3, question="Never asked?", status="cancelled"),
]


def test_csv_round_trips_through_the_csv_module(tmp_path: Path) -> None:
    out = tmp_path / "answers.csv"
    write_results(path=out, results=RESULTS, fmt="csv")
    raw = out.read_bytes()
    assert raw.startswith(b"\xef\xbb\xbf")  # the BOM, for Excel
    assert b"\r\n" in raw
    with out.open(encoding="utf-8-sig", newline="") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0]) == CSV_COLUMNS
    first, failed, cancelled = rows
    assert first["question"] == RESULTS[0].question
    assert first["answer"] == RESULTS[0].answer
    assert first["sources"] == "[1] menu.pdf — page 2; [2] notes; old.md"
    assert first["source_paths"] == "/docs/menu.pdf; /docs/notes; old.md"
    assert (first["status"], first["mode"], first["seconds"]) == ("answered", "extractive", "1.23")
    # A cell a spreadsheet would run as a formula is defused, and only that.
    assert failed["question"] == "'" + RESULTS[1].question
    assert (failed["status"], failed["error"]) == ("failed", "the engine said <no>")
    assert (cancelled["number"], cancelled["status"], cancelled["answer"]) == ("3", "cancelled", "")


def test_markdown_cells_stay_in_their_row() -> None:
    text = to_markdown(results=RESULTS)
    lines = text.splitlines()
    assert lines[0] == "| # | Question | Answer | Sources |"
    assert len(lines) == 2 + len(RESULTS)  # no cell broke its row
    first = lines[2]
    assert "Café \\| crème costs 3 €;<br>see [1] and [2]." in first
    assert 'Quotes "inside", commas, and<br>new lines?' in first
    assert "[1] menu.pdf — page 2<br>[2] notes; old.md" in first
    # Unescaped pipes separate exactly the four columns.
    for line in lines[2:]:
        assert line.replace("\\|", "").count("|") == 5
    assert "**Failed:** the engine said &lt;no>" in lines[3]
    assert "Not answered" in lines[4]


def test_writing_replaces_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    out = tmp_path / "answers.md"
    out.write_text("old table")
    os.chmod(out, 0o640)
    write_results(path=out, results=RESULTS[:1], fmt="md")
    assert out.read_text(encoding="utf-8").startswith("| # |")
    assert os.stat(out).st_mode & 0o777 == 0o640
    assert [p.name for p in tmp_path.iterdir()] == ["answers.md"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    out = tmp_path / "answers.md"
    out.write_text("old table")
    with pytest.raises(OSError):
        write_results(path=tmp_path / "missing" / "answers.md", results=RESULTS, fmt="md")
    assert out.read_text() == "old table"
    assert [p.name for p in tmp_path.iterdir()] == ["answers.md"]


def test_format_from_the_name_or_as_asked() -> None:
    assert format_for(path=Path("a.CSV")) == "csv"
    assert format_for(path=Path("a.markdown")) == "md"
    assert format_for(path=Path("a.txt"), requested="md") == "md"
    with pytest.raises(ValueError, match="--format"):
        format_for(path=Path("a.txt"))
