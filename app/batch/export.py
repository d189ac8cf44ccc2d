"""The answers of a batch as CSV or Markdown: one implementation for the CLI and the window.

CSV is RFC 4180 (CRLF line ends, fields quoted where needed) in UTF-8 with a
byte-order mark: without the mark, Excel on Windows reads UTF-8 as the local
code page and garbles every accented letter, while LibreOffice, Numbers,
pandas and Python's csv module (encoding "utf-8-sig") all read the mark
correctly. Text cells that a spreadsheet would take for a formula (=, +, -, @)
get a leading apostrophe: a passage quoted from a document must never run as
a formula (which can fetch a URL) when the file is opened.

Files are written whole or not at all: into a temporary file beside the target,
then renamed over it, so an interrupted export never leaves half a table.
"""

from __future__ import annotations

import csv
import io
import os
import tempfile
from collections.abc import Sequence
from contextlib import suppress
from pathlib import Path
from typing import Literal

from app.batch.runner import BatchResult
from app.batch.visible import visible
from app.chat.answer_render import source_title

Format = Literal["csv", "md"]
FORMATS: tuple[Format, ...] = ("csv", "md")
CSV_COLUMNS = (
    "number",
    "question",
    "answer",
    "mode",
    "sources",
    "source_paths",
    "status",
    "error",
    "seconds",
)
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_SUFFIXES: dict[str, Format] = {".csv": "csv", ".md": "md", ".markdown": "md"}


def format_for(*, path: Path, requested: str | None = None) -> Format:
    """The format asked for, else the one the file name says; ValueError if neither."""
    if requested is not None:
        if requested not in FORMATS:
            raise ValueError(f"unknown format {requested!r}: use csv or md")
        return requested  # type: ignore[return-value]
    try:
        return _SUFFIXES[path.suffix.lower()]
    except KeyError:
        raise ValueError(
            f"cannot tell the format from {path.name!r}: name it .csv or .md, or give --format"
        ) from None


def sources_text(*, result: BatchResult) -> str:
    """ "[1] report.pdf — page 3; [2] notes.md" """
    return "; ".join(f"[{c.index}] {source_title(citation=c)}" for c in result.citations)


def to_csv(*, results: Sequence[BatchResult]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for r in results:
        paths = list(dict.fromkeys(c.path for c in r.citations))  # each file once, in order
        writer.writerow(
            [
                r.number,
                csv_cell(r.question),
                csv_cell(r.answer),
                r.mode,
                csv_cell(sources_text(result=r)),
                csv_cell("; ".join(paths)),
                r.status,
                csv_cell(r.error),
                f"{r.seconds:.2f}",
            ]
        )
    return out.getvalue()


def to_markdown(*, results: Sequence[BatchResult]) -> str:
    """A GitHub-flavoured Markdown table; every cell stays on its row."""
    lines = ["| # | Question | Answer | Sources |", "|---:|---|---|---|"]
    for r in results:
        if r.status == "answered":
            answer = md_cell(r.answer)
        elif r.status == "failed":
            answer = "**Failed:** " + md_cell(r.error)
        else:
            answer = "*Not answered (cancelled)*"
        sources = "<br>".join(
            f"[{c.index}] {md_cell(source_title(citation=c))}" for c in r.citations
        )
        lines.append(f"| {r.number} | {md_cell(r.question)} | {answer} | {sources} |")
    return "\n".join(lines) + "\n"


def render(*, results: Sequence[BatchResult], fmt: Format) -> str:
    return to_csv(results=results) if fmt == "csv" else to_markdown(results=results)


def write_results(*, path: Path, results: Sequence[BatchResult], fmt: Format) -> None:
    """Write the table whole or not at all (temporary file, then rename)."""
    write_table(path=path, text=render(results=results, fmt=fmt), fmt=fmt)


def write_table(*, path: Path, text: str, fmt: Format) -> None:
    """A rendered table, whole or not at all (temporary file, then rename); CSV with
    the byte-order mark spreadsheets need to read UTF-8."""
    data = text.encode("utf-8-sig" if fmt == "csv" else "utf-8")
    path = path.expanduser()
    folder = path.parent if str(path.parent) else Path(".")
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private (0600); a table is an ordinary document.
        os.chmod(tmp, _mode_for(path))
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise


def check_writable(*, path: Path) -> None:
    """Fail before any question is asked if the table could not be saved there."""
    folder = path.expanduser().parent
    if path.expanduser().is_dir():
        raise ValueError(f"{path} is a folder; name a file to write the table to")
    if not folder.is_dir():
        raise ValueError(f"the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise ValueError(f"the folder {folder} is not writable")


def _mode_for(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777  # replacing a file keeps its permissions
    except OSError:
        return 0o644


def csv_cell(text: str) -> str:
    """A CSV cell that a spreadsheet shows as text, never runs as a formula."""
    text = visible(text, keep="\n\r\t")  # a CSV cell may span lines; nothing else
    return "'" + text if text.startswith(_FORMULA_STARTS) else text


def md_cell(text: str) -> str:
    """Text for one table cell: pipes escaped, no HTML tags, line breaks as <br>."""
    text = visible(text.strip(), keep="\n\r")
    text = text.replace("\\", "\\\\").replace("|", "\\|").replace("<", "&lt;")
    return "<br>".join(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
