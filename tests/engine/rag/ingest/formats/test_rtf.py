from __future__ import annotations

from pathlib import Path

from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_rtf
from tests.engine.rag.ingest.formats.helpers import reason


def test_rtf_text_with_escapes_and_surrogate_pairs(tmp_path: Path) -> None:
    doc = parse_file(path=write_rtf(path=tmp_path / "warranty.rtf"))
    assert doc.page_count is None
    assert doc.pages[0].text == (
        "Dear customer,\nYour warranty for the dishwasher expires on 30 June 2028.\n"
        "Café crème and € 5 😀 thanks"
    )


def test_rtf_code_pages_and_font_charsets(tmp_path: Path) -> None:
    # Russian Windows: code page 1251 for \\'hh escapes and for raw 8-bit bytes.
    (tmp_path / "ru.rtf").write_bytes(
        b"{\\rtf1\\ansi\\ansicpg1251{\\fonttbl{\\f0 Arial;}}\\f0 \\'cf\\'f0\\'e8\\'e2\\'e5\\'f2 "
        + "мир".encode("cp1251")
        + b"\\par}"
    )
    assert parse_file(path=tmp_path / "ru.rtf").pages[0].text == "Привет мир"
    # A Greek font (fcharset 161) inside a Western document. (Word names a
    # charset for every font; striprtf needs that to tell fonts apart.)
    (tmp_path / "gr.rtf").write_bytes(
        b"{\\rtf1\\ansi\\ansicpg1252"
        b"{\\fonttbl{\\f0\\fcharset0 Arial;}{\\f1\\fcharset161 Arial Greek;}}"
        b"\\f0 caf\\'e9 {\\f1 \\'e1\\'e2\\'e3}\\par}"
    )
    assert parse_file(path=tmp_path / "gr.rtf").pages[0].text == "café αβγ"


def test_rtf_reasons(tmp_path: Path) -> None:
    (tmp_path / "renamed.rtf").write_bytes(b"PK\x03\x04 a zip file")
    assert reason(tmp_path / "renamed.rtf") == "not an RTF file (it does not start with {\\rtf)"
    (tmp_path / "blank.rtf").write_bytes(b"{\\rtf1\\ansi{\\fonttbl{\\f0 Arial;}}\\f0\\par\\par}")
    assert reason(tmp_path / "blank.rtf") == "no text in the file"
