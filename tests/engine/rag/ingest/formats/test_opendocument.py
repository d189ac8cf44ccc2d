from __future__ import annotations

import zipfile
from pathlib import Path

from odf.opendocument import OpenDocumentSpreadsheet

from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_odt
from tests.engine.rag.ingest.formats.helpers import reason


def test_headings_paragraphs_lists_tables_and_spaces(tmp_path: Path) -> None:
    doc = parse_file(path=write_odt(path=tmp_path / "handbook.odt"))
    assert doc.page_count is None
    assert doc.pages[0].text == (
        "Staff handbook\n\n"
        "Welcome to the company.\nPlease read this handbook carefully.\n\n"
        "Leave\n\n"
        "Employees receive 28 days of paid holiday per year.\n\n"
        "- Sick leave needs a certificate after three days.\n- Parental leave\n\n"
        "Day | Hours\nFriday | 9 to 14\n\n"
        "Two  spaces kept."
    )


def _rewrite(source: Path, target: Path, *, replace: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for item in old.infolist():
            new.writestr(item, replace.get(item.filename, old.read(item.filename)))
    return target


def test_password_protected_odt(tmp_path: Path) -> None:
    source = write_odt(path=tmp_path / "plain.odt")
    manifest = zipfile.ZipFile(source).read("META-INF/manifest.xml")
    encrypted_manifest = manifest.replace(
        b'manifest:full-path="content.xml"',
        b'manifest:full-path="content.xml"><manifest:encryption-data '
        b'manifest:checksum-type="SHA1/1K" manifest:checksum="AAAA"/></manifest:file-entry'
        b'><manifest:file-entry manifest:media-type="" manifest:full-path="x"',
    )
    assert encrypted_manifest != manifest
    locked = _rewrite(
        source,
        tmp_path / "locked.odt",
        replace={"META-INF/manifest.xml": encrypted_manifest, "content.xml": bytes(range(256))},
    )
    assert reason(locked) == ".odt file is encrypted (password protected)"


def test_damaged_and_misnamed_odt(tmp_path: Path) -> None:
    source = write_odt(path=tmp_path / "plain.odt")
    broken = _rewrite(source, tmp_path / "broken.odt", replace={"content.xml": b"<office:doc"})
    assert reason(broken).startswith(".odt file is damaged")
    OpenDocumentSpreadsheet().save(str(tmp_path / "sheet.ods"))
    (tmp_path / "sheet.odt").write_bytes((tmp_path / "sheet.ods").read_bytes())
    assert reason(tmp_path / "sheet.odt") == (
        "not an OpenDocument text file (it is application/vnd.oasis.opendocument.spreadsheet)"
    )
