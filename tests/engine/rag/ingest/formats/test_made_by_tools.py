"""Every format as the tools people use write it (issue #44, 3): pandoc and
LibreOffice files of one short text (tests/fixtures/made_by_tools, written by
tools/make_format_samples.sh). The libraries' own writers, which the other format
tests use, write tidier files than these: an .odt from pandoc has whitespace before
its <office:text>, and odfpy took that whitespace for the document ("no text in the
file" for 5,600 words); LibreOffice's EPUB has no heading elements, only its table
of contents names the sections."""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from pathlib import Path

import pytest

from engine.rag.ingest.parsers import parse_file

SAMPLES = Path(__file__).resolve().parents[4] / "fixtures" / "made_by_tools"
DOCUMENTS = sorted(
    p.name for p in SAMPLES.iterdir() if p.stem in ("pandoc", "libreoffice") and p.suffix != ".xlsx"
)
SENTENCES = (
    "The greenhouse is watered every morning at six",
    "Im Winter prüft Jürgen die Heizung jeden Freitag.",
    "falls below 7 °C at night",
    "Cucumbers are picked every second day",
)
# Formats whose files carry their sections (PDF: its outline or its large type;
# plain text, RTF and slides: none that the reader finds).
SECTIONED = (".odt", ".docx", ".html", ".epub", ".pdf")


def test_the_samples_are_all_there() -> None:
    assert len(DOCUMENTS) >= 14, DOCUMENTS


@pytest.mark.parametrize("name", DOCUMENTS)
def test_a_file_made_by_a_tool_reads_whole(name: str) -> None:
    out = io.StringIO()
    with redirect_stdout(out):
        doc = parse_file(path=SAMPLES / name)
    assert out.getvalue() == ""  # odfpy printed pandoc's styles.xml here
    text = " ".join(" ".join(page.text for page in doc.pages).split())
    for sentence in SENTENCES:
        assert sentence in text, (name, sentence, text[:400])
    titles = [h.title for page in doc.pages for h in page.headings]
    if Path(name).suffix in SECTIONED:
        assert [t for t in titles if t in ("Watering", "Heating", "Harvest")] == [
            "Watering",
            "Heating",
            "Harvest",
        ], (name, titles)


def test_a_spreadsheet_made_by_libreoffice_reads_its_rows() -> None:
    doc = parse_file(path=SAMPLES / "libreoffice.xlsx")
    text = doc.pages[0].text
    assert "Month: December; Hours of light: 8; Note: heater on below 7 °C" in text
