"""A per-document table as CSV or Markdown: one implementation for the CLI and the
window. Cells are defused and files written whole exactly as batch questions' tables
are (app/batch/export.py): a passage quoted from a document never runs as a formula."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from pathlib import Path

from app.batch.export import Format, csv_cell, md_cell, write_table
from app.chat.answer_render import file_name, source_title
from engine.wire_each import DocumentAnswer

CSV_COLUMNS = (
    "number",
    "document",
    "path",
    "status",
    "answer",
    "pages",
    "sources",
    "mode",
    "reused",
    "error",
    "seconds",
)
STATUS_WORDS = {
    "answered": "answered",
    "not_stated": "not stated",
    "failed": "failed",
    "cancelled": "not answered (cancelled)",
}


def pages_text(*, row: DocumentAnswer) -> str:
    """The pages cited, best first, each once: "3, 7"."""
    pages = dict.fromkeys(c.page for c in row.citations if c.page is not None)
    return ", ".join(str(p) for p in pages)


def answer_text(*, row: DocumentAnswer) -> str:
    if row.status == "failed":
        return f"Failed: {row.error}"
    if row.status == "cancelled":
        return "Not answered (cancelled)"
    return row.answer


def to_csv(*, rows: Sequence[DocumentAnswer]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for r in rows:
        writer.writerow(
            [
                r.number,
                csv_cell(file_name(path=r.path)),
                csv_cell(r.path),
                STATUS_WORDS[r.status],
                csv_cell(r.answer),
                csv_cell(pages_text(row=r)),
                csv_cell("; ".join(f"[{c.index}] {source_title(citation=c)}" for c in r.citations)),
                r.mode if r.status == "answered" else "",
                "yes" if r.reused else "",
                csv_cell(r.error),
                f"{r.seconds:.2f}",
            ]
        )
    return out.getvalue()


def to_markdown(*, question: str, rows: Sequence[DocumentAnswer]) -> str:
    lines = [
        f"**Question:** {md_cell(question)}",
        "",
        "| # | Document | Answer | Pages |",
        "|---:|---|---|---|",
    ]
    for r in rows:
        answer = md_cell(answer_text(row=r))
        if r.status != "answered":
            answer = f"*{answer}*"
        name = md_cell(file_name(path=r.path))
        lines.append(f"| {r.number} | {name} | {answer} | {md_cell(pages_text(row=r))} |")
    return "\n".join(lines) + "\n"


def render(*, question: str, rows: Sequence[DocumentAnswer], fmt: Format) -> str:
    return to_csv(rows=rows) if fmt == "csv" else to_markdown(question=question, rows=rows)


def write_rows(*, path: Path, question: str, rows: Sequence[DocumentAnswer], fmt: Format) -> None:
    """Write the table whole or not at all."""
    write_table(path=path, text=render(question=question, rows=rows, fmt=fmt), fmt=fmt)
