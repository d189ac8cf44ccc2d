"""Build ragdoll-user-guide.pdf from ragdoll-user-guide.md.

Run after editing the Markdown and commit both files:

    .venv/bin/python resources/samples/build_samples.py

The PDF exists so that the sample collection shows page citations. It uses
fpdf2's built-in Helvetica, so the Markdown must stay latin-1, and it renders
only what the guide uses: #/## headings, paragraphs, "- " bullets and `code`.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from fpdf import FPDF

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "ragdoll-user-guide.md"
TARGET = HERE / "ragdoll-user-guide.pdf"
# A fixed date keeps the PDF byte-identical when the Markdown did not change.
BUILD_DATE = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
TITLE = "RAGDoll User Guide"


class _GuidePdf(FPDF):
    def header(self) -> None:
        if self.page_no() == 1:
            return
        self.set_font("Helvetica", size=8)
        self.set_text_color(110)
        self.cell(0, 5, TITLE, align="L")
        self.ln(10)
        self.set_text_color(0)

    def footer(self) -> None:
        self.set_y(-14)
        self.set_font("Helvetica", size=8)
        self.set_text_color(110)
        self.cell(0, 5, f"Page {self.page_no()} of {{nb}}", align="C")
        self.set_text_color(0)


def _blocks(markdown: str) -> list[str]:
    """Paragraph-level blocks; a bullet item with its continuation lines is one block."""
    blocks: list[str] = []
    for chunk in re.split(r"\n\s*\n", markdown.strip()):
        current: list[str] = []
        for line in chunk.splitlines():
            if line.startswith("- ") and current:
                blocks.append(" ".join(current))
                current = []
            current.append(line.strip())
        blocks.append(" ".join(current))
    return blocks


def _inline(text: str) -> str:
    # Code spans are printed as plain text: fpdf2's markdown mode would read the
    # "--" of "--json" as underline markers and drop them.
    return text.replace("`", "")


def build(*, source: Path = SOURCE, target: Path = TARGET) -> Path:
    markdown = source.read_text(encoding="utf-8")
    markdown.encode("latin-1")  # fail early: core fonts cannot draw other characters
    pdf = _GuidePdf(format=(148, 210))  # A5, small pages: more page citations
    pdf.set_creation_date(BUILD_DATE)
    pdf.set_title(TITLE)
    pdf.set_author("RAGDoll")
    pdf.set_margins(16, 16, 16)
    pdf.set_auto_page_break(auto=True, margin=18)
    pdf.add_page()
    for block in _blocks(markdown):
        if block.startswith("# "):
            pdf.set_font("Helvetica", style="B", size=18)
            pdf.multi_cell(0, 9, block[2:], align="L")
            pdf.ln(3)
        elif block.startswith("## "):
            # Each section starts a page when less than a few lines are left.
            if pdf.get_y() > pdf.h - 50:
                pdf.add_page()
            pdf.ln(2)
            pdf.set_font("Helvetica", style="B", size=12.5)
            pdf.multi_cell(0, 6.5, block[3:], align="L")
            pdf.ln(1.5)
        elif block.startswith("- "):
            pdf.set_font("Helvetica", size=9.5)
            pdf.set_x(pdf.l_margin + 4)
            pdf.multi_cell(0, 4.6, "- " + _inline(block[2:]), align="L")
            pdf.ln(1)
        else:
            pdf.set_font("Helvetica", size=9.5)
            pdf.multi_cell(0, 4.6, _inline(block), align="L")
            pdf.ln(2.2)
    pdf.output(str(target))
    return target


if __name__ == "__main__":
    built = build()
    print(f"wrote {built} ({built.stat().st_size // 1024} KB)")
