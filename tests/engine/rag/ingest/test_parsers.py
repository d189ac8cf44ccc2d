from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import docx
import pytest
from pypdf import PdfReader, PdfWriter

from engine.errors import ParseError
from engine.rag.ingest import parsers, safe_open
from engine.rag.ingest.parsers import SUPPORTED_SUFFIXES, ParsedDocument, parse_file
from resources import resource_path, sample_collection_dir
from tests.fixtures.fact_corpus import write_fact_corpus
from tests.fixtures.pdf_factory import PdfPage, RunningLines, write_image_only_pdf, write_pdf

RUNNING = RunningLines(
    header_left="Contoso Heat Pump HP-9 Service Manual",
    header_right="Edition 4",
    footer_left="Contoso Climate GmbH",
)


TOPICS = ("Safety", "Installation", "Refrigerant", "Defrosting", "Error codes", "Disposal")


def _manual(path: Path, pages: int = 5) -> Path:
    return write_pdf(
        path=path,
        pages=[
            PdfPage(
                heading=f"{n}. {TOPICS[n - 1]}",
                paragraphs=[f"Paragraph on page {n} explains the compressor setting number {n}."],
            )
            for n in range(1, pages + 1)
        ],
        running=RUNNING,
    )


def _reason(path: Path) -> str:
    with pytest.raises(ParseError) as caught:
        parse_file(path=path)
    return caught.value.reason


def _encrypted(source: Path, target: Path, *, user_password: str) -> Path:
    writer = PdfWriter(clone_from=PdfReader(source))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="RC4-128")
    with target.open("wb") as f:
        writer.write(f)
    return target


def test_supported_suffixes() -> None:
    assert {
        ".pdf",
        ".txt",
        ".md",
        ".markdown",
        ".html",
        ".htm",
        ".docx",
        ".pptx",
        ".xlsx",
        ".csv",
        ".tsv",
        ".odt",
        ".epub",
        ".rtf",
        ".eml",
        ".mbox",
        ".png",
        ".jpg",
        ".jpeg",
        ".tif",
        ".tiff",
    } == SUPPORTED_SUFFIXES


def test_pdf_pages_keep_their_numbers_and_lose_running_lines(tmp_path: Path) -> None:
    doc = parse_file(path=_manual(tmp_path / "manual.pdf"))
    assert isinstance(doc, ParsedDocument)
    assert doc.page_count == 5
    assert [p.number for p in doc.pages] == [1, 2, 3, 4, 5]
    for page in doc.pages:
        n = page.number
        assert f"compressor setting number {n}." in page.text
        assert "Contoso Climate GmbH" not in page.text
        assert "Page " not in page.text  # "Page n of 5"
    for page in doc.pages[1:]:
        assert "Service Manual" not in page.text
        assert page.text.startswith(f"{page.number}. {TOPICS[page.number - 1]}\n")
    # The first page keeps its header line: it is the title there.
    assert "Contoso Heat Pump HP-9 Service Manual" in doc.pages[0].text


def test_uppercase_suffix_is_supported(tmp_path: Path) -> None:
    assert parse_file(path=_manual(tmp_path / "MANUAL.PDF")).page_count == 5


def test_password_protected_pdf_is_refused(tmp_path: Path) -> None:
    locked = _encrypted(_manual(tmp_path / "m.pdf"), tmp_path / "locked.pdf", user_password="pw")
    assert _reason(locked) == "PDF is encrypted (password protected)"


def test_pdf_encrypted_with_empty_password_is_read(tmp_path: Path) -> None:
    source = _manual(tmp_path / "m.pdf")
    restricted = _encrypted(source, tmp_path / "restricted.pdf", user_password="")
    assert PdfReader(restricted).is_encrypted
    doc = parse_file(path=restricted)
    assert doc.page_count == 5
    assert "compressor setting number 3." in doc.pages[2].text


def test_aes_pdf_with_empty_password_is_read(tmp_path: Path) -> None:
    writer = PdfWriter(clone_from=PdfReader(_manual(tmp_path / "m.pdf")))
    writer.encrypt(user_password="", owner_password="owner", algorithm="AES-256")
    restricted = tmp_path / "aes.pdf"
    with restricted.open("wb") as f:
        writer.write(f)
    assert PdfReader(restricted).is_encrypted
    assert "compressor setting number 2." in parse_file(path=restricted).pages[1].text


@pytest.mark.parametrize("keep", [0.5, 0.1, 0.02])
def test_truncated_pdf_is_a_parse_error(tmp_path: Path, keep: float) -> None:
    data = _manual(tmp_path / "m.pdf").read_bytes()
    broken = tmp_path / "broken.pdf"
    broken.write_bytes(data[: int(len(data) * keep)])
    assert "PDF" in _reason(broken)


def test_pdf_noise_stays_off_stderr(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "garbage.pdf"
    broken.write_bytes(b"this is not a PDF at all\n" * 50)
    reason = _reason(broken)
    assert reason.startswith("PDF is damaged")
    assert capsys.readouterr().err == ""


def test_empty_and_whitespace_files(tmp_path: Path) -> None:
    (tmp_path / "empty.pdf").write_bytes(b"")
    (tmp_path / "empty.txt").write_bytes(b"")
    (tmp_path / "blank.md").write_text("  \n\n \t\n")
    assert _reason(tmp_path / "empty.pdf") == "empty file"
    assert _reason(tmp_path / "empty.txt") == "empty file"
    assert _reason(tmp_path / "blank.md") == "no text in the file"


def test_image_only_pdf_needs_ocr(tmp_path: Path) -> None:
    reason = _reason(write_image_only_pdf(path=tmp_path / "scan.pdf"))
    assert reason.startswith("no extractable text") and "OCR" in reason


def test_binary_file_named_txt(tmp_path: Path) -> None:
    fake = tmp_path / "photo.txt"
    fake.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20)
    assert _reason(fake) == "not a text file (binary content)"
    pdf_as_txt = tmp_path / "manual.txt"
    pdf_as_txt.write_bytes(_manual(tmp_path / "m.pdf").read_bytes())
    assert _reason(pdf_as_txt) == "not a text file (binary content)"


def test_utf16_and_cp1252_text_files(tmp_path: Path) -> None:
    (tmp_path / "u16.txt").write_bytes("Überprüfung der Heizung\r\nZeile zwei".encode("utf-16"))
    (tmp_path / "win.txt").write_bytes("Café – “Notizen” für 5 €".encode("cp1252"))
    doc = parse_file(path=tmp_path / "u16.txt")
    assert doc.pages == [parsers.PageText(number=None, text="Überprüfung der Heizung\nZeile zwei")]
    assert doc.page_count is None
    assert parse_file(path=tmp_path / "win.txt").pages[0].text == "Café – “Notizen” für 5 €"


def test_missing_file_directory_and_unsupported_type(tmp_path: Path) -> None:
    assert "not found" in _reason(tmp_path / "gone.pdf")
    folder = tmp_path / "folder.md"
    folder.mkdir()
    assert _reason(folder) == "is a folder, not a file"
    (tmp_path / "slides.odp").write_bytes(b"PK\x03\x04")
    assert _reason(tmp_path / "slides.odp") == "unsupported file type .odp"
    (tmp_path / "README").write_text("x")
    assert _reason(tmp_path / "README") == "unsupported file type (no extension)"


def test_permission_denied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "secret.txt"
    path.write_text("top secret")
    real_open = safe_open.open_listed_fd

    def deny(path_asked: Path) -> int:  # root reads a 0000 file: deny it this way
        if path_asked == path:
            raise PermissionError(13, "Permission denied", str(path_asked))
        return real_open(path_asked)

    monkeypatch.setattr(safe_open, "open_listed_fd", deny)
    assert _reason(path) == "permission denied"


def test_unexpected_library_errors_become_parse_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(**_: object) -> ParsedDocument:
        raise RuntimeError("something deep inside broke")

    monkeypatch.setattr(parsers, "_FORMATS", {".txt": parsers.FileFormat(parse=boom)})
    (tmp_path / "a.txt").write_text("hello")
    assert "something deep inside broke" in _reason(tmp_path / "a.txt")


def test_docx_paragraphs_and_tables_in_order(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Quarterly Report", level=1)
    document.add_paragraph("Sales grew in every region.")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Region", "Growth"
    table.cell(1, 0).text, table.cell(1, 1).text = "North", "12 %"
    document.add_paragraph("Outlook follows the table.")
    document.save(str(tmp_path / "report.docx"))
    text = parse_file(path=tmp_path / "report.docx").pages[0].text
    assert text == (
        "Quarterly Report\n\nSales grew in every region.\n\n"
        "Region | Growth\nNorth | 12 %\n\nOutlook follows the table."
    )


def test_docx_merged_cells_are_not_repeated(tmp_path: Path) -> None:
    document = docx.Document()
    table = document.add_table(rows=1, cols=3)
    merged = table.cell(0, 0).merge(table.cell(0, 1))
    merged.text = "Wide cell"
    table.cell(0, 2).text = "Narrow"
    document.save(str(tmp_path / "merged.docx"))
    assert parse_file(path=tmp_path / "merged.docx").pages[0].text == "Wide cell | Narrow"


def test_broken_docx(tmp_path: Path) -> None:
    (tmp_path / "renamed.docx").write_bytes(b"{\\rtf1 this is RTF}")
    assert "not a valid .docx" in _reason(tmp_path / "renamed.docx")


def test_html_keeps_headings_and_paragraphs_without_script_or_nav(tmp_path: Path) -> None:
    (tmp_path / "page.htm").write_text(
        "<html><head><title>Garden tips</title><style>p{color:red}</style>"
        "<script>var secretTracker = 1;</script></head><body>"
        "<nav>Home | About</nav><h1>Pruning roses</h1>"
        "<p>Cut  above an\n outward <b>facing</b> bud.<br>Use clean shears.</p>"
        "<ul><li>Spring</li><li>Autumn</li></ul><!-- a comment -->"
        "<table><tr><th>Tool</th><th>Use</th></tr><tr><td>Shears</td><td>Stems</td></tr></table>"
        "</body></html>",
        encoding="utf-8",
    )
    text = parse_file(path=tmp_path / "page.htm").pages[0].text
    assert text == (
        "Garden tips\n\nPruning roses\n\nCut above an outward facing bud.\nUse clean shears."
        "\n\nSpring\nAutumn\n\nTool | Use\nShears | Stems"
    )


def test_html_honours_declared_charset_and_survives_deep_nesting(tmp_path: Path) -> None:
    (tmp_path / "old.html").write_bytes(
        "<meta charset='windows-1252'><p>Prix: 5 € – été</p>".encode("cp1252")
    )
    assert parse_file(path=tmp_path / "old.html").pages[0].text == "Prix: 5 € – été"
    (tmp_path / "deep.html").write_text("<div>" * 5000 + "deep text")
    assert parse_file(path=tmp_path / "deep.html").pages[0].text == "deep text"


def test_html_reads_formulas_in_running_text_but_not_pictures(tmp_path: Path) -> None:
    # Sphinx draws inline maths as images with the TeX as alt text (the Spanish
    # expEYES-17 manual's "una resistencia de carga de 1~k\\Omega"); dropped, the
    # sentence lost its value. MathML is read without its TeX copy.
    (tmp_path / "page.html").write_text(
        '<p>Conecte una resistencia de <img class="math" src="m/7f.png" alt="1~k\\Omega"/>'
        " en paralelo.</p>"
        '<img alt="_images/halfwave-screen.png" src="x.png"/>'
        '<p><img alt="The whole board, seen from above" src="board.png"></p>'
        "<p>Energy is <math><mi>E</mi><mo>=</mo><mi>m</mi><msup><mi>c</mi><mn>2</mn></msup>"
        '<annotation encoding="application/x-tex">E=mc^2</annotation></math> here.</p>',
        encoding="utf-8",
    )
    text = parse_file(path=tmp_path / "page.html").pages[0].text
    assert text == "Conecte una resistencia de 1~k\\Omega en paralelo.\n\nEnergy is E=mc2 here."


def test_sample_collection_parses() -> None:
    folder = sample_collection_dir()
    assert folder == resource_path("samples")
    markdown = parse_file(path=folder / "ragdoll-user-guide.md")
    pdf = parse_file(path=folder / "ragdoll-user-guide.pdf")
    assert pdf.page_count is not None and pdf.page_count >= 3
    assert "ragdoll ingest" in markdown.pages[0].text
    pdf_text = " ".join(" ".join(p.text for p in pdf.pages).split())
    # The PDF is generated from the Markdown: its headings must all be there.
    for line in markdown.pages[0].text.splitlines():
        if line.startswith("## "):
            assert line[3:].strip() in pdf_text, line


def test_fact_corpus_states_every_fact_on_its_page(tmp_path: Path) -> None:
    questions = write_fact_corpus(folder=tmp_path)
    assert len(questions) >= 24
    assert len({q.question for q in questions}) == len(questions)
    names = {q.file_name for q in questions}
    assert {Path(n).suffix for n in names} == {".pdf", ".md", ".txt", ".html", ".docx"}
    docs = {name: parse_file(path=tmp_path / name) for name in names}
    for q in questions:
        doc = docs[q.file_name]
        fact = " ".join(q.fact.split())
        holding = [p.number for p in doc.pages if fact in " ".join(p.text.split())]
        assert holding == [q.page], q
        assert fact.lower() not in q.question.lower()
    for doc in docs.values():
        if doc.page_count is not None:
            assert 4 <= doc.page_count <= 8


def test_fact_corpus_is_deterministic(tmp_path: Path) -> None:
    first = write_fact_corpus(folder=tmp_path / "a")
    second = write_fact_corpus(folder=tmp_path / "b")
    assert first == second
    for name in {q.file_name for q in first if q.file_name.endswith((".pdf", ".md", ".txt"))}:
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_every_format_names_a_parser_and_none_is_imported_before_its_file(
    tmp_path: Path,
) -> None:
    """The registry names each parser by module and function: a typo shows here, not at
    the first such file; and an engine or parsing child that reads no slides imports
    no slide library (the parsers' libraries took 0.45 s of every start)."""
    for suffix, file_format in parsers._FORMATS.items():
        assert callable(file_format.parser()), suffix
    text = tmp_path / "notes.txt"
    text.write_text("a note")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from engine.rag.ingest.parsers import parse_file\n"
        f"assert parse_file(path=Path({str(text)!r})).pages[0].text == 'a note'\n"
        "print(sorted(m for m in ('pptx', 'openpyxl', 'ebooklib', 'docx') if m in sys.modules))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd=Path(__file__).resolve().parents[4],
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
