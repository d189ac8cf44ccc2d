from __future__ import annotations

import zipfile
from pathlib import Path

from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_epub
from tests.engine.rag.ingest.formats.helpers import reason

_ENCRYPTION = """<?xml version="1.0"?>
<encryption xmlns="urn:oasis:names:tc:opendocument:xmlns:container"
            xmlns:enc="http://www.w3.org/2001/04/xmlenc#">
  <enc:EncryptedData>
    <enc:EncryptionMethod Algorithm="{algorithm}"/>
    <enc:CipherData><enc:CipherReference URI="{uri}"/></enc:CipherData>
  </enc:EncryptedData>
</encryption>"""


def test_one_page_per_chapter_in_spine_order_without_navigation(tmp_path: Path) -> None:
    doc = parse_file(path=write_epub(path=tmp_path / "lighthouse.epub"))
    assert doc.page_count == 3
    assert [page.text.split("\n")[0] for page in doc.pages] == ["Arrival", "The keeper", "Storm"]
    assert doc.pages[1].text == (
        "The keeper\n\nThe lighthouse keeper was named Tobias Wren. "
        "He had lived alone for eleven winters."
    )
    # The book title (each chapter's <title>) is not repeated on every page.
    assert all("The Lighthouse" not in page.text for page in doc.pages)


def _with_encryption(source: Path, target: Path, *, uri: str, algorithm: str) -> Path:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            new.writestr(item, old.read(item.filename))
        new.writestr("META-INF/encryption.xml", _ENCRYPTION.format(uri=uri, algorithm=algorithm))
    return target


def test_drm_protected_chapters_are_refused_but_obfuscated_fonts_are_fine(
    tmp_path: Path,
) -> None:
    source = write_epub(path=tmp_path / "book.epub")
    drm = _with_encryption(
        source,
        tmp_path / "drm.epub",
        uri="EPUB/chap_2.xhtml",
        algorithm="http://www.w3.org/2001/04/xmlenc#aes128-cbc",
    )
    assert reason(drm) == ".epub file is DRM-protected (its chapters are encrypted)"
    fonts = _with_encryption(
        source,
        tmp_path / "fonts.epub",
        uri="EPUB/fonts/serif.otf",
        algorithm="http://www.idpf.org/2008/embedding",
    )
    assert parse_file(path=fonts).page_count == 3


def test_epub_without_its_package_files(tmp_path: Path) -> None:
    source = write_epub(path=tmp_path / "book.epub")
    target = tmp_path / "gutted.epub"
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            if item.filename != "META-INF/container.xml":
                new.writestr(item, old.read(item.filename))
    assert reason(target).startswith(".epub file is damaged")
