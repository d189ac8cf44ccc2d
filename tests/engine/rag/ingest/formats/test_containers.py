"""What every zip-based format says about files that are not what their name
promises: password-protected Office files, old binary files renamed, cut-off
downloads, other formats renamed, archives that unpack to gigabytes."""

from __future__ import annotations

import zipfile
from collections.abc import Callable
from pathlib import Path

import docx
import pytest

from engine.rag.ingest.formats import containers
from engine.rag.ingest.parsers import parse_file
from tests.engine.rag.ingest.formats.documents import write_epub, write_odt, write_pptx, write_xlsx
from tests.engine.rag.ingest.formats.helpers import reason
from tests.engine.rag.ingest.formats.ole2 import write_encrypted_office_file, write_legacy_xls


def _write_docx(*, path: Path) -> Path:
    document = docx.Document()
    document.add_paragraph("A short memo about the parking rules.")
    document.save(str(path))
    return path


ZIP_FORMATS: dict[str, Callable[..., Path]] = {
    ".docx": _write_docx,
    ".pptx": write_pptx,
    ".xlsx": write_xlsx,
    ".odt": write_odt,
    ".epub": write_epub,
}
OFFICE = (".docx", ".pptx", ".xlsx")


@pytest.mark.parametrize("suffix", OFFICE)
def test_password_protected_office_file(tmp_path: Path, suffix: str) -> None:
    locked = write_encrypted_office_file(path=tmp_path / f"locked{suffix}")
    assert reason(locked) == f"{suffix} file is encrypted (password protected)"


def test_old_binary_file_renamed(tmp_path: Path) -> None:
    legacy = write_legacy_xls(path=tmp_path / "budget.xlsx")
    assert reason(legacy) == (
        "this is an old binary .xls file renamed to .xlsx; open it and save it as .xlsx"
    )


@pytest.mark.parametrize("suffix", list(ZIP_FORMATS))
@pytest.mark.parametrize("keep", [0.05, 0.5, 0.97])
def test_truncated_file(tmp_path: Path, suffix: str, keep: float) -> None:
    data = ZIP_FORMATS[suffix](path=tmp_path / f"whole{suffix}").read_bytes()
    cut = tmp_path / f"cut{suffix}"
    cut.write_bytes(data[: int(len(data) * keep)])
    assert reason(cut) == f"{suffix} file is damaged or truncated (broken zip container)"


@pytest.mark.parametrize("suffix", list(ZIP_FORMATS))
def test_other_format_renamed(tmp_path: Path, suffix: str) -> None:
    renamed = tmp_path / f"renamed{suffix}"
    renamed.write_bytes(b"{\\rtf1 this is RTF}" * 20)
    assert reason(renamed) == f"not a valid {suffix} file (damaged, or another format renamed)"


@pytest.mark.parametrize("suffix", list(ZIP_FORMATS))
def test_corrupted_member_is_a_damaged_file(tmp_path: Path, suffix: str) -> None:
    source = ZIP_FORMATS[suffix](path=tmp_path / f"whole{suffix}")
    # Flip bytes inside every compressed member's data: CRC or inflate errors.
    data = bytearray(source.read_bytes())
    with zipfile.ZipFile(source) as archive:
        for info in archive.infolist():
            if info.compress_size > 40:
                start = info.header_offset + 30 + len(info.filename) + len(info.extra)
                for offset in range(start + 10, start + 20):
                    data[offset] ^= 0xFF
    broken = tmp_path / f"broken{suffix}"
    broken.write_bytes(bytes(data))
    text = reason(broken)
    assert text.startswith((f"{suffix} file is damaged", f"not a valid {suffix} file")), text


@pytest.mark.parametrize("suffix", list(ZIP_FORMATS))
def test_empty_zip_archive(tmp_path: Path, suffix: str) -> None:
    empty = tmp_path / f"empty{suffix}"
    zipfile.ZipFile(empty, "w").close()
    text = reason(empty)
    assert text.startswith((f"{suffix} file is damaged", f"not a valid {suffix} file")), text


def test_archive_that_unpacks_too_large_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(containers, "MAX_UNPACKED_BYTES", 1000)
    deck = write_pptx(path=tmp_path / "deck.pptx")
    assert reason(deck).startswith(".pptx file unpacks to ") and "more than" in reason(deck)
    # xlsx worksheets are streamed, so they do not count; the rest does.
    with zipfile.ZipFile(write_xlsx(path=tmp_path / "book.xlsx")) as archive:
        other = sum(
            i.file_size for i in archive.infolist() if not i.filename.startswith("xl/worksheets/")
        )
    monkeypatch.setattr(containers, "MAX_UNPACKED_BYTES", other)
    assert parse_file(path=tmp_path / "book.xlsx").page_count == 3
