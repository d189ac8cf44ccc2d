from __future__ import annotations

import csv
import io
from pathlib import Path

from app.each.export import render, write_rows
from engine.wire import Citation
from engine.wire_each import DocumentAnswer


def _cite(page: int, text: str = "passage") -> Citation:
    return Citation(
        index=1,
        chunk_id="c",
        path="/d/=evil.pdf",
        page=page,
        text=text,
        score=0.5,
        char_start=0,
        char_end=3,
    )


ROWS = [
    DocumentAnswer(
        number=1,
        path="/d/=evil.pdf",
        status="answered",
        answer='=HYPERLINK("http://x") | pipes',
        mode="extractive",
        citations=[_cite(3), _cite(3), _cite(7)],
    ),
    DocumentAnswer(
        number=2, path="/d/b.md", status="not_stated", answer="Not stated in this document."
    ),
    DocumentAnswer(number=3, path="/d/c.pdf", status="failed", error="the parser crashed"),
    DocumentAnswer(number=4, path="/d/d.pdf", status="cancelled"),
]


def test_csv_defuses_formulas_and_lists_each_page_once() -> None:
    text = render(question="Q?", rows=ROWS, fmt="csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert rows[0]["document"] == "'=evil.pdf" and rows[0]["answer"].startswith("'=HYPERLINK")
    assert rows[0]["pages"] == "3, 7"
    assert [r["status"] for r in rows] == [
        "answered",
        "not stated",
        "failed",
        "not answered (cancelled)",
    ]
    assert rows[2]["error"] == "the parser crashed"


def test_markdown_keeps_every_cell_on_its_row(tmp_path: Path) -> None:
    out = tmp_path / "t.md"
    write_rows(path=out, question="Which | licence?", rows=ROWS, fmt="md")
    text = out.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[0] == "**Question:** Which \\| licence?"
    assert len([line for line in lines if line.startswith("| ")]) == 1 + len(ROWS)
    assert "\\| pipes" in text and "*Failed: the parser crashed*" in text
    assert "| 1 | =evil.pdf |" in text and "| 3, 7 |" in text
