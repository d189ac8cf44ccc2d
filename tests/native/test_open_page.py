from __future__ import annotations

from pathlib import Path

import pytest

from native.open_page import open_at_page, viewer_command


def only(*programs: str):  # type: ignore[no-untyped-def]
    return lambda name: f"/usr/bin/{name}" if name in programs else None


PDF = Path("/docs/manual.pdf")


def test_evince_is_preferred_and_gets_the_page_index() -> None:
    cmd = viewer_command(path=PDF, page=7, system="Linux", which=only("evince", "okular"))
    assert cmd.argv == ["/usr/bin/evince", "--page-index=7", "/docs/manual.pdf"]
    assert cmd.honours_page


def test_okular_and_zathura_take_dash_dash_page() -> None:
    assert viewer_command(path=PDF, page=3, system="Linux", which=only("okular")).argv == [
        "/usr/bin/okular",
        "--page",
        "3",
        "/docs/manual.pdf",
    ]
    assert viewer_command(path=PDF, page=3, system="Linux", which=only("zathura")).argv[1:3] == [
        "--page",
        "3",
    ]


def test_without_a_page_aware_viewer_linux_falls_back_to_xdg_open() -> None:
    cmd = viewer_command(path=PDF, page=3, system="Linux", which=only())
    assert cmd.argv == ["xdg-open", "/docs/manual.pdf"] and not cmd.honours_page


def test_non_pdf_documents_open_with_the_default_app_whatever_the_page() -> None:
    cmd = viewer_command(path=Path("/d/notes.md"), page=2, system="Linux", which=only("evince"))
    assert cmd.argv == ["xdg-open", "/d/notes.md"]


def test_macos_uses_open() -> None:
    cmd = viewer_command(path=PDF, page=4, system="Darwin", which=only("evince"))
    assert cmd.argv == ["open", "/docs/manual.pdf"] and not cmd.honours_page


def test_windows_uses_sumatra_for_pages_else_the_shell() -> None:
    sumatra = viewer_command(path=PDF, page=9, system="Windows", which=only("SumatraPDF"))
    assert sumatra.argv == ["/usr/bin/SumatraPDF", "-page", "9", "/docs/manual.pdf"]
    shell = viewer_command(path=PDF, page=9, system="Windows", which=only())
    assert shell.argv == ["cmd", "/c", "start", "", "/docs/manual.pdf"]


def test_a_page_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="page"):
        viewer_command(path=PDF, page=0, system="Linux", which=only("evince"))


def test_open_at_page_launches_the_command_and_refuses_a_missing_file(tmp_path: Path) -> None:
    doc = tmp_path / "a b.pdf"
    doc.write_bytes(b"%PDF-1.4\n")
    launched: list[list[str]] = []
    cmd = open_at_page(
        path=doc, page=2, system="Linux", which=only("okular"), launch=launched.append
    )
    assert launched == [cmd.argv] == [["/usr/bin/okular", "--page", "2", str(doc)]]
    with pytest.raises(FileNotFoundError, match=r"missing\.pdf"):
        open_at_page(path=tmp_path / "missing.pdf", page=1, launch=launched.append)
    assert len(launched) == 1
