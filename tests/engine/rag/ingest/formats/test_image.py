"""OCR: images of pages and scanned PDFs are read; photos, broken and huge
images are reported with a reason."""

from __future__ import annotations

import io
from pathlib import Path

import pypdfium2 as pdfium
import pytest
from PIL import Image

from bench.real_docs import find_real_docs
from engine.errors import ParseError
from engine.rag.ingest.formats.image import parse_image
from engine.rag.ingest.formats.pdf import parse_pdf
from engine.rag.ingest.parsers import parse_file
from tests.fixtures.pdf_factory import PdfPage, write_pdf

pytest.importorskip("rapidocr")

SENTENCES = (
    "The compressor restarts after a pause of three minutes.",
    "Replace the filter cartridge every six months.",
)


def _page_image(pdf: Path, index: int, dpi: int) -> Image.Image:
    document = pdfium.PdfDocument(str(pdf))
    try:
        return document[index].render(scale=dpi / 72).to_pil().convert("L")
    finally:
        document.close()


def _words(text: str) -> list[str]:
    return [w.strip(".,;:()").lower() for w in text.split()]


def _mostly_there(sentence: str, text: str) -> bool:
    found = set(_words(text))
    wanted = _words(sentence)
    return sum(w in found for w in wanted) >= 0.9 * len(wanted)


def _manual(tmp_path: Path) -> Path:
    return write_pdf(
        path=tmp_path / "manual.pdf",
        pages=[
            PdfPage(heading="Maintenance", paragraphs=[SENTENCES[0]]),
            PdfPage(heading="Filters", paragraphs=[SENTENCES[1]]),
        ],
    )


def test_an_image_of_a_page_is_read(tmp_path: Path) -> None:
    image = tmp_path / "page.png"
    _page_image(_manual(tmp_path), 0, 150).save(image)
    doc = parse_file(path=image)
    assert doc.page_count == 1
    assert _mostly_there(SENTENCES[0], doc.pages[0].text), doc.pages[0].text


@pytest.mark.slow  # OCR of a page takes 5-80 s on a loaded 2-core machine
def test_a_scanned_pdf_is_read_page_by_page_with_progress(tmp_path: Path) -> None:
    manual = _manual(tmp_path)
    scans = [_page_image(manual, i, 150).convert("RGB") for i in range(2)]
    scanned = tmp_path / "scanned.pdf"
    scans[0].save(scanned, save_all=True, append_images=scans[1:], resolution=150)
    seen: list[tuple[int, int]] = []
    doc = parse_pdf(
        path=scanned, data=scanned.read_bytes(), progress=lambda d, t: seen.append((d, t))
    )
    assert seen == [(0, 2), (1, 2), (2, 2)]
    assert _mostly_there(SENTENCES[1], doc.pages[1].text), doc.pages[1].text
    assert any("OCR" in note for note in doc.notes)


@pytest.mark.slow  # OCR of a page takes 5-80 s on a loaded 2-core machine
def test_a_real_manual_page_rendered_at_150_dpi_finds_its_key_sentences(tmp_path: Path) -> None:
    corpus = find_real_docs()
    if corpus is None:
        pytest.skip("real Debian manuals absent: run `python -m bench.real_docs`")
    image = tmp_path / "maint-guide-p41.png"
    _page_image(corpus / "maint-guide.pdf", 40, 150).save(image)
    text = parse_file(path=image).pages[0].text
    for sentence in (
        "Packaging of a library is not easy for a novice maintainer and should be avoided.",
        "These maintainer scripts are among the Debian enhancements that explain why people "
        "choose Debian.",
    ):
        assert _mostly_there(sentence, text), text


def test_a_photo_is_not_a_document(tmp_path: Path) -> None:
    gradient = Image.linear_gradient("L").resize((800, 600)).convert("RGB")
    photo = tmp_path / "sky.jpg"
    gradient.save(photo)
    with pytest.raises(ParseError, match="no text found in the image"):
        parse_file(path=photo)


def test_a_corrupt_image_is_reported(tmp_path: Path) -> None:
    buffer = io.BytesIO()
    Image.new("RGB", (400, 300), "white").save(buffer, format="PNG")
    broken = tmp_path / "broken.png"
    broken.write_bytes(buffer.getvalue()[:200])
    with pytest.raises(ParseError, match=r"damaged|not a readable image"):
        parse_file(path=broken)
    (tmp_path / "not.jpg").write_bytes(b"\xff\xd8\xff" + b"nonsense" * 10)
    with pytest.raises(ParseError, match=r"damaged|not a readable image"):
        parse_file(path=tmp_path / "not.jpg")


@pytest.mark.slow  # OCR of a page takes 5-80 s on a loaded 2-core machine
def test_a_60_megapixel_image_is_scaled_down_and_read(tmp_path: Path) -> None:
    page = _page_image(_manual(tmp_path), 0, 150)
    big = Image.new("L", (9000, 6700), 255)  # 60.3 megapixels
    big.paste(page.resize((page.width * 4, page.height * 4)), (0, 0))
    path = tmp_path / "poster.png"
    big.save(path)
    doc = parse_image(path=path, data=path.read_bytes())
    assert "compressor" in doc.pages[0].text.lower()


def test_a_decompression_bomb_is_refused_before_decoding(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.png"
    Image.new("1", (10_000, 9_500), 1).save(bomb)  # 95 megapixels, a few kB on disk
    with pytest.raises(ParseError, match="image too large to read"):
        parse_file(path=bomb)


_FONT = Path("/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf")


def _garbage_layer_pdf(path: Path) -> Path:
    """A PDF whose font maps every glyph to the wrong character (private-use
    code points): the text layer is garbage though the page looks right."""
    import re

    from fpdf import FPDF

    pdf = FPDF(format="A4")
    pdf.compress = False
    pdf.add_font("DejaVu", fname=str(_FONT))
    pdf.add_page()
    pdf.set_font("DejaVu", size=14)
    pdf.multi_cell(0, 8, (SENTENCES[0] + " ") * 4)
    data = bytes(pdf.output())

    def garble(match: re.Match[bytes]) -> bytes:
        return re.sub(rb"(<[0-9A-Fa-f]{4}>\s*)<00([0-9A-Fa-f]{2})>", rb"\1<E0\2>", match.group(0))

    path.write_bytes(re.sub(rb"beginbfchar.*?endbfchar", garble, data, flags=re.S))
    return path


@pytest.mark.slow  # one page of OCR
def test_a_garbage_text_layer_is_read_by_ocr_instead(tmp_path: Path) -> None:
    if not _FONT.is_file():
        pytest.skip(f"needs the DejaVu Sans font at {_FONT} to write the test PDF")
    path = _garbage_layer_pdf(tmp_path / "garbled.pdf")
    document = pdfium.PdfDocument(str(path))
    layer = document[0].get_textpage().get_text_range()
    document.close()
    assert "compressor" not in layer  # the layer really is garbage
    doc = parse_file(path=path)
    assert _mostly_there(SENTENCES[0], doc.pages[0].text), doc.pages[0].text
    assert any("OCR" in note for note in doc.notes)
